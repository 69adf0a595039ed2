"""Unary math beyond ir/ops/elementwise.py: inverse and hyperbolic trigonometry, the error functions,
logarithms and exponentials in other bases or near 0, and rounding (sign, round, trunc, floor, ceil).

Relax's names where Relax has the op (tan, asin, acos, atan, sinh, cosh, asinh, acosh, atanh, erf, sign,
round, trunc, floor, ceil); NumPy's otherwise (erfc, erfinv, log2, log10, log1p, expm1, exp2). Each is a
primitive because a composite would lose accuracy: log1p(x) is not log(1 + x) for |x| < 1e-8, expm1 is
not exp(x) - 1, erfc(x) is not 1 - erf(x) beyond x = 6, and log2(8) is exactly 3 where log(8) / log(2)
is not. Outside an op's domain the value is NaN (or +-inf at a pole) without a warning, as in PyTorch.
"""
from __future__ import annotations

from .common import require_float, require_numeric
from .registry import Attr, declare, tensor_arg
from .special import erf, erfc, erfinv
from .special import quiet as _quiet


def _infer_float(op, types):
    t = tensor_arg(op, types, 0)
    require_float(op, t)
    return t


def _float_unary(name, fn):
    def kernel(xp, x):
        with _quiet(xp):
            return fn(xp, x)
    declare(name, ("x",), infer=_infer_float, kernel=kernel)


for _name, _fn in [("tan", "tan"), ("asin", "arcsin"), ("acos", "arccos"), ("atan", "arctan"), ("sinh", "sinh"),
                   ("cosh", "cosh"), ("asinh", "arcsinh"), ("acosh", "arccosh"), ("atanh", "arctanh"),
                   ("log2", "log2"), ("log10", "log10"), ("log1p", "log1p"), ("expm1", "expm1"), ("exp2", "exp2")]:
    _float_unary(_name, lambda xp, x, _fn=_fn: getattr(xp, _fn)(x))
_float_unary("erf", erf)
_float_unary("erfc", erfc)
_float_unary("erfinv", erfinv)

# ---------------------------------------------------------------- rounding: integers pass through


def _infer_numeric(op, types, **attrs):
    t = tensor_arg(op, types, 0)
    require_numeric(op, t)
    return t


def _infer_sign(op, types):
    return tensor_arg(op, types, 0)  # sign of a bool tensor is the tensor itself, as torch's


def _sign(xp, x):
    # (x > 0) - (x < 0): NaN gives 0, as torch's sign and TVM's (NumPy's sign gives NaN)
    if x.dtype == bool:
        return x.copy()
    return (x > 0).astype(x.dtype) - (x < 0).astype(x.dtype)


def _round(xp, x, decimals):
    # as torch: nearbyint(x * 10^d) / 10^d, or nearbyint(x / 10^-d) * 10^-d for d < 0 (half to even)
    if x.dtype.kind != "f":
        return x.copy()
    if decimals == 0:
        return xp.rint(x)
    scale = x.dtype.type(10.0 ** abs(decimals))
    with _quiet(xp):
        return xp.rint(x * scale) / scale if decimals > 0 else xp.rint(x / scale) * scale


def _integral(fn):
    return lambda xp, x: getattr(xp, fn)(x) if x.dtype.kind == "f" else x.copy()


declare("sign", ("x",), infer=_infer_sign, kernel=_sign)
declare("round", ("x",), (Attr("decimals", "int", 0),), infer=_infer_numeric, kernel=_round)
declare("trunc", ("x",), infer=_infer_numeric, kernel=_integral("trunc"))
declare("floor", ("x",), infer=_infer_numeric, kernel=_integral("floor"))
declare("ceil", ("x",), infer=_infer_numeric, kernel=_integral("ceil"))
