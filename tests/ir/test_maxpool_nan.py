"""Max pooling picks torch's tap in every path: a window's first maximum (row-major), its LAST NaN where it holds one
(torch's CPU kernels take a tap when `val > max or isnan(val)`), an all -inf window's first tap inside the input
(torch never reads the padding). Values, return_indices, gradients (max_pool1d/2d, relu before the pool, the
adaptive pools, max_unpool after the pool) against torch, eager and compiled, on the plain NumPy kernels, the
reference kernels and numba's 2x2 select loop; weights are small nonzero integers, so every sum of gradients is
exact and a wrong tap cannot hide in rounding."""
import numpy as np
import pytest

import autodiff
import tracer
from ir.ops import pool as pool_ops
from ir.runtime import conv_kernels, numba_conv, numba_hook
from nn import functional as F
from nn.pooling import geometry as torch_geometry
from tests.torch_optional import torch

nan, inf = np.nan, np.inf

# (H, W), kernel, stride, padding, dilation, ceil_mode: tiling 2x2 (numba's loop), tiling with rows left over,
# tiling 3x3, overlapping, padded, dilated, ceil_mode's extra room
GEOMETRIES = [((6, 8), 2, 2, 0, 1, False), ((7, 9), 2, 2, 0, 1, False), ((6, 9), 3, 3, 0, 1, False),
              ((7, 7), 3, 2, 0, 1, False), ((6, 6), 2, 2, 1, 1, False), ((8, 7), 3, 1, 1, 2, False),
              ((7, 6), 3, 2, 1, 1, True), ((5, 5), (2, 3), (1, 2), (1, 1), 1, True)]
KINDS = ["nan", "ties", "neginf", "mixed"]


def _data(shape, kind, dtype, seed=0):
    rng = np.random.default_rng(seed)
    if kind == "ties":  # few values: equal maxima in most windows, zeros of both signs
        x = rng.integers(-1, 2, shape).astype(dtype)
        x[rng.random(shape) < 0.2] = -0.0
    else:
        x = rng.standard_normal(shape).astype(dtype)
    if kind in ("nan", "mixed"):
        x[rng.random(shape) < 0.25] = nan  # windows with one, two and all NaNs
    if kind == "neginf":
        x[rng.random(shape) < 0.7] = -inf  # whole windows of -inf, padded ones included
        x[..., :3, :3] = -inf
    if kind == "mixed":
        x[rng.random(shape) < 0.15] = inf
        x[rng.random(shape) < 0.15] = -inf
    return x


def _weights(shape, seed=1):
    rng = np.random.default_rng(seed)
    return (rng.integers(1, 5, shape) * rng.choice([-1, 1], shape)).astype("float64")


def _kw(geometry):
    _, k, s, p, d, ceil = geometry
    return dict(kernel_size=k, stride=s, padding=p, dilation=d, ceil_mode=ceil)


def _torch(fn, x, w, relu=False, **kw):
    """torch's (y, gradient of (fn(x) * w).sum()), and its indices where fn takes return_indices."""
    leaf = torch.tensor(x, requires_grad=True)
    y = fn(torch.relu(leaf) if relu else leaf, **kw)
    (y * torch.tensor(w, dtype=leaf.dtype)).sum().backward()
    return y.detach().numpy(), leaf.grad.numpy()


def _compiled(fn, x, w, relu=False, **kw):
    wt = w.astype(x.dtype)
    xt = tracer.tensor(x)
    step = autodiff.value_and_grad(lambda t: (fn(F.relu(t) if relu else t, **kw) * wt).sum(), wrt=[xt])
    _, (g,) = step(xt)
    return g.numpy()


def _eager(fn, x, w, relu=False, **kw):
    leaf = tracer.tensor(x, requires_grad=True)
    y = fn(F.relu(leaf) if relu else leaf, **kw)
    (y * tracer.tensor(w.astype(x.dtype))).sum().backward()
    return y.numpy(), leaf.grad.numpy()


