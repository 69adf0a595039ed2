"""The numeric traps of issue 8 (item 7) against PyTorch, in float32 and float64: values eagerly and
through a compiled step, and the compiled step's gradients. Skipped where torch is not installed;
tracegrad's own behaviour is tested without it in test_numerics.py and tests/nn/test_numerics_losses.py."""
import math

import numpy as np
import pytest

import autodiff
import tracer
from nn import functional as F

FLOATS = ["float32", "float64"]
NAN = math.nan


def _torch():
    return pytest.importorskip("torch")


def ours(fn, *arrays):
    """(eager value, compiled value, gradients of sum(fn) wrt the floating inputs) from tracegrad."""
    tensors = [tracer.tensor(a) for a in arrays]
    eager = np.asarray(fn(*tensors))
    wrt = [t for t in tensors if t.dtype.startswith("float")]
    value, grads = autodiff.value_and_grad(lambda *xs: tracer.sum(fn(*xs)), wrt=wrt)(*tensors)
    return eager, np.asarray(value), [np.asarray(g) for g in grads]


def theirs(fn, *arrays, n_grad=None):
    """(value, gradients of sum(fn) wrt the first n_grad (default all) floating inputs) from PyTorch."""
    torch = _torch()
    floats = [i for i, a in enumerate(arrays) if a.dtype.kind == "f"][:n_grad]
    tensors = [torch.tensor(a, requires_grad=i in floats) for i, a in enumerate(arrays)]
    out = fn(*tensors)
    value = out.detach().numpy()
    floats = [t for t in tensors if t.requires_grad]
    if not floats:
        return value, []
    grads = torch.autograd.grad(out.sum(), floats, allow_unused=True)
    return value, [np.zeros(t.shape) if g is None else g.numpy() for t, g in zip(floats, grads, strict=True)]


def compare(fn_ours, fn_theirs, *arrays, rtol=None, atol=0.0, n_grad=None):
    eager, value, grads = ours(fn_ours, *arrays)
    want, want_grads = theirs(fn_theirs, *arrays, n_grad=n_grad)
    grads = grads[:n_grad]
    dtype = arrays[0].dtype
    rtol = rtol if rtol is not None else (2e-6 if dtype == np.float32 else 1e-12)
    assert eager.dtype == want.dtype, (eager.dtype, want.dtype)
    np.testing.assert_allclose(eager, want, rtol=rtol, atol=atol)
    np.testing.assert_allclose(value, want.sum(), rtol=max(rtol, 1e-6), atol=atol)
    for g, w in zip(grads, want_grads, strict=True):
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


# ---------------------------------------------------------------- losses with -inf


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_and_nll_loss_with_minus_inf_in_ignored_rows(dtype, reduction):
    torch = _torch()
    logits = np.array([[0.5, -1.0, 2.0], [-np.inf, 0.0, 1.0], [-np.inf, -np.inf, -np.inf], [1.0, -np.inf, 0.0]],
                      dtype)
    labels = np.array([2, -100, -100, 0])
    tf = torch.nn.functional
    compare(lambda z, y: F.cross_entropy(z, y, reduction=reduction),
            lambda z, y: tf.cross_entropy(z, y, reduction=reduction), logits, labels)
    compare(lambda z, y: F.nll_loss(F.log_softmax(z, axis=-1), y, reduction=reduction),
            lambda z, y: tf.nll_loss(tf.log_softmax(z, dim=-1), y, reduction=reduction), logits, labels)


# ---------------------------------------------------------------- sigmoid, logsigmoid, BCE


