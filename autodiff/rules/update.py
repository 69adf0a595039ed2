"""VJP rules of the update family (functional item assignment)."""
from __future__ import annotations

from .registry import register_vjp

_SLICE = ("axes", "begin", "end", "strides")


@register_vjp("slice_update")
def slice_update_vjp(b, call, out, g):
    """Forward: y = x with x[slice] replaced by value
    Backward: dx = g with g[slice] zeroed; dvalue = g[slice]"""
    attrs = {k: call.attrs[k] for k in _SLICE}
    zeros = b.call("zeros_like", call.args[1])
    return [b.call("slice_update", g, zeros, **attrs), b.call("strided_slice", g, **attrs)]


@register_vjp("index_update")
def index_update_vjp(b, call, out, g):
    """Forward: y = x with the entries take(x, indices, axis) replaced by value
    Backward: dx = g with those entries zeroed; dvalue = take(g, indices, axis)"""
    indices, axis = call.args[1], call.attrs["axis"]
    zeros = b.call("zeros_like", call.args[2])
    return [b.call("index_update", g, indices, zeros, axis=axis), None, b.call("take", g, indices, axis=axis)]
