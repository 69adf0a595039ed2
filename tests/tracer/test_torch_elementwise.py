"""Issue 22's elementwise ops and activations against torch, at the edge points of each domain: the same
line runs on torch tensors and on tracegrad ones, eagerly and traced (value, dtype), and its gradients are
compared eagerly (torch's backward) with tracegrad's inside `autodiff.value_and_grad`, NaN and inf included.

A row is `fn(m, F, *tensors)`: `m` is torch or tracer, `F` their nn.functional.
"""
import numpy as np
import pytest

import autodiff
import ir
import tracer
from nn import functional as TF

torch = pytest.importorskip("torch")
nan, inf = float("nan"), float("inf")
R = np.random.default_rng(0)


def v(*values):
    return np.array(values, "float64")


def u(*shape, low=-1.0, high=1.0):
    return R.uniform(low, high, shape)


# name, fn(m, F, *xs), inputs, differentiable
ROWS = [
    ("tan", lambda m, F, x: m.tan(x), [v(-1.2, -0.3, 0.0, 0.7, 1.5)], True),
    ("asin", lambda m, F, x: m.asin(x), [v(-1.0, -0.5, 0.0, 0.3, 1.0, 1.5)], True),
    ("arcsin_method", lambda m, F, x: x.arcsin() + x.arccos() + x.arctan(), [v(-0.9, 0.2, 0.6)], True),
    ("acos", lambda m, F, x: m.acos(x), [v(-1.0, -0.5, 0.0, 0.3, 1.0, -1.5)], True),
    ("atan", lambda m, F, x: m.atan(x), [v(-inf, -3.0, 0.0, 0.5, 1e30, nan)], True),
    ("sinh_cosh", lambda m, F, x: m.sinh(x) * 2 + m.cosh(x), [v(-3.0, -0.5, 0.0, 1.0, 2.5)], True),
    ("asinh", lambda m, F, x: m.asinh(x), [v(-1e3, -0.5, 0.0, 2.0, 1e30)], True),
    ("acosh", lambda m, F, x: m.acosh(x), [v(1.0, 1.5, 3.0, 0.5, inf)], True),
    ("atanh", lambda m, F, x: m.atanh(x), [v(-1.0, -0.5, 0.0, 0.9, 1.0, 1.5)], True),
    ("erf", lambda m, F, x: m.erf(x), [v(-inf, -6.0, -1.0, 0.0, 0.3, 2.6, 27.0)], True),
    ("erfc", lambda m, F, x: m.erfc(x), [v(-3.0, -0.2, 0.0, 1.4, 1.6, 6.0, 26.0, inf)], True),
    ("erfinv", lambda m, F, x: m.erfinv(x), [v(-1.0, -0.999999, -0.4, 0.0, 0.5, 0.9, 1 - 1e-12, 1.0, 1.5)], True),
    ("log2_log10", lambda m, F, x: m.log2(x) + m.log10(x) * 3, [v(0.0, 0.25, 1.0, 8.0, 1e300, -1.0, inf)], True),
    ("log1p", lambda m, F, x: m.log1p(x), [v(-1.0, -0.5, -1e-12, 0.0, 1e-12, 3.0, -2.0)], True),
    ("expm1_exp2", lambda m, F, x: m.expm1(x) + m.exp2(x), [v(-inf, -3.0, -1e-12, 0.0, 1e-12, 2.0, 10.0)], True),
    ("int_input_is_float32", lambda m, F, i: m.stack([m.tan(i), m.erf(i), m.log1p(i), m.reciprocal(i),
                                                     m.copysign(i, -1), m.atan2(i, i + 1)]),
     [np.array([0, 1, 3], "int64")], False),
    ("atan2", lambda m, F, y, x: m.atan2(y, x), [v(0.0, 0.0, -0.0, 1.0, -1.0, 2.0), v(0.0, -0.0, -1.0, -inf, 0.0, 3.0)],
     True),
    ("arctan2_broadcast", lambda m, F, y, x: y.arctan2(x), [u(3, 4), u(4)], True),
    ("hypot", lambda m, F, a, b: m.hypot(a, b), [v(0.0, 3.0, -1e200, 0.5), v(0.0, -4.0, 1e200, 0.0)], True),
    ("copysign", lambda m, F, a, b: m.copysign(a, b), [v(0.0, -0.0, 1.0, -2.0, 3.0), v(1.0, -1.0, -1.0, 1.0, -0.0)],
     True),
    ("fmax_fmin", lambda m, F, a, b: m.fmax(a, b) * 2 + m.fmin(a, b),
     [v(1.0, nan, 1.0, 2.0, nan, -1.0), v(1.0, 1.0, nan, 1.0, nan, 3.0)], True),
    ("logaddexp", lambda m, F, a, b: m.logaddexp(a, b), [v(-inf, inf, 1.0, 1e4, -30.0), v(-inf, inf, 2.0, 1e4, 30.0)],
     True),
    ("xlogy", lambda m, F, x, y: m.xlogy(x, y),
     [v(0.0, 0.0, 0.0, 1.0, 2.0, 0.0, -1.5), v(0.0, -1.0, 2.0, 0.0, nan, inf, 3.0)], True),
    ("xlogy_scalar", lambda m, F, y: m.xlogy(2.0, y) + y.xlogy(y), [v(0.5, 1.0, 3.0)], True),
    ("lerp_scalar", lambda m, F, a, b: m.lerp(a, b, 0.3) + a.lerp(b, 0.8), [u(3, 4), u(4)], True),
    ("lerp_tensor", lambda m, F, a, b, w: m.lerp(a, b, w), [u(3, 4), u(3, 4), u(3, 1, low=0, high=1)], True),
    ("logit", lambda m, F, p: m.logit(p), [v(0.0, 0.1, 0.5, 0.9, 1.0, 1.5)], True),
    ("logit_eps", lambda m, F, p: m.logit(p, eps=0.1), [v(0.0, 0.05, 0.1, 0.5, 0.9, 0.95, 1.0)], True),
    ("nan_to_num", lambda m, F, x: m.nan_to_num(x) / 1e300, [v(nan, inf, -inf, 1.0, -2.0)], True),
    ("nan_to_num_values", lambda m, F, x: x.nan_to_num(nan=1.5, posinf=9.0, neginf=-9.0), [v(nan, inf, -inf, 4.0)],
     True),
    ("heaviside", lambda m, F, x, w: m.heaviside(x, w), [v(-1.0, 0.0, 2.0, -0.0, nan), v(0.5, 0.5, 0.5, -1.0, 0.5)],
     False),
    ("clamp_tensor_bounds", lambda m, F, x, lo, hi: m.clamp(x, lo, hi),
     [v(-5.0, 0.0, 2.0, 1.0, 0.5, 0.5, 0.5, 0.3, 0.1, nan, 0.7),
      v(1.0, 1.0, 1.0, 1.0, 0.5, 0.5, 0.2, 0.3, 0.3, 0.0, 0.0),
      v(-1.0, -1.0, -1.0, -1.0, 0.5, 0.7, 0.5, 0.3, 0.3, 1.0, 1.0)], True),
    ("clamp_min_tensor", lambda m, F, x, lo: x.clamp(min=lo), [v(nan, 0.0, 1.0, -1.0), v(0.0, 0.0, 0.0, 0.0)], True),
    ("clip_max_tensor", lambda m, F, x, hi: x.clip(max=hi), [v(nan, 0.0, 1.0, -1.0), v(0.0, 0.0, 0.0, 0.0)], True),
    ("clamp_broadcast", lambda m, F, x, lo, hi: x.clamp(lo, hi), [u(3, 4), u(4, low=-1, high=-0.2), u(3, 1, high=0.5)],
     True),
    ("clamp_scalar_nan", lambda m, F, x: m.clamp(x, 0, 1), [v(nan, 0.0, 1.0, 0.5, 2.0)], True),
    ("clamp_int", lambda m, F, i: m.stack([i.clamp(-2, 3).double(), i.clamp(min=0.5).double()]),
     [np.array([-7, 0, 3, 9], "int64")], False),
    ("clamp_inplace", lambda m, F, x: x.clone().clamp_(-0.3, 0.2) * 2, [u(3, 4)], True),
    ("tan_inplace", lambda m, F, x: x.clone().tan_() * 2 + x.clone().arctan_() + x.clone().erf_(), [u(5)], True),
    ("round_decimals", lambda m, F, x: m.round(x, decimals=1) + m.round(x) + x.round(decimals=-1),
     [v(0.25, 1.35, -2.5, 15.0, 25.0, 1234.5678)], True),
    ("rounding", lambda m, F, x: m.stack([m.trunc(x), m.floor(x), m.ceil(x), m.fix(x), m.sign(x), m.sgn(x), m.frac(x)]),
     [v(-2.5, -0.5, 0.0, -0.0, 0.5, 1.7, nan, inf)], True),
    ("rounding_ints", lambda m, F, i: m.stack([m.round(i), m.trunc(i), m.floor(i), m.ceil(i), m.sign(i), m.square(i)]),
     [np.array([-7, 0, 3], "int64")], False),
    ("div_modes", lambda m, F, a, b: m.stack([m.div(a, b, rounding_mode="trunc"), a.div(b, rounding_mode="floor"),
                                              m.div(a, b)]), [v(7.0, -7.0, 7.5, -0.5), v(2.0, 2.0, -2.0, 3.0)], True),
    ("div_trunc_int", lambda m, F, a, b: m.div(a, b, rounding_mode="trunc"),
     [np.array([7, -7, 7, -7, 0], "int64"), np.array([2, 2, -2, -2, 3], "int64")], False),
    ("fmod_remainder", lambda m, F, a, b: m.fmod(a, b) * 2 + m.remainder(a, b), [v(5.0, -5.0, 5.5, -0.5), v(3.0, 3.0, -2.0, 2.0)],
     True),
    ("fmod_int", lambda m, F, a, b: m.fmod(a, b), [np.array([7, -7, 7, -7], "int64"), np.array([3, 3, -3, -3], "int64")],
     False),
    ("reciprocal_square", lambda m, F, x: x.reciprocal() + x.square() + m.square(x), [v(-2.0, 0.5, 3.0)], True),
    ("isclose", lambda m, F, a, b: m.stack([m.isclose(a, b), a.isclose(b, rtol=0.1, atol=0.0, equal_nan=True)]),
     [v(1.0, nan, inf, -inf, 1.0, 100.0, 0.0), v(1.0 + 1e-9, nan, inf, inf, 1.2, 105.0, 1e-9)], False),
    # bitwise: integer and bool tensors, torch's promotion
    ("bitwise_int", lambda m, F, a, b: m.stack([a & b, a | b, a ^ b, ~a, m.bitwise_and(a, 6), a.bitwise_xor(b)]),
     [np.array([5, -3, 12, 0], "int64"), np.array([3, 6, -1, 7], "int64")], False),
    ("bitwise_bool", lambda m, F, a, b: m.stack([a & b, a | b, a ^ b, ~a, m.bitwise_not(b)]),
     [np.array([True, False, True, False]), np.array([True, True, False, False])], False),
    ("bitwise_bool_int", lambda m, F, b, i: m.stack([b & i, b | 1, i ^ True, 5 & i, 2 | b]),
     [np.array([True, False, True]), np.array([5, 6, 7], "int64")], False),
    ("bitwise_int32_int64", lambda m, F, a, b: a & b, [np.array([5, 6], "int32"), np.array([3, 3], "int64")], False),
    ("shifts", lambda m, F, a, s: m.stack([a << s, a >> s, 1 << s, a.bitwise_left_shift(2), m.bitwise_right_shift(a, 1)]),
     [np.array([5, -3, 12, -2**62], "int64"), np.array([1, 2, 3, 63], "int64")], False),
    ("shift_past_width", lambda m, F, a: m.stack([a << 40, a >> 40, a << -1]), [np.array([5, -3, 12], "int32")],
     False),
    # activations
    ("hardsigmoid", lambda m, F, x: F.hardsigmoid(x), [v(-4.0, -3.0, -1.0, 0.0, 2.0, 3.0, 5.0)], True),
    ("hardswish", lambda m, F, x: F.hardswish(x), [v(-4.0, -3.0, -1.0, 0.0, 2.0, 3.0, 5.0)], True),
    ("hardtanh", lambda m, F, x: F.hardtanh(x) + F.hardtanh(x, -0.5, 2.0) * 2, [v(-3.0, -1.0, -0.5, 0.0, 1.0, 2.0, nan)],
     True),
    ("relu6", lambda m, F, x: F.relu6(x), [v(-1.0, 0.0, 3.0, 6.0, 7.0)], True),
    ("selu_celu", lambda m, F, x: F.selu(x) * 2 + F.celu(x, 2.0) * 3, [v(-3.0, -0.5, 0.0, 0.5, 50.0)], True),
    ("elu", lambda m, F, x: F.elu(x, 0.7), [v(-3.0, -0.5, 0.0, 0.5, 50.0)], True),
    ("softsign_tanhshrink", lambda m, F, x: F.softsign(x) + F.tanhshrink(x) * 2, [v(-3.0, -0.5, 0.0, 0.5, 4.0)], True),
    ("softplus", lambda m, F, x: F.softplus(x, 2.0, 1.0) + F.softplus(x), [v(-30.0, -0.5, 0.0, 0.5, 0.6, 30.0)], True),
    ("mish_logsigmoid", lambda m, F, x: F.mish(x) + F.logsigmoid(x) * 2, [v(-30.0, -0.5, 0.0, 0.5, 30.0)], True),
    ("shrinks", lambda m, F, x: F.softshrink(x) + F.hardshrink(x, 0.3) * 2, [v(-1.0, -0.5, -0.3, 0.0, 0.3, 0.5, 1.0)],
     True),
    ("threshold", lambda m, F, x: F.threshold(x, 0.5, -2.0), [v(-1.0, 0.5, 0.7)], True),
    ("leaky_relu", lambda m, F, x: F.leaky_relu(x, 0.2), [v(-1.0, 0.0, 0.7)], True),
    ("glu", lambda m, F, x: F.glu(x, dim=1) + F.glu(x.transpose(0, 1), 0).transpose(0, 1), [u(3, 4)], True),
    ("softmin", lambda m, F, x: F.softmin(x, dim=1) + F.softmin(x, dim=0), [u(3, 4)], True),
]


