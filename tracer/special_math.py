"""torch's elementwise math beyond tracer/math.py: trigonometry, error functions, logs and exponentials,
rounding, atan2/hypot/copysign/fmin/fmax/logaddexp/xlogy/fmod/heaviside, clamp with tensor bounds, lerp,
logit, nan_to_num, div(rounding_mode=), isclose/allclose/equal, with torch's argument names and dtypes.

As in torch, the floating functions compute integer and bool tensors in the default float dtype
(float32): `tracer.tan(int_tensor)` is float32. Rounding keeps integer tensors as they are.
"""
from __future__ import annotations

import numpy as np

from .bitwise import bitwise_and, bitwise_or
from .gamma_fns import digamma, lgamma, polygamma
from .inplace import _checked_kind
from .math import abs as _abs
from .math import as_tensor, astype, divide, equal, floor_divide, greater_equal, promote
from .math import less as _less
from .math import less_equal as _less_equal
from .math import log as _log
from .math import multiply as _multiply
from .math import not_equal as _not_equal
from .math import subtract as _subtract
from .math import where as _where
from .tensor import Tensor, apply

_FLOATS = ("float16", "float32", "float64")


def _floating(t: Tensor) -> Tensor:
    """t, or t in torch's default float dtype (float32) when it is an integer or bool tensor."""
    return t if t.dtype in _FLOATS else astype(t, "float32")


def _unary(op: str, name: str):
    def fn(input) -> Tensor:  # noqa: A002 (torch's name)
        return apply(op, [_floating(as_tensor(input))])
    fn.__name__ = name
    fn.__doc__ = f"Elementwise {name} (IR op {op}); integer input is computed in float32, as torch's."
    return fn


tan, asin, acos, atan = (_unary(n, n) for n in ("tan", "asin", "acos", "atan"))
sinh, cosh, asinh, acosh, atanh = (_unary(n, n) for n in ("sinh", "cosh", "asinh", "acosh", "atanh"))
erf, erfc, erfinv = (_unary(n, n) for n in ("erf", "erfc", "erfinv"))
log2, log10, log1p, expm1, exp2 = (_unary(n, n) for n in ("log2", "log10", "log1p", "expm1", "exp2"))


def _binary_float(op: str, name: str):
    def fn(input, other) -> Tensor:  # noqa: A002
        a, b = promote(input, other)
        return apply(op, [_floating(a), _floating(b)])
    fn.__name__ = name
    fn.__doc__ = f"Elementwise {name} with broadcasting (IR op {op}); integers are computed in float32."
    return fn


atan2 = _binary_float("atan2", "atan2")
hypot = _binary_float("hypot", "hypot")
copysign = _binary_float("copysign", "copysign")
logaddexp = _binary_float("log_add_exp", "logaddexp")
xlogy = _binary_float("xlogy", "xlogy")
xlogy.__doc__ = "x * log(y), and 0 where x == 0 (unless y is NaN), as torch.xlogy."


def fmax(input, other) -> Tensor:  # noqa: A002
    """The larger of the two, ignoring a NaN (NaN only where both are); a tie's gradient goes to `input`."""
    return apply("fmax", promote(input, other))


def fmin(input, other) -> Tensor:  # noqa: A002
    """The smaller of the two, ignoring a NaN (NaN only where both are); a tie's gradient goes to `input`."""
    return apply("fmin", promote(input, other))


def fmod(input, other) -> Tensor:  # noqa: A002
    """input - trunc(input / other) * other: the sign of `input`, as C's fmod and torch.fmod (IR op mod);
    remainder (%) takes the sign of `other`. An integer division by zero raises ZeroDivisionError."""
    return apply("mod", promote(input, other))


def heaviside(input, values) -> Tensor:  # noqa: A002
    """0 where input < 0 (or NaN), `values` where input == 0, 1 where input > 0. Both must have one dtype, as
    torch requires. The gradient reaches `values` where input == 0 (torch has none for heaviside)."""
    x, v = as_tensor(input), as_tensor(values)
    if x.dtype != v.dtype:
        raise TypeError(f"heaviside: input ({x.dtype}) and values ({v.dtype}) must have the same dtype, as in torch")
    return apply("heaviside", [x, v])


# ---------------------------------------------------------------- rounding


def sign(input) -> Tensor:  # noqa: A002
    """-1, 0 or 1 (NaN stays NaN; a bool tensor is its own sign); gradient zero."""
    return apply("sign", [as_tensor(input)])


def sgn(input) -> Tensor:  # noqa: A002
    """torch.sgn: sign for real tensors (tracegrad has no complex dtype)."""
    return sign(input)


