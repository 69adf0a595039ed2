"""VJP rules of the manipulate family (shape changes, slicing, gathering and their backward helpers)."""
from __future__ import annotations

import itertools

from ir import Tuple

from .registry import register_vjp


def _fields(b, g) -> list:
    """The fields of a tuple-valued gradient (an inline Tuple or a tuple var)."""
    if isinstance(g, Tuple):
        return list(g.fields)
    return [b.get_item(g, i) for i in range(len(g.type.fields))]


def _shape(call, i=0):
    return call.args[i].type.shape


@register_vjp("reshape")
def reshape_vjp(b, call, out, g):
    """Forward: y = reshape(x, shape)
    Backward: dx = reshape(g, x.shape)"""
    return [b.call("reshape", g, shape=_shape(call))]


@register_vjp("expand_dims")
def expand_dims_vjp(b, call, out, g):
    """Forward: y = expand_dims(x, axis)
    Backward: dx = reshape(g, x.shape)"""
    return [b.call("reshape", g, shape=_shape(call))]


@register_vjp("squeeze")
def squeeze_vjp(b, call, out, g):
    """Forward: y = squeeze(x, axis)
    Backward: dx = reshape(g, x.shape)"""
    return [b.call("reshape", g, shape=_shape(call))]


@register_vjp("permute_dims")
def permute_dims_vjp(b, call, out, g):
    """Forward: y = permute_dims(x, axes)
    Backward: dx = permute_dims(g, argsort(axes))"""
    ndim, axes = len(_shape(call)), call.attrs["axes"]
    if axes is None:  # reversing is its own inverse
        return [b.call("permute_dims", g, axes=None)]
    inverse = [0] * ndim
    for i, a in enumerate(axes):
        inverse[a % ndim] = i
    return [b.call("permute_dims", g, axes=inverse)]


@register_vjp("broadcast_to")
def broadcast_to_vjp(b, call, out, g):
    """Forward: y = broadcast_to(x, shape)
    Backward: dx = collapse_sum_to(g, x.shape)  (done by the Gradient pass)"""
    return [g]


@register_vjp("collapse_sum_to")
def collapse_sum_to_vjp(b, call, out, g):
    """Forward: y = collapse_sum_to(data, shape)
    Backward: ddata = broadcast_to(g, data.shape)"""
    return [b.call("broadcast_to", g, shape=_shape(call))]


@register_vjp("concat")
def concat_vjp(b, call, out, g):
    """Forward: y = concat((x_1, ..., x_n), axis)
    Backward: dx_i = split(g, offsets, axis)[i]"""
    sizes = [t.shape[call.attrs["axis"]] for t in call.args[0].type.fields]
    if len(sizes) == 1:
        return [[g]]
    offsets = list(itertools.accumulate(sizes[:-1]))
    return [_fields(b, b.call("split", g, indices_or_sections=offsets, axis=call.attrs["axis"]))]


@register_vjp("stack")
def stack_vjp(b, call, out, g):
    """Forward: y = stack((x_1, ..., x_n), axis)
    Backward: dx_i = reshape(split(g, n, axis)[i], x_i.shape)"""
    types = call.args[0].type.fields
    pieces = _fields(b, b.call("split", g, indices_or_sections=list(range(1, len(types))), axis=call.attrs["axis"]))
    return [[b.call("reshape", p, shape=t.shape) for p, t in zip(pieces, types, strict=True)]]


@register_vjp("split")
def split_vjp(b, call, out, g):
    """Forward: (y_1, ..., y_n) = split(x, indices, axis)
    Backward: dx = concat((g_1, ..., g_n), axis)"""
    return [b.call("concat", _fields(b, g), axis=call.attrs["axis"])]


def _slice_attrs(attrs):
    return {k: attrs[k] for k in ("axes", "begin", "end", "strides")}


@register_vjp("strided_slice")
def strided_slice_vjp(b, call, out, g):
    """Forward: y = x[begin:end:strides]  (on axes)
    Backward: dx = zeros(x.shape) with g placed at [begin:end:strides]"""
    return [b.call("grad.strided_slice_backward", g, shape=_shape(call), **_slice_attrs(call.attrs))]


@register_vjp("grad.strided_slice_backward")
def grad_strided_slice_backward_vjp(b, call, out, g):
    """Forward: y = zeros(shape) with data placed at [begin:end:strides]
    Backward: ddata = g[begin:end:strides]"""
    return [b.call("strided_slice", g, **_slice_attrs(call.attrs))]


@register_vjp("take")
def take_vjp(b, call, out, g):
    """Forward: y = take(x, indices, axis)
    Backward: dx = zeros(x.shape) with g scatter-added at indices along axis"""
    indices = call.args[1]
    return [b.call("grad.take_backward", g, indices, shape=_shape(call), axis=call.attrs["axis"],
                   mode=call.attrs["mode"]), None]


@register_vjp("grad.take_backward")
def grad_take_backward_vjp(b, call, out, g):
    """Forward: y = zeros(shape) with data scatter-added at indices along axis
    Backward: ddata = take(g, indices, axis)"""
    return [b.call("take", g, call.args[1], axis=call.attrs["axis"], mode=call.attrs["mode"]), None]


@register_vjp("tril")
def tril_vjp(b, call, out, g):
    """Forward: y = tril(x, k)
    Backward: dx = tril(g, k)"""
    return [b.call("tril", g, k=call.attrs["k"])]


@register_vjp("triu")
def triu_vjp(b, call, out, g):
    """Forward: y = triu(x, k)
    Backward: dx = triu(g, k)"""
    return [b.call("triu", g, k=call.attrs["k"])]
