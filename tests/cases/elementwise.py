import numpy as np

import tracer as T
from tests.cases import OpCase, rand

_erf = np.vectorize(__import__("math").erf)


def _gelu(x):
    return (0.5 * x * (1 + _erf(x / np.sqrt(2)))).astype(x.dtype)


def _gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh((2 / np.pi) ** 0.5 * (x + 0.044715 * x**3)))


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


pos = rand(3, 4, low=0.5, high=2.0)
CASES = [
    OpCase("add_broadcast_rhs", T.add, np.add, [rand(3, 4), rand(4, seed=1)], ("add",)),
    OpCase("add_broadcast_both", lambda a, b: a + b, np.add, [rand(3, 1), rand(1, 4, seed=1)], ("add",)),
    OpCase("add_scalar_0d", lambda a, b: a + b, np.add, [rand(), rand(2, 3, seed=2)], ("add",)),
    OpCase("subtract", lambda a, b: a - b, np.subtract, [rand(2, 3), rand(3, seed=1)], ("subtract",)),
    OpCase("multiply", lambda a, b: a * b, np.multiply, [rand(2, 1, 3), rand(4, 1, seed=1)], ("multiply",)),
    OpCase("divide", lambda a, b: a / b, np.divide, [rand(2, 3), pos[:1, :3]], ("divide",)),
    OpCase("power", T.power, np.power, [pos, rand(3, 4, seed=3)], ("power",)),
    OpCase("pow_scalar", lambda a: a ** 2.0, lambda a: a ** np.float32(2.0), [rand(5)], ("power",)),
    # torch's integer rule for a negative exponent (NumPy raises): 0, 1 for a base of 1, +-1 by parity for -1
    OpCase("power_int_negative_exponent", T.power, lambda a, b: np.array([0, 1, -1, 0, 0, 0, 1, 25, -8], "int32"),
           [np.array([2, 1, -1, 3, 0, -2, -1, 5, -2], "int32"), np.array([-1, -1, -1, -2, -1, -3, -2, 2, 3], "int32")],
           ("power",), grad=False),
    OpCase("maximum", T.maximum, np.maximum, [rand(3, 4), rand(4, seed=1)], ("maximum",)),
    OpCase("minimum", T.minimum, np.minimum, [rand(3, 4), rand(3, 1, seed=1)], ("minimum",)),
    OpCase("negative", lambda a: -a, np.negative, [rand(2, 3)], ("negative",)),
    OpCase("exp", T.exp, np.exp, [rand(2, 3)], ("exp",)),
    OpCase("log", T.log, np.log, [pos], ("log",)),
    OpCase("sqrt", T.sqrt, np.sqrt, [pos], ("sqrt",)),
    OpCase("rsqrt", T.rsqrt, lambda a: 1 / np.sqrt(a), [pos], ("rsqrt",)),
    OpCase("abs", T.abs, np.abs, [rand(7)], ("abs",)),
    OpCase("sin", T.sin, np.sin, [rand(2, 2)], ("sin",)),
    OpCase("cos", T.cos, np.cos, [rand(2, 2)], ("cos",)),
    OpCase("tanh", T.tanh, np.tanh, [rand(3, 2)], ("tanh",)),
    OpCase("sigmoid", T.sigmoid, _sigmoid, [rand(3, 2, low=-5, high=5)], ("sigmoid",)),
    OpCase("relu", T.relu, lambda a: np.maximum(a, 0), [rand(4, 3)], ("nn.relu",)),
    OpCase("silu", T.silu, lambda a: a * _sigmoid(a), [rand(4, 3)], ("nn.silu",)),
    OpCase("gelu", T.gelu, _gelu, [rand(4, 3, low=-4, high=4)], ("nn.gelu",)),
    OpCase("gelu_tanh", lambda a: T.gelu(a, approximate="tanh"), _gelu_tanh, [rand(4, 3)], ("nn.gelu",)),
    OpCase("log_sigmoid", T.log_sigmoid, lambda a: -np.logaddexp(0, -a), [rand(3, 4, low=-30, high=30)],
           ("nn.log_sigmoid",)),
    OpCase("sigmoid_tails", T.sigmoid, _sigmoid, [np.array([-40.0, -20.0, -1.0, 0.0, 1.0, 20.0, 40.0], "float32")],
           ("sigmoid",)),
    OpCase("floor_divide", lambda a, b: a // b, np.floor_divide, [rand(3, 4, low=-3, high=3), pos[:1]],
           ("floor_divide",)),
    OpCase("floor_divide_int", T.floor_divide, np.floor_divide,
           [np.array([7, -7, 7, -7, 0], "int64"), np.array([2, 2, -2, -2, 3], "int64")], ("floor_divide",), grad=False),
    OpCase("remainder", lambda a, b: a % b, np.remainder, [rand(3, 4, low=-3, high=3), rand(4, low=-2, high=-0.5)],
           ("floor_mod",)),
    OpCase("remainder_int", T.remainder, np.remainder,
           [np.array([7, -7, 7, -7, 0], "int32"), np.array([3, 3, -3, -3, 5], "int32")], ("floor_mod",), grad=False),
    OpCase("where", T.where, np.where, [rand(3, 4, dtype="bool"), rand(3, 4), rand(4, seed=1)], ("where",)),
    OpCase("where_cond_broadcast", lambda c, a, b: T.where(c, a, b), np.where,
           [np.array([True, False, False, True]), rand(3, 1), rand(3, 4, seed=1)], ("where",)),  # both branches
    # a cast matches NumPy's exactly; finite differences through float16 are meaningless
    OpCase("astype_f16", lambda a: T.astype(a, "float16"), lambda a: a.astype("float16"), [rand(3)], ("astype",),
           rtol=0, atol=0, grad=False),
    # the gradient through a cast: float64 -> float32 of values so small (|x| < 1e-5) that float32's spacing
    # (< 1e-12) keeps float64 finite differences to ~5e-7 relative
    OpCase("astype_f32_grad", lambda a: T.astype(a, "float32"), lambda a: a.astype("float32"),
           [rand(3, 4, dtype="float64", low=-1e-5, high=1e-5)], ("astype",), rtol=0, atol=0),
    OpCase("astype_int", lambda a: T.astype(a * 10, "int32"), lambda a: (a * np.float32(10)).astype("int32"),
           [rand(3)], ("astype", "multiply"), grad=False),
]
for _op, _np in [("less", np.less), ("less_equal", np.less_equal), ("greater", np.greater),
                 ("greater_equal", np.greater_equal), ("equal", np.equal), ("not_equal", np.not_equal)]:
    CASES.append(OpCase(_op, getattr(T, _op), _np, [rand(3, 4), rand(4, seed=1)], (_op,), grad=False))
CASES.append(OpCase("equal_ties", T.equal, np.equal, [np.array([1, 2, 3], "int64"), np.array([1, 0, 3], "int64")],
                    ("equal",), grad=False))
# stop_gradient is the identity forward; its gradient (none) is checked in test_gradient_pass.py
CASES.append(OpCase("stop_gradient", T.stop_gradient, lambda a: a, [rand(2, 3)], ("grad.stop_gradient",), grad=False))
