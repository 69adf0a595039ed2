"""Convolution, padding, pooling and resampling against torch (issue 21 item 4, issue 22's F.pad, conv*, interpolate,
max_pool2d(return_indices)): values and gradients of the input and every parameter, float64 within 1e-10 and float32
within 1e-5, eagerly, through autodiff.value_and_grad's compiled step and through loss.backward()."""
import numpy as np
import pytest

import autodiff
import nn
import tracer
from nn import functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional
rng = np.random.default_rng(0)


def _x(*shape):
    return rng.standard_normal(shape)


def _run(fn, params, x, w):
    """(output, [d/dparam..., d/dx]) of sum(fn(x) * w): eagerly, compiled (value_and_grad), and by backward()."""
    xt = tracer.tensor(x)
    y = fn(xt)
    y = y[0] if isinstance(y, tuple) else y
    step = autodiff.value_and_grad(lambda a: ((fn(a)[0] if isinstance(fn(a), tuple) else fn(a)) * w).sum(),
                                   wrt=list(params) + [xt])
    value, grads = step(xt)
    xb = tracer.tensor(x)
    xb.requires_grad_(True)
    for p in params:
        p.grad = None
    yb = fn(xb)
    ((yb[0] if isinstance(yb, tuple) else yb) * w).sum().backward()
    backward = [p.grad for p in params] + [xb.grad]
    return y.numpy(), [np.asarray(g) for g in grads], [np.asarray(g) for g in backward], float(value)


def compare(ours, theirs, x, params=(), tparams=(), tol=1e-10):
    """ours(tracer tensor) against theirs(torch tensor) with the same parameter values."""
    xt = torch.tensor(x, requires_grad=True)
    ty = theirs(xt)
    ty = ty[0] if isinstance(ty, tuple) else ty
    w = rng.uniform(0.5, 1.5, tuple(ty.shape)).astype(x.dtype)
    (ty * torch.tensor(w)).sum().backward()
    want = [p.grad.numpy() for p in tparams] + [xt.grad.numpy()]
    y, grads, backward, value = _run(ours, list(params), x, tracer.tensor(w))
    assert y.shape == tuple(ty.shape) and y.dtype == x.dtype
    np.testing.assert_allclose(y, ty.detach().numpy(), rtol=tol, atol=tol)
    np.testing.assert_allclose(value, float((ty * torch.tensor(w)).sum().detach()), rtol=tol * 10)
    for got in (grads, backward):
        for g, t in zip(got, want, strict=True):
            np.testing.assert_allclose(g, t, rtol=tol, atol=tol)


def pair(ours, theirs, x, tol=1e-10):
    """A module pair: torch's state dict loaded into ours (the keys must agree), then compare."""
    sd = {k: v.detach().numpy() for k, v in theirs.state_dict().items()}
    assert list(ours.state_dict()) == list(sd)
    ours.load_state_dict(sd)
    compare(ours, theirs, x, list(ours.parameters()), list(theirs.parameters()), tol)


D, T = dict(dtype="float64"), dict(dtype=torch.float64)

CONV_CASES = {
    "conv_transpose2d_stride_outpad_groups": (
        lambda m, **k: m.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2, **k), (2, 4, 4, 3)),
    "conv_transpose2d_outpad_below_dilation": (
        lambda m, **k: m.ConvTranspose2d(2, 3, (3, 2), padding=(2, 0), output_padding=1, dilation=2, **k), (1, 2, 4, 3)),
    "conv_transpose1d": (lambda m, **k: m.ConvTranspose1d(2, 3, 4, stride=3, padding=1, output_padding=2, **k), (2, 2, 5)),
    "conv_transpose1d_no_bias": (lambda m, **k: m.ConvTranspose1d(2, 4, 3, groups=2, bias=False, **k), (2, 2, 5)),
    "conv3d_groups": (lambda m, **k: m.Conv3d(2, 4, (2, 3, 2), stride=(1, 2, 1), padding=(1, 0, 1), groups=2, **k),
                      (2, 2, 4, 5, 3)),
    "conv3d_circular_same": (lambda m, **k: m.Conv3d(2, 2, 3, padding="same", padding_mode="circular", **k), (1, 2, 3, 4, 4)),
    "conv2d_reflect": (lambda m, **k: m.Conv2d(2, 3, 3, stride=2, padding=(1, 2), padding_mode="reflect", **k), (2, 2, 5, 6)),
    "conv2d_replicate_valid": (lambda m, **k: m.Conv2d(2, 3, 2, padding="valid", padding_mode="replicate", **k), (1, 2, 4, 4)),
    "conv1d_circular_same_even": (lambda m, **k: m.Conv1d(2, 3, 4, padding="same", padding_mode="circular", **k), (2, 2, 6)),
    "conv1d_reflect_dilated": (lambda m, **k: m.Conv1d(2, 2, 3, padding=2, dilation=2, padding_mode="reflect", **k), (2, 2, 7)),
}


