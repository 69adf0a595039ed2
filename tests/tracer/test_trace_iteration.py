"""Issue 22 item 4: Python iteration over a tensor inside a trace works as eagerly (the shape is static); value
reads stay a TraceError; writable repeat / contiguous; torch's in-place variants; Tensor.type."""
import numpy as np
import pytest

import autodiff
import ir
import tracer
from tests.torch_optional import torch

A = np.arange(6, dtype="float32").reshape(3, 2) / 4
B = np.array([[1.0, -1.0], [0.5, 2.0], [3.0, 0.0]], "float32")


def _loops(m, x, y):
    total = 0
    for i, (row, other) in enumerate(zip(x, y, strict=True)):
        total = total + (row * other).sum() * (i + 1)
    first, *rest = list(x)
    a, b = first  # unpacking a row
    return total + a * b + sum(r.sum() for r in rest)


def test_iteration_traced_eager_and_torch_agree():
    want = _loops(torch, torch.tensor(A), torch.tensor(B)).item()
    assert abs(_loops(tracer, tracer.tensor(A), tracer.tensor(B)).item() - want) < 1e-5
    out = ir.Executor(tracer.trace(lambda x, y: _loops(tracer, x, y), A, B))["main"](A, B)
    assert abs(float(out) - want) < 1e-5


def test_iteration_inside_value_and_grad_gives_torch_gradients():
    x = tracer.tensor(A)
    value, g = autodiff.value_and_grad(lambda x: _loops(tracer, x, tracer.tensor(B)), x)(x)
    t = torch.tensor(A, requires_grad=True)
    _loops(torch, t, torch.tensor(B)).backward()
    assert abs(value.item() - _loops(torch, torch.tensor(A), torch.tensor(B)).item()) < 1e-5
    np.testing.assert_allclose(g.numpy(), t.grad.numpy(), rtol=1e-5)


def test_zero_d_iteration_and_value_reads():
    with pytest.raises(TypeError, match="iteration over a 0-d tensor"):
        iter(torch.tensor(1.0))
    with pytest.raises(TypeError, match="iteration over a 0-d tensor"):
        tracer.trace(lambda x: list(x), np.array(1.0, "float32"))
    for read in (lambda x: x.tolist(), lambda x: bool(x[0, 0]), lambda x: int(x[0, 0])):
        with pytest.raises(tracer.TraceError, match="inside a trace"):
            tracer.trace(lambda x, read=read: (read(x), x)[1], A)


def test_repeat_and_expand_contiguous_are_writable():
    for m in (tracer, torch):
        y = m.tensor(A[0]).repeat(2, 2).div_(2)
        z = m.tensor(A[:1]).expand(3, 2).contiguous()
        z.mul_(3)
        np.testing.assert_allclose(np.asarray(y), np.tile(A[0], (2, 2)) / 2)
        np.testing.assert_allclose(np.asarray(z), np.broadcast_to(A[:1], (3, 2)) * 3)


INPLACE = [("triu_", (1,)), ("tril_", (-1,)), ("clamp_", (0.1, 0.9)), ("fill_", (2.5,)), ("zero_", ()),
           ("abs_", ()), ("neg_", ()), ("exp_", ()), ("log_", ()), ("sqrt_", ()), ("sigmoid_", ()), ("tanh_", ()),
           ("relu_", ()), ("sin_", ()), ("cos_", ()), ("rsqrt_", ()), ("copy_", ("B",)), ("masked_fill_", ("mask", 7.0))]


@pytest.mark.parametrize("name, args", INPLACE, ids=[n for n, _ in INPLACE])
def test_inplace_variants_as_torch(name, args):
    def run(m, x):
        real = [m.tensor(B) if a == "B" else m.tensor(B > 0.7) if a == "mask" else a for a in args]
        out = getattr(x, name)(*real)
        assert out is x
        return x
    data = A + 0.25
    want = run(torch, torch.tensor(data)).numpy()
    np.testing.assert_allclose(run(tracer, tracer.tensor(data)).numpy(), want, rtol=1e-6)
    traced = ir.Executor(tracer.trace(lambda x: run(tracer, x * 1), data))["main"](data)
    np.testing.assert_allclose(traced, want, rtol=1e-6)


def test_tensor_type_as_torch():
    for dtype in ("float32", "float64", "int64", "int32", "bool", "uint8", "int8", "int16", "float16"):
        assert tracer.zeros((1,), dtype=dtype).type() == torch.zeros(1, dtype=getattr(torch, dtype)).type()
    x = tracer.tensor(A)
    assert x.type("float64").dtype == "float64" and x.type("torch.IntTensor").dtype == "int32"
    assert x.type == ir.TensorType((3, 2), "float32") and x.type.shape == (3, 2)  # still the IR type
    with pytest.raises(ValueError):
        x.type("torch.NoSuchTensor")
