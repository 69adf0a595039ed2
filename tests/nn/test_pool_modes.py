"""F.max_pool2d / F.avg_pool2d and nn.MaxPool2d / nn.AvgPool2d with torch's ceil_mode, count_include_pad,
divisor_override (and dilation for the max): values and float64 gradients against torch, eager and compiled."""
import numpy as np
import pytest

import autodiff
import nn
import tracer
from nn import functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional

# (input H, W), kernel, stride, padding: shapes where ceil_mode adds a window, drops one (starts in the padding),
# or changes nothing, and mixed axes
GEOMETRIES = [((5, 5), 2, 2, 0), ((5, 5), 2, 2, 1), ((6, 7), 3, 2, 1), ((7, 6), (3, 2), (2, 3), (1, 0)),
              ((4, 4), 2, 2, 0), ((5, 8), 3, 3, 1), ((9, 5), (2, 3), (3, 2), (1, 1)), ((5, 5), 1, 3, 0)]
AVG_OPTIONS = [dict(), dict(count_include_pad=False), dict(divisor_override=3),
               dict(count_include_pad=False, divisor_override=2)]


def _x(hw, seed=0):
    return np.random.default_rng(seed).standard_normal((2, 3) + hw)


def _ours(fn, x, **kw):
    """(value, gradient of (value * weights).sum()) eagerly through value_and_grad's compiled step."""
    weights = np.random.default_rng(9).standard_normal(fn(tracer.tensor(x), **kw).shape)
    xt = tracer.tensor(x)
    step = autodiff.value_and_grad(lambda t: (fn(t, **kw) * weights).sum(), wrt=[xt])
    value, (g,) = step(xt)
    return fn(tracer.tensor(x), **kw).numpy(), g.numpy(), float(value), weights


def _torch(fn, x, weights, **kw):
    xt = torch.tensor(x, requires_grad=True)
    y = fn(xt, **kw)
    (y * torch.tensor(weights)).sum().backward()
    return y.detach().numpy(), xt.grad.numpy(), float((y * torch.tensor(weights)).sum())


def _compare(ours_fn, torch_fn, x, **kw):
    y, g, v, weights = _ours(ours_fn, x, **kw)
    ty, tg, tv = _torch(torch_fn, x, weights, **kw)
    assert y.shape == ty.shape
    np.testing.assert_allclose(y, ty, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(g, tg, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(v, tv, rtol=1e-12)


@pytest.mark.parametrize("ceil_mode", [False, True])
@pytest.mark.parametrize("geometry", GEOMETRIES, ids=str)
def test_max_pool2d_ceil_mode_as_torch(geometry, ceil_mode):
    hw, k, s, p = geometry
    _compare(F.max_pool2d, TF.max_pool2d, _x(hw), kernel_size=k, stride=s, padding=p, ceil_mode=ceil_mode)


@pytest.mark.parametrize("options", AVG_OPTIONS, ids=str)
@pytest.mark.parametrize("ceil_mode", [False, True])
@pytest.mark.parametrize("geometry", GEOMETRIES, ids=str)
def test_avg_pool2d_options_as_torch(geometry, ceil_mode, options):
    hw, k, s, p = geometry
    _compare(F.avg_pool2d, TF.avg_pool2d, _x(hw), kernel_size=k, stride=s, padding=p, ceil_mode=ceil_mode, **options)


@pytest.mark.parametrize("ceil_mode", [False, True])
def test_max_pool2d_dilation_as_torch(ceil_mode):
    _compare(F.max_pool2d, TF.max_pool2d, _x((9, 8)), kernel_size=3, stride=2, padding=1, dilation=2,
             ceil_mode=ceil_mode)


def test_positional_arguments_in_torchs_order():
    x = _x((5, 5))
    np.testing.assert_allclose(F.avg_pool2d(tracer.tensor(x), 2, 2, 1, True, False, None).numpy(),
                               TF.avg_pool2d(torch.tensor(x), 2, 2, 1, True, False, None).numpy(), rtol=1e-12)
    np.testing.assert_allclose(F.max_pool2d(tracer.tensor(x), 2, 2, 1, 1, True).numpy(),
                               TF.max_pool2d(torch.tensor(x), 2, 2, 1, 1, True).numpy(), rtol=1e-12)


@pytest.mark.parametrize("ours,theirs,kw", [
    (nn.MaxPool2d, torch.nn.MaxPool2d, dict(kernel_size=2, stride=2, padding=1, ceil_mode=True)),
    (nn.MaxPool2d, torch.nn.MaxPool2d, dict(kernel_size=3, stride=2, dilation=2, ceil_mode=True)),
    (nn.AvgPool2d, torch.nn.AvgPool2d, dict(kernel_size=2, stride=2, padding=1, ceil_mode=True)),
    (nn.AvgPool2d, torch.nn.AvgPool2d, dict(kernel_size=3, stride=2, padding=1, ceil_mode=True,
                                            count_include_pad=False)),
    (nn.AvgPool2d, torch.nn.AvgPool2d, dict(kernel_size=3, stride=2, padding=1, divisor_override=5)),
])
def test_modules_as_torch(ours, theirs, kw):
    _compare(lambda t: ours(**kw)(t), lambda t: theirs(**kw)(t), _x((7, 6)))


def test_float32_as_torch():
    x = _x((5, 7)).astype("float32")
    for ceil_mode in (False, True):
        y = F.avg_pool2d(tracer.tensor(x), 3, 2, 1, ceil_mode=ceil_mode, divisor_override=4).numpy()
        ty = TF.avg_pool2d(torch.tensor(x), 3, 2, 1, ceil_mode=ceil_mode, divisor_override=4).numpy()
        assert y.dtype == np.float32
        np.testing.assert_allclose(y, ty, rtol=1e-6, atol=1e-7)


def test_errors_name_the_argument():
    x = tracer.tensor(_x((5, 5)))
    with pytest.raises(ValueError, match="divisor_override must be a nonzero int"):
        F.avg_pool2d(x, 2, divisor_override=0)
    with pytest.raises(ValueError, match="padding 2 must be at most half of kernel_size 3"):
        F.max_pool2d(x, 3, padding=2)
    with pytest.raises(ValueError, match="too small"):
        F.max_pool2d(tracer.tensor(_x((2, 2))), 3)
    assert F.max_pool2d(x, 2, return_indices=True)[1].dtype == "int64"  # supported now (test_conv_resample_torch)
    with pytest.raises(ValueError, match="NCHW"):
        F.avg_pool2d(tracer.tensor(np.zeros((3, 5, 5))), 2)
