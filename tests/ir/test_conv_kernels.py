"""ir/runtime/conv_kernels.py against the reference kernels of ir/ops/conv.py and pool.py (which it replaces
through provide_kernel), on strides, padding, dilation, ceil_mode, NaN windows, float64 and empty batches, and
against torch."""
import numpy as np
import pytest

from ir.ops.registry import get_op
from ir.runtime import conv_kernels as K
from tests.torch_optional import torch

R = K._REFERENCE
CONV = [  # (N, C, H, W, O, kh, kw, strides, padding, dilation)
    (2, 1, 9, 8, 3, 3, 3, (1, 1), (0, 0, 0, 0), (1, 1)),
    (3, 4, 10, 11, 5, 3, 2, (2, 1), (1, 0, 2, 1), (1, 1)),
    (2, 3, 12, 9, 4, 2, 3, (1, 2), (0, 1, 0, 1), (2, 1)),
    (1, 2, 7, 7, 2, 1, 1, (3, 3), (0, 0, 0, 0), (1, 1)),
    (2, 3, 9, 10, 4, 3, 2, (1, 1), (2, 0, 1, 3), (2, 3)),  # stride 1: the input gradient as a correlation
    (0, 2, 6, 6, 3, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1)),
]


def test_installed():
    for name in R:
        assert get_op(name).kernel is getattr(K, name.split(".")[1])


@pytest.mark.parametrize("case", CONV)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_conv2d_matches_reference(case, dtype):
    n, c, h, w, o, kh, kw, s, p, d = case
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, c, h, w)).astype(dtype)
    wt = rng.standard_normal((o, c, kh, kw)).astype(dtype)
    ref = R["nn.conv2d"](np, x, wt, s, p, d, 1)
    got = K.conv2d(np, x, wt, s, p, d, 1)
    tol = 1e-4 if dtype == "float32" else 1e-12
    assert got.shape == ref.shape and got.dtype == ref.dtype
    np.testing.assert_allclose(got, ref, rtol=tol, atol=tol)
    g = rng.standard_normal(ref.shape).astype(dtype)
    for name, fn, args in (("grad.conv2d_weight_backward", K.conv2d_weight_backward, (g, x, s, p, d, 1, wt.shape)),
                           ("grad.conv2d_input_backward", K.conv2d_input_backward, (g, wt, s, p, d, 1, x.shape))):
        ref, got = R[name](np, *args), fn(np, *args)
        assert got.shape == ref.shape and got.dtype == ref.dtype
        np.testing.assert_allclose(got, ref, rtol=tol, atol=tol * 10)


def test_conv2d_groups_falls_back():
    rng = np.random.default_rng(1)
    x, wt = rng.standard_normal((2, 4, 6, 6)), rng.standard_normal((6, 2, 3, 3))
    np.testing.assert_array_equal(K.conv2d(np, x, wt, (1, 1), (0,) * 4, (1, 1), 2),
                                  R["nn.conv2d"](np, x, wt, (1, 1), (0,) * 4, (1, 1), 2))


POOL = [  # (shape, pool_size, strides, padding, dilation, ceil_mode)
    ((2, 3, 8, 8), (2, 2), (2, 2), (0, 0, 0, 0), (1, 1), False),
    ((2, 2, 9, 7), (3, 2), (2, 1), (1, 0, 1, 1), (1, 1), True),
    ((1, 2, 10, 10), (2, 3), (1, 2), (0, 1, 0, 1), (2, 1), False),
    ((1, 1, 7, 7), (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), True),
]


@pytest.mark.parametrize("case", POOL)
def test_max_pool2d_matches_reference(case):
    shape, k, s, p, d, ceil = case
    rng = np.random.default_rng(2)
    x = rng.standard_normal(shape).astype("float32")
    x.flat[::5] = 0.5  # ties: the first maximum gets the gradient
    x.flat[3] = np.nan
    ref = R["nn.max_pool2d"](np, x, k, s, p, d, ceil)
    got = K.max_pool2d(np, x, k, s, p, d, ceil)
    np.testing.assert_array_equal(got, ref)
    g = rng.standard_normal(ref.shape).astype("float32")
    np.testing.assert_allclose(K.max_pool2d_backward(np, g, x, k, s, p, d, ceil),
                               R["grad.max_pool2d_backward"](np, g, x, k, s, p, d, ceil), rtol=1e-6, atol=1e-6)


@pytest.mark.skipif(torch is None, reason="torch not installed")
def test_mnist_layers_against_torch():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 32, 26, 26)).astype("float32")
    wt = rng.standard_normal((64, 32, 3, 3)).astype("float32") * 0.1
    xt, wtt = torch.tensor(x, requires_grad=True), torch.tensor(wt, requires_grad=True)
    yt = torch.nn.functional.max_pool2d(torch.nn.functional.conv2d(xt, wtt), 2)
    gt = torch.tensor(rng.standard_normal(yt.shape).astype("float32"))
    yt.backward(gt)
    y = K.conv2d(np, x, wt, (1, 1), (0,) * 4, (1, 1), 1)
    np.testing.assert_allclose(K.max_pool2d(np, y, (2, 2), (2, 2), (0,) * 4, (1, 1), False), yt.detach(),
                               rtol=1e-4, atol=1e-4)
    gy = K.max_pool2d_backward(np, gt.numpy(), y, (2, 2), (2, 2), (0,) * 4, (1, 1), False)
    np.testing.assert_allclose(K.conv2d_weight_backward(np, gy, x, (1, 1), (0,) * 4, (1, 1), 1, wt.shape),
                               wtt.grad, rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(K.conv2d_input_backward(np, gy, wt, (1, 1), (0,) * 4, (1, 1), 1, x.shape),
                               xt.grad, rtol=1e-3, atol=1e-3)
