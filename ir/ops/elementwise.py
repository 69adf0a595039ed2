"""Elementwise ops: arithmetic, unary math, activations, comparisons, where, astype."""
from __future__ import annotations

import contextlib
import math

import numpy as np

from ..types import TensorType
from .common import broadcast_shape, require_float, require_numeric, same_dtype
from .registry import Attr, declare, tensor_arg
from .special import erf

# ---------------------------------------------------------------- binary arithmetic


def _infer_binary(op, types):
    return TensorType(broadcast_shape(op, types), same_dtype(op, types))


def _infer_numeric_binary(op, types):
    # NumPy has no bool subtract, and bool divide / power would not stay bool
    out = _infer_binary(op, types)
    require_numeric(op, out, "x1")
    return out


def _binary(name, fn, bool_ok=True):
    declare(name, ("x1", "x2"), infer=_infer_binary if bool_ok else _infer_numeric_binary,
            kernel=lambda xp, a, b: fn(xp, a, b))


class IntegerDivisionError(ZeroDivisionError, RuntimeError):
    """Integer division by zero: torch raises RuntimeError("ZeroDivisionError"); a ZeroDivisionError too."""


def _nonzero_divisor(op, b):
    """Integer division by zero has no value: raise, the same eagerly and in a compiled step (as
    PyTorch's integer `//` and `%` do), never NumPy's silent 0."""
    if b.dtype.kind in "iu" and bool((b == 0).any()):
        raise IntegerDivisionError(f"{op}: integer division by zero (argument x2 holds 0)")


def _quiet(xp):
    """Float division by zero gives inf or nan without NumPy's RuntimeWarning, as in PyTorch."""
    return np.errstate(divide="ignore", invalid="ignore") if xp is np else contextlib.nullcontext()


def _divide(xp, a, b):
    if a.dtype.kind in "iu":
        # Integer division truncates toward zero in Relax and keeps the dtype. Integer ops, not
        # trunc(a / b): float64 is inexact beyond 2**53.
        _nonzero_divisor("divide", b)
        q = a // b
        return q + ((q < 0) & (q * b != a)).astype(q.dtype)
    return a / b


def _floor_divide(xp, a, b):
    # floor(a / b), as Python's // and PyTorch's floor_divide (Relax's floor_divide)
    _nonzero_divisor("floor_divide", b)
    with _quiet(xp):
        return xp.floor_divide(a, b)


def _floor_mod(xp, a, b):
    # a - floor(a / b) * b: the sign of the divisor, as Python's % and PyTorch's remainder
    _nonzero_divisor("floor_mod", b)
    with _quiet(xp):
        return xp.remainder(a, b)


class IntegerPowerError(ValueError, RuntimeError):
    """An integer tensor to a negative Python integer power: torch raises RuntimeError ("Integers to negative
    integer powers are not allowed."); a ValueError too, as NumPy raises."""


def _power(xp, a, b):
    """a ** b; for integers, torch's rule where b < 0 (NumPy raises): 1 ** b is 1, (-1) ** b is 1 or -1 by b's
    parity, any other base (0 too) gives 0: 1 / a ** -b truncated."""
    if b.dtype.kind != "i" or not bool((b < 0).any()):
        return xp.power(a, b)
    negative = b < 0
    out = xp.power(a, xp.where(negative, 0, b))
    small = xp.where(a == -1, 1 - 2 * (b & 1), a == 1).astype(out.dtype)  # b & 1: b's parity, also for b < 0
    return xp.where(negative, small, out)


_binary("add", lambda xp, a, b: a + b)
_binary("subtract", lambda xp, a, b: a - b, bool_ok=False)
_binary("multiply", lambda xp, a, b: a * b)
_binary("divide", _divide, bool_ok=False)
_binary("power", _power, bool_ok=False)
_binary("floor_divide", _floor_divide, bool_ok=False)
_binary("floor_mod", _floor_mod, bool_ok=False)
_binary("maximum", lambda xp, a, b: xp.maximum(a, b))
_binary("minimum", lambda xp, a, b: xp.minimum(a, b))

# ---------------------------------------------------------------- unary


def _infer_same(op, types):
    return tensor_arg(op, types, 0)


def _infer_numeric_unary(op, types):
    t = tensor_arg(op, types, 0)
    require_numeric(op, t)
    return t


def _infer_float_unary(op, types):
    t = tensor_arg(op, types, 0)
    require_float(op, t)
    return t


def _unary(name, fn, float_only=True):
    declare(name, ("x",), infer=_infer_float_unary if float_only else _infer_same,
            kernel=lambda xp, x: fn(xp, x))


