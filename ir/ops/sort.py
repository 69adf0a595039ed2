"""Sorting: Relax's `argsort(data, axis=-1, descending=False, dtype)`, stable (equal values keep their order,
descending too, as torch.sort(stable=True)), NaN after every number ascending and before them descending,
as torch. sort, topk, kthvalue, median, mode and quantile are built on it in tracer/sort_ops.py: their
values are gather_elements of the data at these indices, so every value they return has gather's gradient.
"""
from __future__ import annotations

from ..types import TensorType
from .common import norm_axis
from .registry import Attr, declare, tensor_arg


def _infer_argsort(op, types, axis, descending, dtype):
    data = tensor_arg(op, types, 0)
    if data.dtype == "bool":
        raise op.error("argument data must be numeric, got dtype bool; insert astype to convert")
    if dtype not in ("int32", "int64"):
        raise op.error(f"dtype must be int32 or int64, got {dtype}")
    norm_axis(op, axis, data.ndim, scalar_ok=True)
    return TensorType(data.shape, dtype)


def _argsort(xp, data, axis, descending, dtype):
    if data.ndim == 0:
        return xp.zeros((), dtype)
    axis %= data.ndim
    if not descending:
        return xp.argsort(data, axis=axis, kind="stable").astype(dtype, copy=False)
    # stable descending: sort the reversed data ascending (equal values then come in reverse order), reverse
    # that order and map the positions back; NaN, last ascending, comes first
    n = data.shape[axis]
    order = xp.flip(xp.argsort(xp.flip(data, axis), axis=axis, kind="stable"), axis)
    return (n - 1 - order).astype(dtype, copy=False)


declare("argsort", ("data",), (Attr("axis", "int", -1), Attr("descending", "bool", False),
                               Attr("dtype", "dtype", "int64")),
        infer=_infer_argsort, kernel=_argsort, differentiable=False)
