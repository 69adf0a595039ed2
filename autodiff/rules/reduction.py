"""VJP rules of the reduction family (argmax has none: it is not differentiable)."""
from __future__ import annotations

import math

import ir

from .registry import register_vjp


def _axes(call) -> tuple[int, ...]:
    """The reduced axes of x, normalized (a 0-d x has none)."""
    ndim, axis = call.args[0].type.ndim, call.attrs["axis"]
    if ndim == 0:
        return ()
    return tuple(range(ndim)) if axis is None else tuple(sorted(a % ndim for a in axis))


def _keepdims(b, call, value):
    """`value` (shaped like the reduction's output) reshaped to the keepdims shape, ready to broadcast."""
    shape = tuple(1 if i in _axes(call) else d for i, d in enumerate(call.args[0].type.shape))
    return value if value.type.shape == shape else b.call("reshape", value, shape=shape)


def _count(call) -> int:
    x = call.args[0].type
    return math.prod(x.shape[a] for a in _axes(call))


@register_vjp("sum")
def sum_vjp(b, call, out, g):
    """Forward: y = sum(x, axis)
    Backward: dx = broadcast_to(g, x.shape)"""
    return [b.call("broadcast_to", _keepdims(b, call, g), shape=call.args[0].type.shape)]


@register_vjp("mean")
def mean_vjp(b, call, out, g):
    """Forward: y = mean(x, axis)  (over n elements)
    Backward: dx = broadcast_to(g / n, x.shape)"""
    x = call.args[0]
    scaled = b.call("divide", _keepdims(b, call, g), ir.const(max(_count(call), 1), x.type.dtype))
    return [b.call("broadcast_to", scaled, shape=x.type.shape)]


@register_vjp("variance")
def variance_vjp(b, call, out, g):
    """Forward: y = mean((x - mean(x, axis))**2, axis)  (over n elements)
    Backward: dx = g * 2 * (x - mean(x, axis)) / n"""
    x = call.args[0]
    centered = b.call("subtract", x, b.call("mean", x, axis=call.attrs["axis"], keepdims=True))
    scale = ir.const(2.0 / max(_count(call), 1), x.type.dtype)
    return [b.call("multiply", b.call("multiply", _keepdims(b, call, g), centered), scale)]


def _extremum_vjp(b, call, out, g):
    # Ties share the gradient evenly, as PyTorch's max/min reductions do. A NaN result (its slice holds a
    # NaN): the slice's NaNs share g, as torch's x.max() does and as torch's x.max(dim) gives it to the NaN's
    # index. (x == y alone matches nothing there, and g / 0 * 0 would make the slice's gradient NaN: that
    # is torch.amax's answer, which tracer.torch_convert's amax / amin give.)
    x = call.args[0]
    y = _keepdims(b, call, out)
    # bool algebra: add is `or`, multiply is `and`
    both_nan = b.call("multiply", b.call("not_equal", x, x), b.call("not_equal", y, y))
    hit = b.call("astype", b.call("add", b.call("equal", x, y), both_nan), dtype=x.type.dtype)
    count = b.call("sum", hit, axis=call.attrs["axis"], keepdims=True)
    return [b.call("multiply", hit, b.call("divide", _keepdims(b, call, g), count))]


@register_vjp("max")
def max_vjp(b, call, out, g):
    """Forward: y = max(x, axis)
    Backward: dx = g * hit / count(hit), hit = (x == y) or both NaN  (ties and NaNs split evenly)"""
    return _extremum_vjp(b, call, out, g)


@register_vjp("min")
def min_vjp(b, call, out, g):
    """Forward: y = min(x, axis)
    Backward: dx = g * hit / count(hit), hit = (x == y) or both NaN  (ties and NaNs split evenly)"""
    return _extremum_vjp(b, call, out, g)


@register_vjp("prod")
def prod_vjp(b, call, out, g):
    """Forward: y = prod(x, axis)
    Backward: dx_j = g * (product of the other x_k): exclusive cumprods from both ends (exact with zeros in x)"""
    x = call.args[0]
    shape, axes = x.type.shape, _axes(call)
    kept = [i for i in range(len(shape)) if i not in axes]
    perm = kept + list(axes)
    moved = b.call("permute_dims", x, axes=perm) if perm != list(range(len(shape))) else x
    lead = tuple(shape[i] for i in kept)
    flat = b.call("reshape", moved, shape=lead + (math.prod(shape[a] for a in axes),))
    last = len(lead)
    n = flat.type.shape[last]

    def reverse(v):
        return b.call("strided_slice", v, axes=[last], begin=[n - 1 if n else 0], end=[-1 if n else 0],
                      strides=[-1 if n else 1])
    before = b.call("cumprod", flat, axis=last, exclusive=True)
    after = reverse(b.call("cumprod", reverse(flat), axis=last, exclusive=True))
    others = b.call("reshape", b.call("multiply", before, after), shape=moved.type.shape)
    if perm != list(range(len(shape))):
        inverse = [0] * len(perm)
        for i, p in enumerate(perm):
            inverse[p] = i
        others = b.call("permute_dims", others, axes=inverse)
    return [b.call("multiply", others, _keepdims(b, call, g))]
