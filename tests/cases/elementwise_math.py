"""Rows of ir/ops/unary_math.py, binary_math.py and bitwise.py, and of the tracer composites built on them
(clamp, lerp, logit, nan_to_num, frac, div's rounding modes, isclose) and nn.functional's activations.

Gradient rows sample inside each domain, away from kinks (the finite-difference and second-order tests
need a smooth neighbourhood); the edge points of each domain (poles, +-1, 0, ties, NaN, inf) are forward
rows here and gradient rows against torch in tests/tracer/test_torch_elementwise.py.
"""
import math

import numpy as np

import tracer as T
from nn import functional as F
from tests.cases import OpCase, rand

_erf = np.vectorize(math.erf, otypes=[float])
_erfc = np.vectorize(math.erfc, otypes=[float])


def _erfinv_one(y: float) -> float:
    """Bisection on math.erf (or math.erfc in the tails, where 1 - y is exact): a reference that shares no
    code with the kernel."""
    if abs(y) >= 1:
        return math.copysign(math.inf, y) if abs(y) == 1 else math.nan
    a, target = abs(y), 1 - abs(y)
    lo, hi = 0.0, 10.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if (math.erf(mid) < a) if a <= 0.5 else (math.erfc(mid) > target):
            lo = mid
        else:
            hi = mid
    return math.copysign((lo + hi) / 2, y)


def _keep(fn):
    """A NumPy reference in the input's dtype (math's functions give float64)."""
    return lambda a, *rest: np.asarray(fn(a.astype("float64"), *rest)).astype(a.dtype)


def _quiet(fn):
    def ref(*args):
        with np.errstate(all="ignore"):
            return fn(*args)
    return ref


_erfinv = np.vectorize(_erfinv_one, otypes=[float])
unit = rand(3, 4, low=-0.9, high=0.9)
big = rand(3, 4, low=1.2, high=3.0, seed=4)
pos = rand(3, 4, low=0.2, high=3.0, seed=5)
f32 = "float32"
nan, inf = np.nan, np.inf

UNARY = [  # name, tracer fn, NumPy reference, gradient input, edge input (domain ends, poles, NaN, inf)
    ("tan", T.tan, np.tan, rand(3, 4, low=-1.4, high=1.4), [0.0, -0.0, np.pi / 2, nan, inf]),
    ("asin", T.asin, np.arcsin, unit, [1.0, -1.0, 1.5, 0.0, nan]),
    ("acos", T.acos, np.arccos, unit, [1.0, -1.0, -1.5, 0.0, nan]),
    ("atan", T.atan, np.arctan, rand(3, 4, low=-4, high=4), [inf, -inf, 0.0, nan, 1e30]),
    ("sinh", T.sinh, np.sinh, rand(3, 4, low=-3, high=3), [0.0, 100.0, -100.0, inf, nan]),
    ("cosh", T.cosh, np.cosh, rand(3, 4, low=-3, high=3), [0.0, 100.0, -100.0, -inf, nan]),
    ("asinh", T.asinh, np.arcsinh, rand(3, 4, low=-4, high=4), [0.0, 1e30, -1e30, -inf, nan]),
    ("acosh", T.acosh, np.arccosh, big, [1.0, 0.5, 1e30, inf, nan]),
    ("atanh", T.atanh, np.arctanh, unit, [1.0, -1.0, 1.5, 0.0, nan]),
    ("erf", T.erf, _keep(_erf), rand(3, 4, low=-3, high=3), [0.0, 6.0, -6.0, inf, -inf]),
    ("erfc", T.erfc, _keep(_erfc), rand(3, 4, low=-3, high=3), [0.0, 10.0, 27.0, -inf, inf]),
    ("erfinv", T.erfinv, _keep(_erfinv), unit, [1.0, -1.0, 0.0, 1.5, 0.999999]),
    ("log2", T.log2, np.log2, pos, [0.0, 8.0, 1.0, -1.0, inf]),
    ("log10", T.log10, np.log10, pos, [0.0, 1000.0, 1.0, -1.0, inf]),
    ("log1p", T.log1p, np.log1p, rand(3, 4, low=-0.9, high=3), [-1.0, 1e-10, -1e-10, -2.0, inf]),
    ("expm1", T.expm1, np.expm1, rand(3, 4, low=-3, high=3), [1e-10, -1e-10, 0.0, -inf, 100.0]),
    ("exp2", T.exp2, np.exp2, rand(3, 4, low=-3, high=3), [3.0, -1.0, 0.0, -inf, 200.0]),
]
CASES = []
for _name, _fn, _ref, _x, _edge in UNARY:
    CASES.append(OpCase(_name, _fn, _ref, [_x], (_name,)))
    CASES.append(OpCase(f"{_name}_edges", _fn, _quiet(_ref), [np.array(_edge, f32)], (_name,), grad=False))
