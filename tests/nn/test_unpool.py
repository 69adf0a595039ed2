"""nn.MaxUnpool1d/2d and F.max_unpool1d/2d against torch (issue 21 item 4's unpooling): from max pooling's
return_indices, outputs and input gradients eagerly with loss.backward(), in a compiled value_and_grad step
and by float64 finite differences; output_size, padding, unbatched input, torch's repr and errors."""
import numpy as np
import pytest

import autodiff
import nn
import tracer
from nn import functional as F
from tests.torch_optional import torch

rng = np.random.default_rng(5)
CASES = [  # (nd, input shape, kernel, stride, padding, output_size)
    (2, (2, 3, 6, 6), 2, None, 0, None),
    (2, (1, 2, 7, 5), 3, 2, 1, None),
    (2, (2, 1, 5, 5), 2, 2, 0, (2, 1, 5, 5)),
    (2, (3, 6, 6), 2, None, 0, None),  # unbatched
    (1, (2, 3, 9), 3, 2, 1, None),
    (1, (2, 8), 2, None, 0, (9,)),  # unbatched
]


def _pool(lib, nd, x, k, s, p):
    fn = getattr(lib.nn.functional if lib is torch else F, f"max_pool{nd}d")
    if x.ndim == nd + 1:  # unbatched: pooled with a batch of one, unpooled without it
        y, idx = fn(x[None], k, s, p, return_indices=True)
        return y[0], idx[0]
    return fn(x, k, s, p, return_indices=True)


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}d-{i}" for i, c in enumerate(CASES)])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_matches_torch(case, dtype):
    if torch is None:
        pytest.skip("torch is not installed")
    nd, shape, k, s, p, size = case
    x = rng.standard_normal(shape).astype(dtype)
    w = None
    results = {}
    for lib in ("ours", "torch"):
        if lib == "ours":
            xt = tracer.tensor(x, requires_grad=True)
            y, idx = _pool(tracer, nd, xt, k, s, p)
            out = getattr(nn, f"MaxUnpool{nd}d")(k, s, p)(y, idx, output_size=size)
        else:
            xt = torch.tensor(x, requires_grad=True)
            y, idx = _pool(torch, nd, xt, k, s, p)
            out = getattr(torch.nn, f"MaxUnpool{nd}d")(k, s, p)(y, idx, output_size=size)
        w = rng.standard_normal(tuple(out.shape)).astype(dtype) if w is None else w
        (out * (tracer.tensor(w) if lib == "ours" else torch.tensor(w))).sum().backward()
        results[lib] = (np.asarray(out.detach().numpy()), np.asarray(xt.grad.numpy()), np.asarray(idx.numpy()))
    tol = dict(rtol=1e-10) if dtype == "float64" else dict(rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(results["ours"][2], results["torch"][2])
    for a, b in zip(results["ours"][:2], results["torch"][:2], strict=True):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, **tol)


def test_compiled_step_and_finite_differences():
    x = rng.standard_normal((2, 2, 6, 6))
    unpool = nn.MaxUnpool2d(2)
    w = tracer.tensor(rng.standard_normal((2, 2, 6, 6)))

    def f(x):
        y, idx = F.max_pool2d(x, 2, return_indices=True)
        return (unpool(y * y, idx) * w).sum()
    step = autodiff.value_and_grad(f, argnums=0)
    xt = tracer.tensor(x, requires_grad=True)
    f(xt).backward()
    value, g = step(tracer.tensor(x))
    np.testing.assert_allclose(float(value), float(f(tracer.tensor(x))), rtol=1e-12)
    np.testing.assert_allclose(g.numpy(), xt.grad.numpy(), rtol=1e-12)
    assert autodiff.gradcheck(lambda y: (F.max_unpool2d(y, tracer.tensor(np.array([[[[0, 3], [9, 14]]]])), 2)
                                         * w[:1, :1, :4, :4]).sum(), tracer.tensor(rng.standard_normal((1, 1, 2, 2))))


def test_repr_and_errors():
    assert repr(nn.MaxUnpool2d(2)) == "MaxUnpool2d(kernel_size=(2, 2), stride=(2, 2), padding=(0, 0))"
    assert repr(nn.MaxUnpool1d(3, 2, 1)) == "MaxUnpool1d(kernel_size=(3,), stride=(2,), padding=(1,))"
    y = tracer.tensor(np.ones((1, 1, 2, 2)))
    with pytest.raises(ValueError, match="indices shape"):
        F.max_unpool2d(y, tracer.tensor(np.zeros((1, 1, 2, 1), "int64")), 2)
    with pytest.raises(TypeError, match="int64"):
        F.max_unpool2d(y, tracer.tensor(np.zeros((1, 1, 2, 2))), 2)
    with pytest.raises(ValueError, match="output_size"):
        F.max_unpool2d(y, tracer.tensor(np.zeros((1, 1, 2, 2), "int64")), 2, output_size=(9, 9))
