"""The out= forms of the specialized kernels (ir.runtime.specialize.planned): called with `out=` and planned
`scratch=` arrays they return `out` holding bit for bit what they return when they allocate, on the sizes and
values of a GPT step (NaN, infinities, signed zeros included), and a linear layer's (..., K) @ (K, N) runs as
one 2-D GEMM with matmul's values."""
import numpy as np
import pytest

from ir.nodes import Call, Tuple, Var
from ir.runtime import specialize as sp
from ir.types import TensorType, TupleType


def _kernel(op, arg_types, out_type, **attrs):
    return sp._BUILDERS[op](op, arg_types, out_type, **attrs)


def _t(shape, dtype="float32"):
    return TensorType(tuple(shape), dtype)


def _edges(rng, shape, dtype="float32"):
    x = rng.standard_normal(shape).astype(dtype) * 3
    flat = x.reshape(-1)
    flat[:6] = [np.nan, np.inf, -np.inf, -0.0, 0.0, 1e-45]
    return x


def _with_out(kernel, args, out_shape, dtype="float32"):
    out = np.full(out_shape, 7.0, dtype)  # stale values: the kernel must overwrite every element
    scratch = tuple(np.full(shape, 5.0, dt) for shape, dt in getattr(kernel, "scratch", ()))
    kw = {"scratch": scratch} if scratch else {}
    got = kernel(*args, out=out, **kw)
    assert got is out
    return got


CASES = [  # (op, argument shapes, result shape, attrs)
    ("nn.gelu", [(16, 64, 512)], (16, 64, 512), {"approximate": "tanh"}),
    ("nn.layer_norm", [(16, 64, 128), (128,), (128,)], (16, 64, 128), {"axes": (-1,), "epsilon": 1e-5}),
    ("nn.softmax", [(16, 4, 64, 64)], (16, 4, 64, 64), {"axis": -1}),
    ("nn.log_softmax", [(1024, 64)], (1024, 64), {"axis": -1}),
    ("nn.log_softmax", [(8, 5, 6)], (8, 5, 6), {"axis": 1}),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("op, shapes, out_shape, attrs", CASES, ids=[c[0] + str(c[1][0]) for c in CASES])
def test_out_form_equals_the_allocating_form(op, shapes, out_shape, attrs, dtype):
    rng = np.random.default_rng(0)
    kernel = _kernel(op, [_t(s, dtype) for s in shapes], _t(out_shape, dtype), **attrs)
    assert kernel.takes_out and kernel.fresh
    args = [_edges(rng, s, dtype) for s in shapes]
    with np.errstate(all="ignore"):
        want = kernel(*args)
        got = _with_out(kernel, args, out_shape, dtype)
    assert got.tobytes() == want.tobytes()


def test_where_out_form_copies_the_kernels_bits():
    rng = np.random.default_rng(1)
    x = _edges(rng, (16, 4, 64, 64))
    mask = np.triu(np.ones((64, 64), bool), 1)
    for c, a, b in [(mask, np.float32(-np.inf), x), (rng.random(x.shape) > 0.5, x, np.float32(0.0))]:
        kernel = _kernel("where", [_t(c.shape, "bool"), _t(np.shape(a)), _t(np.shape(b))], _t(x.shape))
        want = kernel(c, a, b)
        assert _with_out(kernel, (c, a, b), x.shape).tobytes() == want.tobytes()


def test_concat_out_form():
    rng = np.random.default_rng(2)
    parts = [rng.standard_normal((16, 64, 128)).astype("float32") for _ in range(3)]
    call_types = [_t(p.shape) for p in parts]
    kernel = _kernel("concat", call_types, _t((16, 64, 384)), axis=2)
    assert _with_out(kernel, (tuple(parts),), (16, 64, 384)).tobytes() == np.concatenate(parts, 2).tobytes()
    # specialize() reads the types of concat's tuple argument
    xs = [Var(f"x{i}", t) for i, t in enumerate(call_types)]
    call = Call("concat", (Tuple(tuple(xs)),), {"axis": 2}, _t((16, 64, 384)))
    assert isinstance(call.args[0].type, TupleType) and sp.specialize(call, np) is not None


def test_reshape_out_form_views_where_it_can_and_copies_into_out_where_it_must():
    x = np.arange(16 * 4 * 64 * 32, dtype="float32").reshape(16, 4, 64, 32)
    kernel = _kernel("reshape", [_t((16, 64, 4, 32))], _t((16, 64, 128)))
    assert kernel.takes_out and not kernel.fresh  # it may hand back a view of its operand
    permuted = x.transpose(0, 2, 1, 3)
    out = np.empty((16, 64, 128), "float32")
    got = kernel(permuted, out=out)
    assert got is out and got.tobytes() == permuted.reshape(16, 64, 128).tobytes()
    split = _kernel("reshape", [_t((16, 64, 128))], _t((16, 64, 4, 32)))
    strided = np.zeros((16, 64, 384), "float32")[:, :, 128:256]  # a slice of a qkv buffer: splits as a view
    view = split(strided, out=np.empty((16, 64, 4, 32), "float32"))
    assert view.base is strided.base


@pytest.mark.parametrize("lead", [(16, 64), (1024,), (2, 3, 5)])
def test_a_linear_layer_runs_as_one_2d_gemm_with_matmuls_values(lead):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((*lead, 128)).astype("float32")
    w = rng.standard_normal((384, 128)).astype("float32").T  # a transposed weight, as nn.Linear's
    kernel = _kernel("matmul", [_t(x.shape), _t(w.shape)], _t((*lead, 384)))
    want = np.matmul(x, w)
    if len(lead) == 1:
        assert kernel is np.matmul
        return
    got = kernel(x, w)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    out = np.empty(want.shape, "float32")
    assert kernel(x, w, out=out) is out and out.tobytes() == got.tobytes()
    strided = np.repeat(x, 2, axis=-1)[..., ::2]  # not contiguous: the stacked product, into out
    assert kernel(strided, w, out=out) is out
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("g_value", [1.0, -2.5, np.nan])
def test_nll_loss_backward_equals_the_kernel_bit_for_bit(reduction, g_value):
    from ir.ops.loss import _nll_loss_backward
    rng = np.random.default_rng(4)
    pred = rng.standard_normal((1024, 64)).astype("float32")
    targets = rng.integers(0, 64, 1024)
    targets[::5] = -100  # ignored rows: -0.0 or 0.0 by coef's sign, as the one-hot product
    g = np.full((1024,) if reduction == "none" else (), g_value, "float32")
    kernel = _kernel("grad.nll_loss_backward", [_t(g.shape), _t(pred.shape), _t(targets.shape, "int64")],
                     _t(pred.shape), reduction=reduction, ignore_index=-100)
    want = _nll_loss_backward(np, g, pred, targets, reduction, -100)
    assert kernel(g, pred, targets).tobytes() == want.tobytes()
    assert _with_out(kernel, (g, pred, targets), pred.shape).tobytes() == want.tobytes()
    targets[3] = 64
    with pytest.raises(IndexError, match="target 64 out of range for 64 classes"):
        kernel(g, pred, targets)