@pytest.mark.parametrize("dtype", FLOATS)
def test_sigmoid_tails(dtype):
    torch = _torch()
    x = np.array([-80.0, -40.0, -20.0, -1.0, 0.0, 1.0, 2.0], dtype)
    compare(tracer.sigmoid, torch.sigmoid, x)
    # PyTorch's gradient y * (1 - y) loses digits as y nears 1 (all of them beyond x = 17 in float32);
    # ours, y * sigmoid(-x), is exact: compare it with PyTorch's in float64 (exact there up to x ~ 5)
    wide = np.array([-20.0, 3.0, 5.0, 12.0, 20.0, 40.0], dtype)
    eager, _, (g,) = ours(tracer.sigmoid, wide)
    want, _ = theirs(torch.sigmoid, wide)
    np.testing.assert_allclose(eager, want, rtol=1e-6 if dtype == "float32" else 1e-15)
    exact = np.exp(-np.logaddexp(0.0, -wide.astype("float64")) - np.logaddexp(0.0, wide.astype("float64")))
    _, (want_grad,) = theirs(torch.sigmoid, wide[:3].astype("float64"))
    np.testing.assert_allclose(exact[:3], want_grad, rtol=1e-12)
    np.testing.assert_allclose(g, exact, rtol=2e-6 if dtype == "float32" else 1e-14)
    compare(lambda v: -tracer.log(tracer.sigmoid(v)), lambda v: -torch.log(torch.sigmoid(v)), x[:4])


@pytest.mark.parametrize("dtype", FLOATS)
def test_logsigmoid(dtype):
    torch = _torch()
    x = np.array([-1e4, -200.0, -30.0, -1.0, 0.0, 1.0, 30.0, 80.0], dtype)
    compare(F.logsigmoid, torch.nn.functional.logsigmoid, x, atol=float(np.finfo(dtype).tiny))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_binary_cross_entropy_with_logits(dtype, reduction):
    torch = _torch()
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.normal(scale=3.0, size=(3, 4)), [[-200.0, 200.0, -1e4, 1e4]]]).astype(dtype)
    t = rng.uniform(size=(4, 4)).astype(dtype)
    w = rng.uniform(0.5, 2.0, size=(4,)).astype(dtype)
    pw = rng.uniform(0.5, 3.0, size=(4,)).astype(dtype)
    bce = torch.nn.functional.binary_cross_entropy_with_logits
    compare(lambda a, b: F.binary_cross_entropy_with_logits(a, b, reduction=reduction),
            lambda a, b: bce(a, b, reduction=reduction), x, t, rtol=1e-5 if dtype == "float32" else 1e-12)
    compare(lambda a, b, c, d: F.binary_cross_entropy_with_logits(a, b, c, reduction=reduction, pos_weight=d),
            lambda a, b, c, d: bce(a, b, c, reduction=reduction, pos_weight=d), x, t, w, pw,
            rtol=1e-5 if dtype == "float32" else 1e-12, n_grad=2)  # PyTorch: none for weight, pos_weight


# ---------------------------------------------------------------- float16 statistics


def test_float16_var_and_layer_norm_as_pytorch():
    torch = _torch()
    rng = np.random.default_rng(0)
    x = (300.0 + 200.0 * rng.standard_normal((4, 64))).astype("float16")
    got = tracer.var(tracer.tensor(x), axis=-1).numpy()
    want = torch.tensor(x).var(dim=-1, unbiased=False).numpy()
    assert got.dtype == want.dtype == np.float16 and np.isfinite(want).all()
    np.testing.assert_allclose(got, want, rtol=1e-3)
    w, b = rng.uniform(0.5, 1.5, 64).astype("float16"), rng.normal(size=64).astype("float16")
    got = tracer.layer_norm(tracer.tensor(x), tracer.tensor(w), tracer.tensor(b)).numpy()
    want = torch.nn.functional.layer_norm(torch.tensor(x), (64,), torch.tensor(w), torch.tensor(b)).numpy()
    assert got.dtype == np.float16
    np.testing.assert_allclose(got, want, atol=4e-3)


@pytest.mark.parametrize("dtype", FLOATS)
def test_var_and_layer_norm(dtype):
    torch = _torch()
    x = (300.0 + 200.0 * np.random.default_rng(1).standard_normal((3, 16))).astype(dtype)
    compare(lambda v: tracer.var(v, axis=-1), lambda v: v.var(dim=-1, unbiased=False), x, rtol=1e-5)
    compare(tracer.layer_norm, lambda v: torch.nn.functional.layer_norm(v, (16,)), x, rtol=2e-4, atol=1e-5)