def _sigmoid(xp, x):
    # exp(-|x|) never overflows, and each tail keeps full relative accuracy: 1 / (1 + e) for x >= 0,
    # e / (1 + e) for x < 0 (0.5 * (1 + tanh(x / 2)) rounds sigmoid(-20) to 0 in float32).
    e = xp.exp(-xp.abs(x))
    return (xp.where(x >= 0, 1, e) / (1 + e)).astype(x.dtype, copy=False)  # one divide: 1.7x tanh's time


def _log_sigmoid(xp, x):
    # log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|)): finite for every finite x and exact in both
    # tails (log of a sigmoid that underflowed would be -inf; log(1 + e) would round to 0 for x > 17).
    return (xp.minimum(x, 0) - xp.log1p(xp.exp(-xp.abs(x)))).astype(x.dtype, copy=False)


def _gelu(xp, x, approximate):
    if approximate == "tanh":
        inner = math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)
        return (0.5 * x * (1.0 + xp.tanh(inner))).astype(x.dtype, copy=False)
    return (0.5 * x * (1.0 + erf(xp, x * (1.0 / math.sqrt(2.0))))).astype(x.dtype, copy=False)


def _infer_gelu(op, types, approximate):
    if approximate not in ("none", "tanh"):
        raise op.error(f'approximate must be "none" or "tanh", got {approximate!r}')
    return _infer_float_unary(op, types)


declare("negative", ("x",), infer=_infer_numeric_unary, kernel=lambda xp, x: -x)
_unary("abs", lambda xp, x: xp.abs(x), float_only=False)
_unary("exp", lambda xp, x: xp.exp(x))
_unary("log", lambda xp, x: xp.log(x))
_unary("sqrt", lambda xp, x: xp.sqrt(x))
_unary("rsqrt", lambda xp, x: (1.0 / xp.sqrt(x)).astype(x.dtype, copy=False))
_unary("sin", lambda xp, x: xp.sin(x))
_unary("cos", lambda xp, x: xp.cos(x))
_unary("tanh", lambda xp, x: xp.tanh(x))
_unary("sigmoid", _sigmoid)
_unary("nn.relu", lambda xp, x: xp.maximum(x, x.dtype.type(0)), float_only=False)
_unary("nn.silu", lambda xp, x: x * _sigmoid(xp, x))
_unary("nn.log_sigmoid", _log_sigmoid)
declare("nn.gelu", ("x",), (Attr("approximate", "str", "none"),), infer=_infer_gelu, kernel=_gelu)

# ---------------------------------------------------------------- comparisons, where, astype


def _infer_compare(op, types):
    same_dtype(op, types)
    return TensorType(broadcast_shape(op, types), "bool")


for _name, _fn in [("less", "less"), ("less_equal", "less_equal"), ("greater", "greater"),
                   ("greater_equal", "greater_equal"), ("equal", "equal"), ("not_equal", "not_equal")]:
    declare(_name, ("x1", "x2"), infer=_infer_compare, differentiable=False,
            kernel=lambda xp, a, b, _fn=_fn: getattr(xp, _fn)(a, b))


def _infer_where(op, types):
    cond = tensor_arg(op, types, 0)
    if cond.dtype != "bool":
        raise op.error(f"argument condition must be bool, got {cond.dtype}")
    if types[1].dtype != types[2].dtype:
        raise op.error(f"arguments x1 ({types[1].dtype}) and x2 ({types[2].dtype}) must share one dtype")
    dtype = types[1].dtype
    return TensorType(broadcast_shape(op, types), dtype)


_SAME_WIDTH_INT = {"float16": "int16", "float32": "int32", "float64": "int64", "int32": "int32", "int64": "int64"}


def _where(xp, c, a, b):
    # np.where branches per element: on a random mask (ReLU's backward) it is about 6x slower than a
    # branchless select of the bits through an integer view of the same width, which gives exactly
    # the same values (inf, nan and -0.0 included).
    view = _SAME_WIDTH_INT.get(a.dtype.name)
    if view is None or max(c.size, a.size, b.size) < 4096:  # small: one call of where beats five
        return xp.where(c, a, b)
    mask = -(c.astype(view))  # all bits set where c holds
    return ((a.view(view) & mask) | (b.view(view) & ~mask)).view(a.dtype)


declare("where", ("condition", "x1", "x2"), infer=_infer_where, kernel=_where)


def _infer_astype(op, types, dtype):
    return TensorType(tensor_arg(op, types, 0).shape, dtype)


declare("astype", ("x",), (Attr("dtype", "dtype"),), infer=_infer_astype,
        kernel=lambda xp, x, dtype: x.astype(dtype))