@pytest.mark.parametrize("name", list(CONV_CASES))
def test_conv_layers_as_torch_float64(name):
    make, shape = CONV_CASES[name]
    pair(make(nn, **D), make(torch.nn, **T), _x(*shape))


@pytest.mark.parametrize("name", ["conv_transpose2d_stride_outpad_groups", "conv3d_groups", "conv2d_reflect"])
def test_conv_layers_as_torch_float32(name):
    make, shape = CONV_CASES[name]
    pair(make(nn), make(torch.nn), _x(*shape).astype("float32"), tol=1e-5)


def test_conv_transpose_output_size_and_layout():
    ours, theirs = nn.ConvTranspose2d(4, 2, 3, stride=2, padding=1, **D), torch.nn.ConvTranspose2d(4, 2, 3, stride=2,
                                                                                                   padding=1, **T)
    assert ours.weight.shape == tuple(theirs.weight.shape) == (4, 2, 3, 3)
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    x = _x(1, 4, 5, 5)
    for size in [(9, 9), (10, 9), [1, 2, 10, 10]]:
        np.testing.assert_allclose(ours(x, output_size=size).numpy(),
                                   theirs(torch.tensor(x), output_size=size).detach().numpy(), rtol=1e-12)
    with pytest.raises(ValueError, match="output size"):
        ours(x, output_size=(11, 9))
    assert repr(ours) == repr(theirs)
    assert repr(nn.Conv2d(2, 3, 3, padding=1, padding_mode="reflect", bias=False)) == repr(
        torch.nn.Conv2d(2, 3, 3, padding=1, padding_mode="reflect", bias=False))
    with pytest.raises(ValueError, match="zeros"):
        nn.ConvTranspose2d(2, 2, 3, padding_mode="reflect")
    with pytest.raises(ValueError, match="strided"):
        nn.Conv2d(2, 2, 3, stride=2, padding="same")


def test_functional_convs_as_torch():
    w3, w1, wt = _x(4, 1, 2, 2, 2), _x(3, 2, 3), _x(2, 3, 3, 3)
    b3, b1, bt = _x(4), _x(3), _x(6)
    pw3, pw1, pwt = tracer.tensor(w3), tracer.tensor(w1), tracer.tensor(wt)
    compare(lambda a: F.conv3d(a, pw3, b3, stride=2, padding=1, groups=4),
            lambda a: TF.conv3d(a, torch.tensor(w3), torch.tensor(b3), stride=2, padding=1, groups=4),
            _x(1, 4, 4, 3, 5))
    compare(lambda a: F.conv1d(a, pw1, b1, padding="same", dilation=2),
            lambda a: TF.conv1d(a, torch.tensor(w1), torch.tensor(b1), padding="same", dilation=2), _x(2, 2, 7))
    compare(lambda a: F.conv_transpose2d(a, pwt, bt, stride=(2, 1), padding=(0, 1), output_padding=(1, 0), groups=2),
            lambda a: TF.conv_transpose2d(a, torch.tensor(wt), torch.tensor(bt), stride=(2, 1), padding=(0, 1),
                                          output_padding=(1, 0), groups=2), _x(2, 2, 3, 4))
    w2 = _x(2, 3, 3, 3)
    compare(lambda a: F.conv2d(a, tracer.tensor(w2), padding="same"),
            lambda a: TF.conv2d(a, torch.tensor(w2), padding="same"), _x(3, 5, 4))  # unbatched (C, H, W)