# torch's hardsigmoid backward multiplies by float32(1/6) even for float64 (3e-8 off); tracegrad's slope is 1/6
GRAD_RTOL = {"hardsigmoid": 1e-7}


def _flat(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _tol(want) -> dict:
    """float64 to 1e-10; float32 to a few ulps (torch's and NumPy's float32 tan, atan2 ... round differently)"""
    return dict(rtol=1e-10, atol=1e-12) if want.dtype != np.float32 else dict(rtol=4e-7, atol=1e-7)


def _dtype(t) -> str:
    return str(t.dtype).removeprefix("torch.")


@pytest.mark.parametrize("row", ROWS, ids=[r[0] for r in ROWS])
def test_eager_traced_and_gradients_match_torch(row):
    name, fn, inputs, differentiable = row
    t_in = [torch.tensor(a, requires_grad=differentiable) for a in inputs]
    t_out = _flat(fn(torch, torch.nn.functional, *t_in))
    expected = [o.detach().numpy() for o in t_out]

    eager = _flat(fn(tracer, TF, *[tracer.tensor(a) for a in inputs]))
    assert len(eager) == len(expected)
    for got, want, t in zip(eager, expected, t_out, strict=True):
        assert got.shape == want.shape and got.dtype == _dtype(t), (name, got.shape, got.dtype, want.shape, t.dtype)
        np.testing.assert_allclose(got.numpy(), want, **_tol(want))

    traced = tracer.trace(lambda *xs: tuple(_flat(fn(tracer, TF, *xs))), *inputs)
    for got, want in zip(_flat(ir.Executor(traced)["main"](*inputs)), expected, strict=True):
        assert str(got.dtype) == str(want.dtype)
        np.testing.assert_allclose(got, want, **_tol(want))

    if not differentiable:
        return
    weights = [R.uniform(0.5, 1.5, w.shape) for w in expected]
    sum((o * torch.tensor(w)).sum() for o, w in zip(t_out, weights, strict=True)).backward()

    def loss(*xs):
        outs = _flat(fn(tracer, TF, *xs))
        return sum((o * tracer.tensor(w)).sum() for o, w in zip(outs, weights, strict=True))

    xs = [tracer.tensor(a) for a in inputs]
    _, grads = autodiff.value_and_grad(loss, wrt=xs)(*xs)
    for g, t in zip(grads, t_in, strict=True):
        want = np.zeros(t.shape) if t.grad is None else t.grad.numpy()
        np.testing.assert_allclose(g.numpy(), want, rtol=GRAD_RTOL.get(name, 1e-9), atol=1e-12, err_msg=name)


def test_allclose_and_equal_are_python_bools_as_torch():
    a, b = v(1.0, 2.0, nan), v(1.0 + 1e-9, 2.0, nan)
    for m, wrap in ((torch, torch.tensor), (tracer, tracer.tensor)):
        x, y = wrap(a), wrap(b)
        assert m.allclose(x, y) is False and m.allclose(x, y, equal_nan=True) is True
        assert x.allclose(y, equal_nan=True) is True and x.equal(x[:2]) is False and x[:2].equal(y[:2] * 1) is False
        assert x[:2].equal(wrap(v(1.0, 2.0))) is True
    with pytest.raises(tracer.TraceError):
        tracer.trace(lambda x: x * float(tracer.allclose(x, x)), a)


FLOAT_BITWISE = [lambda x: x & x, lambda x: x | 1, lambda x: x ^ x, lambda x: ~x, lambda x: x << 1,
                 lambda x: tracer.bitwise_right_shift(x, 1), lambda x: x.bitwise_and(2)]


@pytest.mark.parametrize("op", FLOAT_BITWISE, ids=["and", "or", "xor", "not", "lshift", "rshift", "method"])
def test_bitwise_on_floats_is_a_clear_error_eagerly_and_traced(op):
    pattern = r"bitwise_\w+: expects integer( or bool)? tensors, got dtype float64"
    with pytest.raises(TypeError, match=pattern):
        op(tracer.tensor(v(1.0, 2.0)))
    with pytest.raises(TypeError, match=pattern):
        tracer.trace(op, v(1.0, 2.0))


def test_shifting_bools_is_an_error_as_torch():
    b = np.array([True, False])
    with pytest.raises(NotImplementedError):
        torch.tensor(b) << torch.tensor(b)
    with pytest.raises(TypeError, match="bitwise_left_shift: expects integer tensors, got dtype bool"):
        tracer.tensor(b) << tracer.tensor(b)


def test_errors_name_the_function():
    x = tracer.tensor(v(1.0, 2.0, 3.0))
    with pytest.raises(TypeError, match="heaviside: input .float64. and values .float32."):
        tracer.heaviside(x, tracer.tensor([0.5]))
    with pytest.raises(TypeError, match="isclose: input .float64. and other .int64."):
        tracer.isclose(x, tracer.tensor(np.array([1, 2, 3])))
    with pytest.raises(TypeError, match="frac: expects a floating tensor, got int64"):
        tracer.frac(tracer.tensor(np.array([1, 2])))
    with pytest.raises(ValueError, match="glu: halving dimension must be even"):
        TF.glu(x)
    with pytest.raises(ValueError, match="hardtanh: min_val .2.0. cannot be greater than max_val"):
        TF.hardtanh(x, 2.0, 1.0)
    with pytest.raises(ValueError, match="div: rounding_mode must be None, 'trunc' or 'floor'"):
        tracer.div(x, 2, rounding_mode="round")
    with pytest.raises(TypeError, match="tan_: the result has dtype float32, which cannot be stored in the int64"):
        tracer.tensor(np.array([1, 2])).tan_()
    with pytest.raises(ir.IRError, match=r"atan2: cannot broadcast argument x1 of shape \(3,\) with argument x2 of shape "
                                         r"\(2,\)"):
        tracer.atan2(x, tracer.tensor(v(1.0, 2.0)))
    with pytest.raises(ZeroDivisionError, match="mod: integer division by zero"):
        tracer.fmod(tracer.tensor(np.array([1, 2])), 0)


def test_heaviside_gradient_reaches_values_where_x_is_zero():
    """torch raises for heaviside's derivative; tracegrad gives the true one: none to x (piecewise constant)
    and, to values, g where x == 0 (values is the output there)."""
    x, w = tracer.tensor(v(-1.0, 0.0, 2.0, 0.0)), tracer.tensor(v(0.5, 0.25, 0.5, 3.0))
    gx, gw = autodiff.grad(lambda a, b: (tracer.heaviside(a, b) * tracer.tensor(v(1.0, 2.0, 3.0, 4.0))).sum(),
                           wrt=[x, w])(x, w)
    np.testing.assert_array_equal(gw.numpy(), [0.0, 2.0, 0.0, 4.0])
    assert gx is None or not gx.numpy().any()


@pytest.mark.parametrize("ufunc", [np.log1p, np.expm1, np.tan, np.arcsinh, np.log2, np.trunc, np.reciprocal],
                         ids=lambda f: f.__name__)
def test_numpy_ufuncs_on_tensors_run_the_new_ops(ufunc):
    x = v(0.25, 0.5, 2.0)
    out = ufunc(tracer.tensor(x))
    assert isinstance(out, tracer.Tensor)
    np.testing.assert_allclose(out.numpy(), ufunc(x), rtol=1e-15)
    assert isinstance(tracer.trace(lambda t: ufunc(t), x), ir.IRModule)


def test_numpy_binary_and_bitwise_ufuncs_on_tensors():
    a, b = v(1.0, -2.0), v(0.5, 3.0)
    np.testing.assert_allclose(np.arctan2(tracer.tensor(a), tracer.tensor(b)).numpy(), np.arctan2(a, b), rtol=1e-15)
    np.testing.assert_allclose(np.logaddexp(tracer.tensor(a), b).numpy(), np.logaddexp(a, b), rtol=1e-15)
    i = np.array([5, -3], "int64")
    assert np.invert(tracer.tensor(i)).numpy().tolist() == (~i).tolist()
    assert np.left_shift(tracer.tensor(i), 2).numpy().tolist() == (i << 2).tolist()
