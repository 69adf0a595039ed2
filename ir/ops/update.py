"""Functional item assignment: slice_update and index_update return a copy of x with one region replaced.

Relax has no in-place ops, so `x[key] = v` inside a trace is recorded as one of these (or both, nested),
and the Python name x then refers to the new value:

    lv = R.slice_update(x, v, axes=[0], begin=[1], end=[3], strides=[1])   # x[1:3] = v
    lv1 = R.index_update(x, idx, v, axis=1)                                  # x[:, idx] = v
"""
from __future__ import annotations

from ..types import TensorType
from .manipulate import SLICE_ATTRS, _infer_slice, _take_shape, _wrap, slice_index
from .registry import Attr, declare, tensor_arg


def _check_value(op, x: TensorType, value: TensorType, expected: tuple[int, ...], region: str) -> TensorType:
    if value.dtype != x.dtype:
        raise op.error(f"value has dtype {value.dtype} but x has dtype {x.dtype}; insert astype to convert")
    if value.shape != expected:
        raise op.error(f"value of shape {value.shape} does not match the {region} of shape {expected} "
                       f"(x of shape {x.shape})")
    return x


def _infer_slice_update(op, types, axes, begin, end, strides):
    x, value = tensor_arg(op, types, 0), tensor_arg(op, types, 1)
    region = _infer_slice(op, [x], axes, begin, end, strides).shape
    return _check_value(op, x, value, region, "slice")


def _slice_update(xp, x, value, axes, begin, end, strides):
    out = x.copy()
    out[slice_index(x.ndim, axes, begin, end, strides)] = value
    return out


declare("slice_update", ("x", "value"), SLICE_ATTRS, infer=_infer_slice_update, kernel=_slice_update,
        doc="x with x[begin:end:strides] (on axes) replaced by value, which has the slice's shape.")


def _infer_index_update(op, types, axis):
    x, indices, value = (tensor_arg(op, types, i) for i in range(3))
    return _check_value(op, x, value, _take_shape(op, x, indices, axis), "take")


def _index_update(xp, x, indices, value, axis):
    out = x.copy()
    axis %= x.ndim
    out[(slice(None),) * axis + (_wrap(xp, indices, x.shape[axis], "index_update", axis),)] = value
    return out


declare("index_update", ("x", "indices", "value"), (Attr("axis", "int", 0),), infer=_infer_index_update,
        kernel=_index_update,
        doc="x with the entries that take(x, indices, axis) reads replaced by value (the last write wins "
            "where indices repeat).")