PADS = [((1, 2), "constant", 1.5), ((2, -1, 0, 3), "constant", 0), ((1, 0, -1, 2, 1, 1, 0, 1), "constant", -2.0),
        ((2, 1), "reflect", None), ((1, 3, 2, 0), "reflect", None), ((-1, 2, 1, 1), "reflect", None),
        ((3, 1, 0, 2), "replicate", None), ((1, 1, 1, 1, 1, 1), "replicate", None), ((2, 3, 1, 0), "circular", None),
        ((1, 2, 3, 1, 1, 0), "circular", None)]


@pytest.mark.parametrize("pad,mode,value", PADS, ids=str)
def test_pad_as_torch(pad, mode, value):
    shape = (2, 3, 4, 5, 6)[:len(pad) // 2 + 2] if mode != "constant" else (2, 3, 4, 5)
    kw = {} if value is None else dict(value=value)
    compare(lambda a: F.pad(a, pad, mode=mode, **kw), lambda a: TF.pad(a, pad, mode=mode, **kw), _x(*shape))


def test_pad_errors_as_torch():
    x = tracer.tensor(_x(1, 2, 3))
    cases = [(((1, 2, 3),), {}, RuntimeError), (((3, 0),), dict(mode="reflect"), RuntimeError),
             (((4, 0),), dict(mode="circular"), RuntimeError), (((1, 1),), dict(mode="wrap"), NotImplementedError),
             (((1, 1),), dict(mode="reflect", value=1.0), RuntimeError),
             (((1, 1, 1, 1, 1, 1),), dict(mode="replicate"), NotImplementedError)]
    for args, kw, error in cases:
        with pytest.raises(error):
            TF.pad(torch.tensor(x.numpy()), *args, **kw)
        with pytest.raises(error, match="pad"):
            F.pad(x, *args, **kw)


PAD_MODULES = [("ReflectionPad1d", (2, 1), (2, 3, 5)), ("ReflectionPad2d", 1, (1, 2, 3, 4)),
               ("ReplicationPad1d", 3, (2, 5)), ("ReplicationPad2d", (1, 0, 2, 1), (2, 2, 3, 3)),
               ("ZeroPad2d", (1, -1, 2, 0), (1, 2, 3, 4)), ("CircularPad1d", 2, (1, 2, 4)),
               ("CircularPad2d", (1, 2, 0, 1), (1, 2, 3, 3))]


@pytest.mark.parametrize("name,padding,shape", PAD_MODULES, ids=str)
def test_padding_modules_as_torch(name, padding, shape):
    ours, theirs = getattr(nn, name)(padding), getattr(torch.nn, name)(padding)
    assert repr(ours) == repr(theirs)
    compare(ours, theirs, _x(*shape))
    constant = f"ConstantPad{name[-2]}d"
    ours, theirs = getattr(nn, constant)(padding, 2.5), getattr(torch.nn, constant)(padding, 2.5)
    assert repr(ours) == repr(theirs)
    compare(ours, theirs, _x(*shape))


def test_pools_1d_and_indices_as_torch():
    x = _x(2, 3, 9)
    for kw in [dict(kernel_size=3, stride=2, padding=1, ceil_mode=True), dict(kernel_size=2, dilation=2)]:
        compare(nn.MaxPool1d(**kw), torch.nn.MaxPool1d(**kw), x)
        (_, i), (_, ti) = nn.MaxPool1d(**kw, return_indices=True)(x), torch.nn.MaxPool1d(**kw, return_indices=True)(
            torch.tensor(x))
        np.testing.assert_array_equal(i.numpy(), ti.numpy())
        assert i.dtype == "int64"
    for kw in [dict(kernel_size=4, stride=3, padding=2, ceil_mode=True, count_include_pad=False), dict(kernel_size=3)]:
        compare(nn.AvgPool1d(**kw), torch.nn.AvgPool1d(**kw), x)
    x2 = _x(2, 3, 7, 6)
    for kw in [dict(kernel_size=3, stride=2, padding=1, ceil_mode=True), dict(kernel_size=(2, 3), dilation=(2, 1))]:
        compare(nn.MaxPool2d(**kw, return_indices=True), torch.nn.MaxPool2d(**kw, return_indices=True), x2)
        (_, i), (_, ti) = F.max_pool2d(x2, **kw, return_indices=True), TF.max_pool2d(torch.tensor(x2), **kw,
                                                                                       return_indices=True)
        np.testing.assert_array_equal(i.numpy(), ti.numpy())


@pytest.mark.parametrize("size", [(3, 4), (2, None), 1, (4, 3), (7, 6)], ids=str)
def test_adaptive_pools_as_torch(size):
    x = _x(2, 3, 7, 6)
    compare(nn.AdaptiveAvgPool2d(size), torch.nn.AdaptiveAvgPool2d(size), x)
    compare(nn.AdaptiveMaxPool2d(size), torch.nn.AdaptiveMaxPool2d(size), x)
    (_, i), (_, ti) = F.adaptive_max_pool2d(x, size, return_indices=True), TF.adaptive_max_pool2d(
        torch.tensor(x), size, return_indices=True)
    np.testing.assert_array_equal(i.numpy(), ti.numpy())


def test_adaptive_1d_and_float32():
    x = _x(2, 3, 10)
    compare(nn.AdaptiveAvgPool1d(4), torch.nn.AdaptiveAvgPool1d(4), x)
    compare(nn.AdaptiveMaxPool1d(3), torch.nn.AdaptiveMaxPool1d(3), x)
    compare(nn.AdaptiveAvgPool2d((3, 5)), torch.nn.AdaptiveAvgPool2d((3, 5)), _x(2, 3, 7, 6).astype("float32"), tol=1e-5)


INTERPOLATE = [dict(size=(8, 3), mode="nearest"), dict(scale_factor=(1.7, 0.6), mode="nearest"),
               dict(size=(9, 11), mode="nearest-exact"), dict(size=(8, 3), mode="bilinear", align_corners=False),
               dict(size=(8, 3), mode="bilinear", align_corners=True), dict(scale_factor=(2.3, 0.7), mode="bilinear"),
               dict(scale_factor=(2.3, 0.7), mode="bilinear", recompute_scale_factor=True),
               dict(size=(1, 1), mode="bilinear", align_corners=True), dict(size=(4, 4), mode="area")]


@pytest.mark.parametrize("kw", INTERPOLATE, ids=str)
def test_interpolate_2d_as_torch(kw):
    compare(lambda a: F.interpolate(a, **kw), lambda a: TF.interpolate(a, **kw), _x(2, 3, 5, 7))


def test_interpolate_1d_3d_upsample_float32():
    compare(nn.Upsample(size=11, mode="linear"), torch.nn.Upsample(size=11, mode="linear"), _x(2, 3, 6))
    compare(nn.Upsample(scale_factor=0.5, mode="linear", align_corners=True),
            torch.nn.Upsample(scale_factor=0.5, mode="linear", align_corners=True), _x(2, 3, 6))
    compare(lambda a: F.interpolate(a, size=(5, 3, 7), mode="trilinear"),
            lambda a: TF.interpolate(a, size=(5, 3, 7), mode="trilinear"), _x(1, 2, 3, 4, 5))
    compare(nn.UpsamplingBilinear2d(scale_factor=2), torch.nn.UpsamplingBilinear2d(scale_factor=2),
            _x(1, 2, 3, 4).astype("float32"), tol=1e-5)
    compare(nn.Upsample(scale_factor=2), torch.nn.Upsample(scale_factor=2), _x(1, 2, 3, 4).astype("float32"), tol=1e-5)
    with pytest.raises(ValueError, match="align_corners"):
        F.interpolate(_x(1, 1, 3, 3), size=4, align_corners=True)
    with pytest.raises(NotImplementedError, match="4D input"):
        F.interpolate(_x(1, 1, 3, 3), size=4, mode="linear")


def test_pixel_shuffle_fold_unfold_as_torch():
    compare(nn.PixelShuffle(2), torch.nn.PixelShuffle(2), _x(2, 8, 3, 2))
    compare(nn.PixelUnshuffle(2), torch.nn.PixelUnshuffle(2), _x(2, 2, 6, 4))
    kw = dict(kernel_size=(2, 3), dilation=(1, 2), padding=1, stride=(2, 1))
    compare(nn.Unfold(**kw), torch.nn.Unfold(**kw), _x(2, 3, 5, 7))
    compare(nn.Fold((5, 7), **kw), torch.nn.Fold((5, 7), **kw), _x(2, 18, 15))
    compare(nn.Unfold(2), torch.nn.Unfold(2), _x(2, 3, 4, 4).astype("float32"), tol=1e-5)
