"""VJP rules of the scan family: cumsum."""
from __future__ import annotations

from .registry import register_vjp


def _reversed(b, v, axis):
    """v reversed along axis: a strided_slice with stride -1 (end -1 means through index 0)."""
    n = v.type.shape[axis]
    return b.call("strided_slice", v, axes=[axis], begin=[n - 1 if n else 0], end=[-1 if n else 0],
                  strides=[-1 if n else 1])


@register_vjp("cumsum")
def cumsum_vjp(b, call, out, g):
    """Forward: y_i = sum of x_j for j <= i (j < i when exclusive) along axis (of the flattened x if None)
    Backward: dx_j = sum of g_i for i >= j (i > j when exclusive): the same scan of g, reversed"""
    (data,) = call.args
    axis, exclusive = call.attrs["axis"], call.attrs["exclusive"]
    along = 0 if axis is None else axis % data.type.ndim
    scanned = b.call("cumsum", _reversed(b, g, along), axis=along, exclusive=exclusive)
    dx = _reversed(b, scanned, along)
    return [dx if axis is not None else b.call("reshape", dx, shape=data.type.shape)]