CASES += [
    OpCase("erfinv_tails_float64", T.erfinv, _erfinv, [np.array([1 - 1e-15, -1 + 1e-12, 0.5, 0.5 + 1e-9, 1e-5])],
           ("erfinv",), rtol=1e-13, grad=False),
    OpCase("erfc_tail_float64", T.erfc, _erfc, [np.array([2.0, 6.0, 10.0, 26.0, -3.0])], ("erfc",), rtol=1e-13,
           grad=False),
    OpCase("tan_int_is_float32", T.tan, lambda a: np.tan(a.astype(f32)), [np.array([0, 1, -2], "int64")],
           ("astype", "tan"), grad=False),
]

# ---------------------------------------------------------------- rounding: zero gradient, integers pass through
halves = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.49999997, -3.7, 3.7, nan, inf], f32)
ints = np.array([-7, 0, 3, 2**40], "int64")
CASES += [
    OpCase("sign", T.sign, np.sign, [rand(3, 4)], ("sign",)),
    OpCase("sign_edges", T.sign, lambda a: np.nan_to_num(np.sign(a)) + 0.0,  # NaN's sign is 0, as torch's
           [np.array([0.0, -0.0, nan, -inf, 2.0], f32)], ("sign",), grad=False),
    OpCase("sign_int_bool", lambda i, b: (T.sign(i), T.sgn(b)), lambda i, b: (np.sign(i), b),
           [np.array([-3, 0, 5], "int32"), np.array([True, False])], ("sign",), grad=False),
    OpCase("round", T.round, np.round, [rand(3, 4, low=-3, high=3)], ("round",)),
    OpCase("round_half_even", T.round, np.round, [halves], ("round",), rtol=0, atol=0, grad=False),
    OpCase("round_decimals", lambda x: T.round(x, decimals=2), lambda a: np.round(a, 2),
           [rand(3, 4, dtype="float64", low=-30, high=30)], ("round",), rtol=0, atol=0),
    OpCase("round_decimals_negative", lambda x: T.round(x, decimals=-1), lambda a: np.round(a, -1),
           [np.array([15.0, 25.0, -35.0, 1234.5678, 4.9], "float64")], ("round",), rtol=0, atol=0, grad=False),
    OpCase("trunc", T.trunc, np.trunc, [rand(3, 4, low=-3, high=3)], ("trunc",)),
    OpCase("floor", T.floor, np.floor, [rand(3, 4, low=-3, high=3)], ("floor",)),
    OpCase("ceil", T.ceil, np.ceil, [rand(3, 4, low=-3, high=3)], ("ceil",)),
    OpCase("rounding_edges", lambda x: (T.trunc(x), T.floor(x), T.ceil(x), T.fix(x)),
           lambda a: (np.trunc(a), np.floor(a), np.ceil(a), np.trunc(a)), [halves], ("trunc", "floor", "ceil"),
           rtol=0, atol=0, grad=False),
    OpCase("rounding_ints", lambda i: (T.round(i), T.trunc(i), T.floor(i), T.ceil(i)), lambda a: (a, a, a, a),
           [ints], ("round", "trunc", "floor", "ceil"), grad=False),
    OpCase("frac", T.frac, lambda a: a - np.trunc(a), [rand(3, 4, low=-3, high=3)], ("trunc", "subtract")),
    OpCase("div_trunc", lambda a, b: T.div(a, b, rounding_mode="trunc"), lambda a, b: np.trunc(a / b),
           [rand(3, 4, low=-5, high=5), rand(4, low=0.3, high=2, seed=2)], ("divide", "trunc")),
    OpCase("div_trunc_int", lambda a, b: T.div(a, b, rounding_mode="trunc"),
           lambda a, b: (np.sign(a) * np.sign(b) * (np.abs(a) // np.abs(b))).astype(a.dtype),
           [np.array([7, -7, 7, -7, 0, 2**62 + 1], "int64"), np.array([2, 2, -2, -2, 3, 3], "int64")], ("divide",),
           grad=False),
    OpCase("div_floor", lambda a, b: T.div(a, b, rounding_mode="floor"), np.floor_divide,
           [np.array([7, -7, 7, -7], "int32"), np.array([2, 2, -2, -2], "int32")], ("floor_divide",), grad=False),
    OpCase("reciprocal", T.reciprocal, lambda a: 1 / a, [pos], ("divide",)),
    OpCase("reciprocal_int", T.reciprocal, lambda a: (1 / a).astype(f32), [np.array([1, -2, 4], "int32")],
           ("divide",), grad=False),
    OpCase("square", T.square, np.square, [rand(3, 4)], ("multiply",)),
]

# ---------------------------------------------------------------- binary math
a34, b34 = rand(3, 4, low=-2, high=2), rand(4, low=-2, high=2, seed=1)
CASES += [
    OpCase("atan2", T.atan2, np.arctan2, [a34, b34], ("atan2",)),
    OpCase("atan2_quadrants", T.atan2, np.arctan2,
           [np.array([0.0, -0.0, 0.0, -0.0, 1.0, -1.0, inf, nan], f32),
            np.array([0.0, 0.0, -0.0, -0.0, -inf, -inf, inf, 1.0], f32)], ("atan2",), rtol=0, atol=0, grad=False),
    OpCase("hypot", T.hypot, np.hypot, [a34, b34], ("hypot",)),
    OpCase("hypot_no_overflow", T.hypot, np.hypot, [np.array([3e38, 0.0, inf, nan], f32),
                                                   np.array([3e38, 0.0, nan, inf], f32)], ("hypot",), grad=False),
    OpCase("copysign", T.copysign, np.copysign, [a34, b34], ("copysign",)),
    OpCase("copysign_zeros", T.copysign, np.copysign, [np.array([1.0, 1.0, 0.0, -2.0, nan], f32),
                                                      np.array([-0.0, 0.0, -1.0, inf, -1.0], f32)], ("copysign",),
           rtol=0, atol=0, grad=False),
    OpCase("fmax", T.fmax, np.fmax, [a34, b34], ("fmax",)),
    OpCase("fmin", T.fmin, np.fmin, [a34, rand(3, 1, seed=3)], ("fmin",)),
    OpCase("fmin_fmax_nan", lambda a, b: (T.fmin(a, b), T.fmax(a, b)), lambda a, b: (np.fmin(a, b), np.fmax(a, b)),
           [np.array([nan, 1.0, nan, 2.0], f32), np.array([1.0, nan, nan, 2.0], f32)], ("fmin", "fmax"), grad=False),
    OpCase("logaddexp", T.logaddexp, np.logaddexp, [rand(3, 4, low=-30, high=30), b34], ("log_add_exp",)),
    OpCase("logaddexp_extremes", T.logaddexp, _quiet(np.logaddexp),
           [np.array([1e4, -1e4, -inf, inf, 0.0], f32), np.array([1e4, -1e4, -inf, 1.0, -inf], f32)],
           ("log_add_exp",), grad=False),
    OpCase("xlogy", T.xlogy, lambda x, y: x * np.log(y), [a34, rand(4, low=0.3, high=3, seed=6)], ("xlogy",)),
    OpCase("xlogy_zero", T.xlogy, lambda x, y: np.array([0, 0, 0, nan, -inf, 0], f32),
           [np.array([0.0, 0.0, 0.0, 0.0, 1.0, 0.0], f32), np.array([0.0, -1.0, inf, nan, 0.0, 2.0], f32)],
           ("xlogy",), grad=False),
    OpCase("fmod", T.fmod, np.fmod, [rand(3, 4, low=-5, high=5), rand(4, low=0.7, high=2, seed=7) * [1, -1, 1, -1]],
           ("mod",)),
    OpCase("fmod_int", T.fmod, np.fmod, [np.array([7, -7, 7, -7, 0], "int32"), np.array([3, 3, -3, -3, 5], "int32")],
           ("mod",), grad=False),
    OpCase("heaviside_edges", T.heaviside, lambda x, w: np.where(x == 0, w, (x > 0).astype(x.dtype)),
           [np.array([-1.0, 0.0, 2.0, -0.0, nan], f32), np.array([0.5, 0.5, 0.5, -1.0, 0.5], f32)], ("heaviside",),
           grad=False),
    OpCase("heaviside", T.heaviside, np.heaviside, [a34, rand(4, seed=3)], ("heaviside",)),  # dvalues: 0 off x == 0
    OpCase("clamp_tensor_bounds", lambda x, lo, hi: T.clamp(x, lo, hi),
           lambda x, lo, hi: np.minimum(np.maximum(x, lo), hi), [a34, rand(4, low=-1.5, high=-0.5, seed=8),
                                                               rand(3, 1, low=0.3, high=1.2, seed=9)], ("clamp",)),
    OpCase("clamp_crossed_bounds_nan", lambda x, lo, hi: x.clamp(lo, hi),
           lambda x, lo, hi: np.minimum(np.maximum(x, lo), hi),
           [np.array([nan, 0.0, 2.0, 0.5, 0.3], f32), np.array([0.0, 1.0, 1.0, 0.5, nan], f32),
            np.array([1.0, -1.0, -1.0, 0.5, 1.0], f32)], ("clamp",), grad=False),
    OpCase("clamp_one_sided_scalar", lambda x: (x.clamp(min=-0.5), x.clip(max=0.25), T.clamp(x, -0.5, 0.25)),
           lambda a: (np.maximum(a, np.float32(-0.5)), np.minimum(a, np.float32(0.25)), np.clip(a, -0.5, 0.25)),
           [a34], ("clamp",)),
    OpCase("clamp_int", lambda i: (i.clamp(-2, 3), i.clamp(min=0.5)),
           lambda a: (np.clip(a, -2, 3), np.maximum(a, 0.5).astype(f32)), [np.array([-7, 0, 3, 9], "int64")],
           ("clamp",), grad=False),
    OpCase("lerp_scalar", lambda s, e: T.lerp(s, e, 0.3), lambda s, e: s + np.float32(0.3) * (e - s), [a34, b34],
           ("multiply", "add")),
    OpCase("lerp_tensor", T.lerp, lambda s, e, w: s + w * (e - s), [a34, b34, rand(3, 1, low=0, high=1, seed=2)],
           ("multiply", "add")),
    OpCase("logit", T.logit, lambda p: np.log(p / (1 - p)), [rand(3, 4, low=0.05, high=0.95)], ("log", "log1p")),
    OpCase("logit_eps", lambda p: T.logit(p, eps=0.1), lambda p: np.log(np.clip(p, 0.1, 0.9) / (1 - np.clip(p, 0.1, 0.9))),
           [rand(3, 4, low=0.12, high=0.88)], ("clamp", "log1p")),
    OpCase("logit_edges", T.logit, _quiet(lambda p: np.log(p / (1 - p))), [np.array([0.0, 1.0, 0.5, 1.5], f32)],
           ("log", "log1p"), grad=False),
    OpCase("nan_to_num", lambda x: T.nan_to_num(x * 2), _quiet(lambda a: np.nan_to_num(a * 2)),
           [np.array([nan, inf, -inf, 1.0, -2.0, 3e38], f32)], ("where",), grad=False),  # a loss of +-max overflows
    OpCase("nan_to_num_values", lambda x: T.nan_to_num(x, nan=1.5, posinf=9.0, neginf=-9.0),
           lambda a: np.nan_to_num(a, nan=1.5, posinf=9.0, neginf=-9.0),
           [np.array([nan, inf, -inf, 1.0, -2.5], "float64")], ("where",)),
    OpCase("isclose", lambda a, b: (T.isclose(a, b), T.isclose(a, b, rtol=0.1, atol=0.0, equal_nan=True)),
           lambda a, b: (np.isclose(a, b), np.isclose(a, b, rtol=0.1, atol=0.0, equal_nan=True)),
           [np.array([1.0, nan, inf, -inf, 1.0, 100.0, 0.0], "float64"),
            np.array([1.0 + 1e-9, nan, inf, inf, 1.2, 105.0, 1e-9], "float64")],
           ("equal", "less_equal", "bitwise_or"), grad=False),
]

# ---------------------------------------------------------------- bitwise (no gradient)
i32 = np.array([5, -3, 12, 0, -2**31], "int32")
s32 = np.array([1, 2, 40, -1, 31], "int32")
m1, m2 = np.array([True, False, True, False]), np.array([True, True, False, False])
CASES += [
    OpCase("bitwise_int", lambda a, b: (a & b, a | b, a ^ b, ~a), lambda a, b: (a & b, a | b, a ^ b, ~a),
           [i32, np.array([3, 6, -1, 7, 1], "int32")], ("bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not"),
           grad=False),
    OpCase("bitwise_bool", lambda a, b: (a & b, a | b, a ^ b, ~a), lambda a, b: (a & b, a | b, a ^ b, ~a), [m1, m2],
           ("bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not"), grad=False),
    OpCase("bitwise_promotes", lambda b, i: (b & i, b | 1, i ^ True, T.bitwise_and(i, 6)),
           lambda b, i: (b & i, b.astype("int64") | 1, i ^ 1, i & 6), [m1, np.array([5, 6, 7, 8], "int64")],
           ("bitwise_and", "bitwise_or", "bitwise_xor"), grad=False),
    OpCase("shifts", lambda a, s: (a << s, a >> s, T.bitwise_left_shift(a, 1), 1 << s.astype("int64")),
           lambda a, s: (np.where((s < 0) | (s >= 32), 0, a << np.clip(s, 0, 31)),
                         a >> np.where((s < 0) | (s >= 32), 31, s), a << 1,
                         np.where(s < 0, 0, np.left_shift(1, np.clip(s, 0, 63).astype("int64")))),
           [i32, s32], ("left_shift", "right_shift"), grad=False),
]

# ---------------------------------------------------------------- nn.functional activations (composites)
act = np.concatenate([np.linspace(-5.3, 5.1, 23), [-3.05, -2.9, 2.95, 3.1, 0.7, -0.7, 0.4, -0.45]]).astype(f32)


def _softplus(z):
    return np.log1p(np.exp(z))


_SELU_A, _SELU_S = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946
ACTIVATIONS = [
    ("hardsigmoid", F.hardsigmoid, lambda a: np.clip(a + 3, 0, 6) / 6),
    ("hardswish", F.hardswish, lambda a: a * np.clip(a + 3, 0, 6) / 6),
    ("hardtanh", lambda x: F.hardtanh(x, -2.0, 1.5), lambda a: np.clip(a, -2.0, 1.5)),
    ("relu6", F.relu6, lambda a: np.clip(a, 0, 6)),
    ("selu", F.selu, lambda a: _SELU_S * np.where(a > 0, a, _SELU_A * np.expm1(np.minimum(a, 0)))),
    ("celu", lambda x: F.celu(x, 2.0), lambda a: np.where(a > 0, a, 2.0 * np.expm1(np.minimum(a, 0) / 2.0))),
    ("softsign", F.softsign, lambda a: a / (1 + np.abs(a))),
    ("tanhshrink", F.tanhshrink, lambda a: a - np.tanh(a)),
    ("softshrink", lambda x: F.softshrink(x, 0.6), lambda a: np.where(a > 0.6, a - 0.6, np.where(a < -0.6, a + 0.6, 0))),
    ("hardshrink", F.hardshrink, lambda a: np.where(np.abs(a) > 0.5, a, 0)),
    ("threshold", lambda x: F.threshold(x, 0.3, -2.0), lambda a: np.where(a > 0.3, a, -2.0)),
]
for _name, _fn, _ref in ACTIVATIONS:
    CASES.append(OpCase(f"F_{_name}", _fn, lambda a, _ref=_ref: _ref(a.astype("float64")).astype(a.dtype), [act],
                        ("tanh",) if _name == "tanhshrink" else ("abs",) if _name == "softsign" else ("where",),
                        rtol=1e-5, atol=1e-6))


def _softmin(a, axis):
    e = np.exp(-a - (-a).max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


CASES += [
    OpCase("F_glu", lambda x: F.glu(x, dim=1), lambda a: a[:, :3] / (1 + np.exp(-a[:, 3:])), [rand(2, 6, 2)],
           ("split", "sigmoid")),
    OpCase("F_softmin", lambda x: F.softmin(x, dim=1), lambda a: _softmin(a, 1), [rand(2, 5)], ("nn.softmax",)),
]