def round(input, *, decimals: int = 0) -> Tensor:  # noqa: A001,A002 (torch's names)
    """Round half to even, at `decimals` decimal places (negative: tens, hundreds, ...), as torch.round."""
    x = as_tensor(input)
    if decimals != 0 and x.dtype not in _FLOATS:
        raise TypeError(f"round: decimals={decimals} needs a floating tensor, got {x.dtype} (as torch)")
    return apply("round", [x], decimals=decimals)


def _integral(op: str):
    def fn(input) -> Tensor:  # noqa: A002
        return apply(op, [as_tensor(input)])
    fn.__name__ = op
    fn.__doc__ = f"Elementwise {op} (integer tensors unchanged); gradient zero."
    return fn


trunc, floor, ceil = (_integral(n) for n in ("trunc", "floor", "ceil"))
fix = trunc


def frac(input) -> Tensor:  # noqa: A002
    """input - trunc(input), with input's sign; gradient 1, as torch's. Floating tensors only, as torch."""
    x = as_tensor(input)
    if x.dtype not in _FLOATS:
        raise TypeError(f"frac: expects a floating tensor, got {x.dtype} (as torch)")
    return _subtract(x, trunc(x))


def div(input, other, *, rounding_mode: str | None = None) -> Tensor:  # noqa: A002
    """input / other as torch.div: true division (rounding_mode=None), rounded toward zero ("trunc") or down
    ("floor"). The rounded forms keep an integer dtype and have gradient zero."""
    if rounding_mode is None:
        return divide(input, other)
    if rounding_mode == "floor":
        return floor_divide(input, other)
    if rounding_mode != "trunc":
        raise ValueError(f"div: rounding_mode must be None, 'trunc' or 'floor', got {rounding_mode!r}")
    a, b = promote(input, other)
    if a.dtype in _FLOATS:
        return trunc(apply("divide", [a, b]))
    if a.dtype == "bool":
        a, b = astype(a, "int64"), astype(b, "int64")
    return apply("divide", [a, b])  # the IR's integer divide truncates, as Relax's


def reciprocal(input) -> Tensor:  # noqa: A002
    """1 / input; integer input gives float32, as torch's."""
    return divide(1.0, as_tensor(input))


def square(input) -> Tensor:  # noqa: A002
    """input * input (an integer tensor stays integer and bool becomes int64, as torch's)."""
    x = as_tensor(input)
    x = astype(x, "int64") if x.dtype == "bool" else x
    return _multiply(x, x)


# ---------------------------------------------------------------- composites


class ClampArgumentError(TypeError, RuntimeError):
    """clamp without either bound: torch raises RuntimeError; a TypeError too, as before."""


def clamp(input, min=None, max=None) -> Tensor:  # noqa: A001,A002 (torch's names)
    """Values limited to [min, max]; either bound may be None, a number or a tensor (broadcast). NaN stays
    NaN and min > max gives max, as torch's. The gradient goes to input where min <= input <= max, to min
    where input < min < max, to max where input > max or max < min (torch's routing).

    >>> import tracer
    >>> tracer.tensor([-2.0, 0.5, 3.0]).clamp(0, 1).numpy().tolist()
    [0.0, 0.5, 1.0]
    """
    if min is None and max is None:
        raise ClampArgumentError("clamp: at least one of min and max must not be None")
    given = [v for v in (input, min, max) if v is not None]
    promoted = promote(*given)
    x = promoted[0]
    if x.dtype == "bool":
        raise TypeError("clamp: not defined for bool tensors, as in torch")
    rest = iter(promoted[1:])
    lo = next(rest) if min is not None else _extreme(x.dtype, low=True)
    hi = next(rest) if max is not None else _extreme(x.dtype, low=False)
    return apply("clamp", [x, lo, hi])


def _extreme(dtype: str, low: bool) -> Tensor:
    if dtype in _FLOATS:
        return Tensor(np.asarray(-np.inf if low else np.inf, dtype))
    info = np.iinfo(dtype)
    return Tensor(np.asarray(info.min if low else info.max, dtype))


def lerp(input, end, weight) -> Tensor:  # noqa: A002
    """input + weight * (end - input); `weight` a number or a tensor (broadcast), as torch.lerp."""
    start, stop, w = promote(input, end, weight)
    return start + w * (stop - start)


def logit(input, eps: float | None = None) -> Tensor:  # noqa: A002
    """log(p / (1 - p)), with p clamped to [eps, 1 - eps] when eps is given (gradient 0 outside, as torch's).

    Written log(p) - log1p(-p): its gradient 1/p + 1/(1 - p) is inf at both ends, as torch's, where
    differentiating log(p / (1 - p)) would give 0/0 at p = 1. Outside [0, 1] value and gradient are NaN, as
    torch's: p is multiplied by a constant 1 inside, NaN (0 / 0) outside."""
    p = _floating(as_tensor(input))
    if eps is not None:
        p = clamp(p, eps, 1.0 - eps)
    else:
        inside = astype(bitwise_and(greater_equal(p, 0.0), _less_equal(p, 1.0)), p.dtype)
        p = p * divide(inside, inside)
    return _log(p) - log1p(-p)