def _same(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape and np.array_equal(a, b, equal_nan=True), (a, b)


@pytest.fixture(params=["numpy", "numba"])
def kernels(request, monkeypatch):
    """The plain NumPy kernels (numba's loops off while the test runs), or numba's (skipped without numba)."""
    if request.param == "numpy":
        monkeypatch.setattr(numba_hook, "ENABLED", False)
    else:
        pytest.importorskip("numba")
        if not numba_hook.ENABLED or not (numba_conv.usable("float32") or numba_hook.wait(120)):
            pytest.skip("numba's kernels are off (TRACEGRAD_KERNELS=numpy)")
    return request.param


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("geometry", GEOMETRIES, ids=str)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_max_pool2d_as_torch(geometry, kind, dtype, kernels):
    x = _data((2, 3) + geometry[0], kind, dtype)
    kw = _kw(geometry)
    ty, ti = torch.nn.functional.max_pool2d(torch.tensor(x), return_indices=True, **kw)
    w = _weights(ty.shape)
    ty, tg = _torch(torch.nn.functional.max_pool2d, x, w, **kw)
    y, i = F.max_pool2d(tracer.tensor(x), return_indices=True, **kw)
    _same(y.numpy(), ty)
    _same(i.numpy(), ti.numpy())
    _same(_compiled(F.max_pool2d, x, w, **kw), tg)
    ey, eg = _eager(F.max_pool2d, x, w, **kw)
    _same(ey, ty)
    _same(eg, tg)
    # a relu before the pool: the compiled step's relu_max_pool2d_backward (ir.runtime.pool_relu)
    _same(_compiled(F.max_pool2d, x, w, relu=True, **kw), _torch(torch.nn.functional.max_pool2d, x, w, True, **kw)[1])


@pytest.mark.parametrize("geometry", GEOMETRIES, ids=str)
@pytest.mark.parametrize("kind", KINDS)
def test_every_kernel_picks_torch_tap(geometry, kind, kernels):
    """The reference kernels (ir.ops.pool) and the fast ones, with and without planned out= / work arrays, the
    relu forms, the indices op and the second-order gather, each against torch's gradient and indices."""
    x = _data((2, 2) + geometry[0], kind, "float64", seed=3)
    kw = _kw(geometry)
    attrs = torch_geometry("max_pool2d", tracer.tensor(x), kw["kernel_size"], kw["stride"], kw["padding"],
                           kw["dilation"], kw["ceil_mode"])
    attrs.pop("out")
    args = (attrs["pool_size"], attrs["strides"], attrs["padding"], attrs["dilation"], attrs["ceil_mode"])
    ty, ti = torch.nn.functional.max_pool2d(torch.tensor(x), return_indices=True, **kw)
    w = _weights(ty.shape, seed=4)
    _, tg = _torch(torch.nn.functional.max_pool2d, x, w, **kw)
    r = np.maximum(x, 0, where=~np.isnan(x), out=x.copy())  # relu's output (NaN kept)
    _, trg = _torch(torch.nn.functional.max_pool2d, r, w, **kw)
    trg = np.where(r <= 0, 0.0, trg)  # relu's backward, on its output
    ref = conv_kernels._REFERENCE
    _same(pool_ops._max_pool2d_indices(np, x, *args), ti.numpy())
    _same(pool_ops._max_pool2d_gather(np, x, x, *args), ty.numpy())
    _same(ref["grad.max_pool2d_backward"](np, w, x, *args), tg)
    _same(ref["grad.relu_max_pool2d_backward"](np, w, r, *args), trg)
    _same(conv_kernels.max_pool2d_backward(np, w, x, *args), tg)
    _same(conv_kernels.relu_max_pool2d_backward(np, w, r, *args), trg)
    work = [np.full(s, True if t == "bool" else nan, t) for s, t in conv_kernels.pool_work(w.shape, "float64")]
    out = np.full(x.shape, nan)
    _same(conv_kernels.max_pool2d_backward(np, w, x, *args, out=out, work=work), tg)
    out = np.full(x.shape, nan)
    _same(conv_kernels.relu_max_pool2d_backward(np, w, r, *args, out=out, work=work), trg)


@pytest.mark.parametrize("relu", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_numba_select_loop_takes_the_last_nan(relu, dtype):
    """numba's 2x2 loop itself, on every pattern of NaN, -inf, ties and numbers in a window."""
    pytest.importorskip("numba")
    if not numba_conv.usable(dtype) and not (numba_hook.ENABLED and numba_hook.wait(120)):
        pytest.skip("numba's kernels are off")
    values = np.array([nan, -inf, 0.0, -0.0, 1.0, 2.0, inf], dtype)
    quads = np.array(np.meshgrid(*[np.arange(len(values))] * 4, indexing="ij")).reshape(4, -1).T
    x = np.ascontiguousarray(values[quads].reshape(1, -1, 2, 2))  # every window pattern, one channel each
    g = _weights((1, x.shape[1], 1, 1)).astype(dtype)
    _, want = _torch(torch.nn.functional.max_pool2d, x, g, relu, kernel_size=2)
    data = np.maximum(x, 0, where=~np.isnan(x), out=x.copy()) if relu else x
    if relu:
        want = np.where(data <= 0, 0.0, want)
    dx = np.full(x.shape, nan, dtype)
    assert numba_conv.pool_backward(dx, g, data, (2, 2), relu)
    _same(dx, want.astype(dtype))


@pytest.mark.parametrize("kind", KINDS)
def test_max_pool1d_as_torch(kind, kernels):
    x = _data((2, 3, 13), kind, "float64", seed=5)
    for kw in (dict(kernel_size=4), dict(kernel_size=3, stride=2, padding=1), dict(kernel_size=2, dilation=2),
               dict(kernel_size=3, stride=2, ceil_mode=True)):
        ty, ti = torch.nn.functional.max_pool1d(torch.tensor(x), return_indices=True, **kw)
        w = _weights(ty.shape, seed=6)
        _, tg = _torch(torch.nn.functional.max_pool1d, x, w, **kw)
        y, i = F.max_pool1d(tracer.tensor(x), return_indices=True, **kw)
        _same(y.numpy(), ty)
        _same(i.numpy(), ti.numpy())
        _same(_compiled(F.max_pool1d, x, w, **kw), tg)
        _same(_eager(F.max_pool1d, x, w, **kw)[1], tg)


def test_the_briefs_windows():
    """[[1, nan], [nan, 2]]: torch's gradient goes to the second NaN; [1, nan, nan, 2] alike."""
    g = _compiled(F.max_pool2d, np.array([[[[1, nan], [nan, 2]]]]), np.ones((1, 1, 1, 1)), kernel_size=2)
    _same(g, [[[[0, 0], [1, 0]]]])
    g = _compiled(F.max_pool1d, np.array([[[1, nan, nan, 2]]]), np.ones((1, 1, 1)), kernel_size=4)
    _same(g, [[[0, 0, 1, 0]]])
    # an all -inf window reading padding first: its first tap inside the input, as torch's
    y, i = F.max_pool2d(tracer.tensor(np.full((1, 1, 2, 3), -inf)), 2, padding=1, return_indices=True)
    _same(i.numpy(), [[[[0, 1], [3, 4]]]])


@pytest.mark.parametrize("nd,out", [(1, 3), (1, 4), (2, (2, 3)), (2, 1), (2, (3, None))])
@pytest.mark.parametrize("kind", KINDS)
def test_adaptive_max_pool_as_torch(nd, out, kind):
    """The gradient goes to torch's one tap (a max reduction's split ties evenly), the last NaN of a window."""
    shape = (2, 3, 7) if nd == 1 else (2, 3, 7, 5)
    x = _data(shape, kind, "float64", seed=7)
    ours, theirs = (F.adaptive_max_pool1d, torch.nn.functional.adaptive_max_pool1d) if nd == 1 else \
        (F.adaptive_max_pool2d, torch.nn.functional.adaptive_max_pool2d)
    ty, ti = theirs(torch.tensor(x), out, return_indices=True)
    w = _weights(ty.shape, seed=8)
    _, tg = _torch(theirs, x, w, output_size=out)
    y, i = ours(tracer.tensor(x), out, return_indices=True)
    _same(y.numpy(), ty)
    _same(i.numpy(), ti.numpy())
    _same(_compiled(ours, x, w, output_size=out), tg)
    _same(_eager(ours, x, w, output_size=out)[1], tg)


@pytest.mark.parametrize("kind", KINDS)
def test_max_unpool_after_the_pool_as_torch(kind):
    x = _data((2, 3, 6, 7), kind, "float64", seed=9)
    w = _weights((2, 3, 6, 7), seed=10)

    def ours(t):
        y, i = F.max_pool2d(t, 2, 2, return_indices=True)
        return (F.max_unpool2d(y, i, 2, 2, output_size=t.shape[2:]) * tracer.tensor(w)).sum()

    leaf = torch.tensor(x, requires_grad=True)
    ty, ti = torch.nn.functional.max_pool2d(leaf, 2, 2, return_indices=True)
    z = torch.nn.functional.max_unpool2d(ty, ti, 2, 2, output_size=x.shape[2:])
    (z * torch.tensor(w)).sum().backward()
    xt = tracer.tensor(x)
    _, (g,) = autodiff.value_and_grad(ours, wrt=[xt])(xt)
    _same(g.numpy(), leaf.grad.numpy())
    y, i = F.max_pool2d(xt, 2, 2, return_indices=True)
    _same(F.max_unpool2d(y, i, 2, 2, output_size=x.shape[2:]).numpy(), z.detach().numpy())


@pytest.mark.parametrize("geometry", GEOMETRIES, ids=str)
def test_float64_finite_differences_without_ties(geometry):
    x = np.random.default_rng(11).permutation(2 * 2 * 9 * 9)[:2 * 2 * np.prod(geometry[0])]
    x = (x.reshape((2, 2) + geometry[0]) * 0.37).astype("float64")  # distinct values: no ties
    kw = _kw(geometry)
    assert autodiff.gradcheck(lambda t: F.max_pool2d(t, **kw), tracer.tensor(x))
    assert autodiff.gradcheck(lambda t: F.adaptive_max_pool2d(t, (3, 2)), tracer.tensor(x))
