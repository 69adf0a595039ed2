"""searchsorted: where each value would go in a sorted sequence (torch.searchsorted / bucketize).

The output has the values' shape, whatever they are, so unlike nonzero or unique it traces; it has no
gradient (integer positions), as in torch.
"""
from __future__ import annotations

from ..types import TensorType
from .registry import Attr, declare, tensor_arg


def _infer_searchsorted(op, types, right, dtype):
    seq, values = tensor_arg(op, types, 0), tensor_arg(op, types, 1)
    if dtype not in ("int32", "int64"):
        raise op.error(f"dtype must be int32 or int64, got {dtype}")
    if seq.ndim == 0:
        raise op.error("argument sorted_sequence must have at least one dimension, got a 0-d tensor")
    if seq.dtype != values.dtype:
        raise op.error(f"arguments sorted_sequence ({seq.dtype}) and values ({values.dtype}) must share one dtype")
    if seq.dtype == "bool":
        raise op.error("argument sorted_sequence must be numeric, got dtype bool")
    if seq.ndim > 1 and (values.ndim != seq.ndim or values.shape[:-1] != seq.shape[:-1]):
        raise op.error(f"the leading dimensions of sorted_sequence {seq.shape} and values {values.shape} must "
                       "match (or sorted_sequence must be 1-D)")
    return TensorType(values.shape, dtype)


def _searchsorted(xp, seq, values, right, dtype):
    side = "right" if right else "left"
    if seq.ndim == 1:
        return xp.asarray(xp.searchsorted(seq, values, side=side)).astype(dtype, copy=False)
    rows, vals = seq.reshape(-1, seq.shape[-1]), values.reshape(-1, values.shape[-1])
    out = xp.empty(vals.shape, dtype)
    for i in range(rows.shape[0]):  # each leading index searches its own row
        out[i] = xp.searchsorted(rows[i], vals[i], side=side)
    return out.reshape(values.shape)


declare("searchsorted", ("sorted_sequence", "values"), (Attr("right", "bool", False), Attr("dtype", "dtype", "int64")),
        infer=_infer_searchsorted, kernel=_searchsorted, differentiable=False)
