"""Scans: cumsum, Relax's `R.cumsum(data, axis=None, dtype=None, exclusive=False)`.

axis=None scans the flattened data (the result is 1-d); exclusive=True leaves each element out of its
own sum (the first is 0). The result keeps the data's dtype: a `dtype` that asks for another is refused
when the text is parsed (convert with astype first).
"""
from __future__ import annotations

from ..types import TensorType
from .common import norm_axis, require_numeric
from .registry import Attr, declare, tensor_arg


def _infer_cumsum(op, types, axis, exclusive):
    data = tensor_arg(op, types, 0)
    require_numeric(op, data, "data")
    if axis is None:
        return TensorType((data.size,), data.dtype)
    norm_axis(op, axis, data.ndim)
    return data


def _cumsum(xp, data, axis, exclusive):
    if axis is None:
        data, axis = data.reshape(-1), 0
    out = xp.cumsum(data, axis=axis, dtype=data.dtype)  # NumPy would widen small integers
    if not exclusive:
        return out
    shifted = xp.zeros_like(out)
    lead = (slice(None),) * (axis % data.ndim)
    shifted[lead + (slice(1, None),)] = out[lead + (slice(None, -1),)]
    return shifted


declare("cumsum", ("data",), (Attr("axis", "opt_int", None), Attr("exclusive", "bool", False)),
        infer=_infer_cumsum, kernel=_cumsum, fixed={"dtype": (None, "void", "")})