# ---------------------------------------------------------------- division


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_integer_true_floor_division_and_remainder(dtype):
    torch = _torch()
    a = np.array([7, -7, 7, -7, 0, 6, 1], dtype)
    b = np.array([2, 2, -2, -2, 3, 3, 5], dtype)
    ta, tb = torch.tensor(a), torch.tensor(b)
    for got, want in [(tracer.tensor(a) / tracer.tensor(b), ta / tb), (tracer.tensor(a) // tracer.tensor(b), ta // tb),
                      (tracer.tensor(a) % tracer.tensor(b), ta % tb), (tracer.tensor(a) / 2, ta / 2),
                      (7 // tracer.tensor(b), 7 // tb), (tracer.tensor(a) % 3, ta % 3)]:
        assert got.dtype == str(want.dtype).replace("torch.", "")
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):  # what PyTorch does; ours: ZeroDivisionError
        ta // torch.zeros_like(tb)
    with pytest.raises(ZeroDivisionError):
        tracer.tensor(a) // tracer.tensor(np.zeros_like(b))


@pytest.mark.parametrize("dtype", FLOATS)
def test_float_floor_division_and_remainder(dtype):
    torch = _torch()
    rng = np.random.default_rng(2)
    a = rng.uniform(-5, 5, size=(3, 4)).astype(dtype)
    b = np.array([1.5, -0.7, 2.0, -3.0], dtype)
    compare(lambda x, y: x % y, lambda x, y: torch.remainder(x, y), a, b, rtol=1e-5 if dtype == "float32" else 1e-12)
    eager, value, _ = ours(lambda x, y: x // y, a, b)  # PyTorch has no gradient for floor_divide; ours is 0
    want = (torch.tensor(a) // torch.tensor(b)).numpy()
    np.testing.assert_array_equal(eager, want)
    assert value == want.sum()
    zero = np.array([1.0, -1.0, 0.0], dtype)
    for op in ("__floordiv__", "__mod__"):
        got = getattr(tracer.tensor(zero), op)(0.0).numpy()
        np.testing.assert_array_equal(got, getattr(torch.tensor(zero), op)(0.0).numpy())  # inf, -inf, nan


# ---------------------------------------------------------------- sums, NaN


@pytest.mark.parametrize("dtype", ["int32", "bool"])
def test_sum_dtype(dtype):
    torch = _torch()
    x = np.array([[2**30, 2**30], [2**30, 1]], "int32") if dtype == "int32" else np.array([[True, False], [True, True]])
    for axis in (None, 0):
        got = tracer.sum(tracer.tensor(x), axis=axis)
        want = torch.tensor(x).sum() if axis is None else torch.tensor(x).sum(dim=axis)
        assert got.dtype == "int64" and want.dtype == torch.int64
        np.testing.assert_array_equal(got.numpy(), want.numpy())


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("dtype", FLOATS)
def test_nan_in_max_min_relu_maximum_minimum(dtype):
    torch = _torch()
    x = np.array([1.0, NAN, 3.0, NAN, -2.0], dtype)
    compare(tracer.max, torch.max, x)
    compare(tracer.min, torch.min, x)
    compare(tracer.relu, torch.relu, x)
    rows = np.array([[1.0, NAN, 3.0], [1.0, 2.0, 3.0], [5.0, 5.0, NAN]], dtype)
    # max / min along an axis give a nan row's gradient to its nan, as torch's max(dim) / min(dim) (one nan a
    # row here: tracegrad splits ties where torch picks one index); amax / amin keep torch's nan gradient
    compare(lambda v: tracer.max(v, axis=1), lambda v: torch.max(v, dim=1).values, rows)
    compare(lambda v: tracer.min(v, axis=1), lambda v: torch.min(v, dim=1).values, rows)
    compare(lambda v: v.amax(dim=1), lambda v: torch.amax(v, dim=1), rows)
    compare(lambda v: v.amin(dim=0), lambda v: torch.amin(v, dim=0), rows)
    a = np.array([NAN, 1.0, 2.0, NAN, 1.0, 3.0], dtype)
    b = np.array([1.0, NAN, 2.0, NAN, 0.0, 4.0], dtype)
    compare(tracer.maximum, torch.maximum, a, b)
    compare(tracer.minimum, torch.minimum, a, b)
