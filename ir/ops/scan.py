"""Scans: cumsum and cumprod, Relax's `R.cumsum(data, axis=None, dtype=None, exclusive=False)` (and cumprod's
same signature); logcumsumexp; cumargmax / cumargmin, the indices of torch's cummax / cummin (their values
are gather_elements of the data at these indices, so they carry gather's gradient).

axis=None scans the flattened data (the result is 1-d); exclusive=True leaves each element out of its
own sum (the first is 0). The result keeps the data's dtype: a `dtype` that asks for another is refused
when the text is parsed (convert with astype first).
"""
from __future__ import annotations

from ..types import TensorType
from .common import norm_axis, require_float, require_numeric
from .registry import Attr, declare, tensor_arg


def _infer_cumsum(op, types, axis, exclusive):
    data = tensor_arg(op, types, 0)
    require_numeric(op, data, "data")
    if axis is None:
        return TensorType((data.size,), data.dtype)
    norm_axis(op, axis, data.ndim)
    return data


def _scan(fn, identity):
    def kernel(xp, data, axis, exclusive):
        if axis is None:
            data, axis = data.reshape(-1), 0
        out = getattr(xp, fn)(data, axis=axis, dtype=data.dtype)  # NumPy would widen small integers
        if not exclusive:
            return out
        shifted = xp.full_like(out, identity)
        lead = (slice(None),) * (axis % data.ndim)
        shifted[lead + (slice(1, None),)] = out[lead + (slice(None, -1),)]
        return shifted
    return kernel


SCAN_ATTRS = (Attr("axis", "opt_int", None), Attr("exclusive", "bool", False))
declare("cumsum", ("data",), SCAN_ATTRS, infer=_infer_cumsum, kernel=_scan("cumsum", 0),
        fixed={"dtype": (None, "void", "")})
declare("cumprod", ("data",), SCAN_ATTRS, infer=_infer_cumsum, kernel=_scan("cumprod", 1),
        fixed={"dtype": (None, "void", "")})


def _along(xp, data, axis):
    """data with `axis` moved to the front (a view), for the scans that step along it."""
    return xp.moveaxis(data, axis, 0)


def _infer_axis_scan(kind):
    def infer(op, types, axis):
        data = tensor_arg(op, types, 0)
        if kind == "float":
            require_float(op, data, "data")
        else:
            require_numeric(op, data, "data")
        norm_axis(op, axis, data.ndim, scalar_ok=True)
        return data if kind == "float" else TensorType(data.shape, "int64")
    return infer


def _logcumsumexp(xp, data, axis):
    """log(sum of exp(x_j), j <= i), one logaddexp per position: exact for any spread of values (a shift by
    one maximum would underflow the small early terms to -inf)."""
    if data.ndim == 0:
        return data.copy()
    x = _along(xp, data, axis)
    out = xp.empty_like(data)
    y = _along(xp, out, axis)
    for i in range(x.shape[0]):
        y[i] = x[0] if i == 0 else xp.logaddexp(y[i - 1], x[i])
    return out


declare("logcumsumexp", ("data",), (Attr("axis", "int", 0),), infer=_infer_axis_scan("float"),
        kernel=_logcumsumexp)


def _cumarg(largest):
    def kernel(xp, data, axis):
        """Index of the running maximum (minimum); a tie or a NaN takes the later index, and a NaN, once seen,
        stays, as torch's cummax / cummin."""
        if data.ndim == 0:
            return xp.zeros((), "int64")
        x = _along(xp, data, axis)
        out = xp.zeros(data.shape, "int64")
        idx = _along(xp, out, axis)
        if not x.shape[0]:
            return out
        best, at = x[0], xp.zeros(x.shape[1:], "int64")
        for i in range(1, x.shape[0]):
            v = x[i]
            take = ((v >= best) if largest else (v <= best)) | (v != v)
            best, at = xp.where(take, v, best), xp.where(take, i, at)
            idx[i] = at
        return out
    return kernel


declare("cumargmax", ("data",), (Attr("axis", "int", 0),), infer=_infer_axis_scan("index"), kernel=_cumarg(True),
        differentiable=False)
declare("cumargmin", ("data",), (Attr("axis", "int", 0),), infer=_infer_axis_scan("index"),
        kernel=_cumarg(False), differentiable=False)