def nan_to_num(input, nan: float = 0.0, posinf: float | None = None, neginf: float | None = None) -> Tensor:  # noqa: A002
    """NaN, +inf and -inf replaced by `nan`, `posinf` and `neginf` (by default the dtype's largest and
    smallest finite values); integer tensors unchanged. The gradient is 0 at the replaced elements."""
    x = as_tensor(input)
    if x.dtype not in _FLOATS:
        return x
    info = np.finfo(x.dtype)
    posinf = float(info.max) if posinf is None else posinf
    neginf = float(info.min) if neginf is None else neginf
    y = _where(_not_equal(x, x), nan, x)
    y = _where(equal(x, np.inf), posinf, y)
    return _where(equal(x, -np.inf), neginf, y)


def isclose(input, other, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Tensor:  # noqa: A002
    """|input - other| <= atol + rtol * |other| elementwise (bool), as torch.isclose: equal values (infinities
    included) are close, NaN is close to NaN only with equal_nan. Both must have one dtype, as in torch."""
    a, b = as_tensor(input), as_tensor(other)
    if a.dtype != b.dtype:
        raise TypeError(f"isclose: input ({a.dtype}) and other ({b.dtype}) must have the same dtype, as in torch")
    if rtol < 0 or atol < 0:
        raise ValueError(f"isclose: rtol ({rtol}) and atol ({atol}) must be non-negative")
    close = equal(a, b)
    floating = a.dtype in _FLOATS
    if equal_nan and floating:
        close = bitwise_or(close, bitwise_and(_not_equal(a, a), _not_equal(b, b)))
    if rtol == 0 and atol == 0:
        return close
    a, b = _floating(a), _floating(b)
    actual = _abs(a - b)
    allowed = _abs(b * rtol) + atol
    return bitwise_or(close, bitwise_and(_less(actual, np.inf), _less_equal(actual, allowed)))


def allclose(input, other, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> bool:  # noqa: A002
    """True when every element is close (isclose); a Python bool, so inside a trace it raises TraceError."""
    return bool(isclose(input, other, rtol, atol, equal_nan).all())


def array_equal(input, other) -> bool:  # noqa: A002
    """True when both have one shape and equal elements (torch.equal, NumPy's array_equal): a Python bool.
    (tracer.equal is NumPy's elementwise ==.)"""
    a, b = as_tensor(input), as_tensor(other)
    return a.shape == b.shape and bool(equal(a, b).all())


__all__ = ["acos", "acosh", "allclose", "array_equal", "asin", "asinh", "atan", "atan2", "atanh", "ceil", "clamp",
           "copysign", "cosh", "div", "erf", "erfc", "erfinv", "exp2", "expm1", "fix", "floor", "fmax", "fmin",
           "fmod", "frac", "heaviside", "hypot", "isclose", "lerp", "log10", "log1p", "log2", "logaddexp", "logit",
           "nan_to_num", "reciprocal", "round", "sgn", "sign", "sinh", "square", "tan", "trunc", "xlogy"]


def _inplace(fn, name: str):
    def method(self, *args, **kwargs):
        return _checked_kind(self, fn(self, *args, **kwargs), name)
    method.__name__ = name
    method.__doc__ = f"In-place {fn.__name__}: self = {fn.__name__}(self, ...), keeping self's object and dtype."
    return method


_ALIASES = {"arcsin": asin, "arccos": acos, "arctan": atan, "arctan2": atan2, "arcsinh": asinh, "arccosh": acosh,
            "arctanh": atanh, "clip": clamp, "fix": trunc}
METHODS = {name: globals()[name] for name in __all__ if name not in ("allclose", "array_equal")}
METHODS |= _ALIASES | {"allclose": allclose, "equal": array_equal, "isclose": isclose}
_INPLACE = ("tan", "asin", "acos", "atan", "atan2", "sinh", "cosh", "asinh", "acosh", "atanh", "erf", "erfc", "erfinv",
            "log2", "log10", "log1p", "expm1", "exp2", "logit", "xlogy", "hypot", "lerp", "nan_to_num", "heaviside",
            "clamp", "clip", "square", "reciprocal", "copysign", "sign", "sgn", "round", "trunc", "frac", "floor",
            "ceil", "fix", "fmod", "arcsin", "arccos", "arctan", "arctan2", "arcsinh", "arccosh", "arctanh")
METHODS |= {"lgamma": lgamma, "digamma": digamma, "polygamma": lambda self, n: polygamma(n, self)}
METHODS |= {f"{name}_": _inplace(METHODS[name], f"{name}_") for name in _INPLACE + ("lgamma", "digamma")}
METHODS["polygamma_"] = _inplace(lambda self, n: polygamma(n, self), "polygamma_")
