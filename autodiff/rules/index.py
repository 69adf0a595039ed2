"""VJP rules of the index family: gather_elements and scatter_elements."""
from __future__ import annotations

import ir

from .registry import register_vjp


def _gather(b, g, indices, axis):
    return b.call("gather_elements", g, indices, axis=axis)


def _scatter(b, data, indices, updates, axis, reduction):
    return b.call("scatter_elements", data, indices, updates, axis=axis, reduction=reduction)


def _as(b, cond, dtype):
    return b.call("astype", cond, dtype=dtype)


@register_vjp("gather_elements")
def gather_elements_vjp(b, call, out, g):
    """Forward: y = data[..., indices[..., j, ...], ...] along axis
    Backward: ddata = zeros(data.shape) with g scatter-added at indices along axis"""
    data, indices = call.args
    zeros = b.call("zeros_like", data)
    return [_scatter(b, zeros, indices, g, call.attrs["axis"], "add"), None]


def _others(b, x, count, masked_prod):
    """The product of the other entries of each slot: masked_prod / x (x != 0) when none of the others is 0,
    else 0 (count is the slot's number of zeros, x's own included)."""
    dtype = x.type.dtype
    zero = b.call("equal", x, ir.const(0, dtype))
    safe = b.call("where", zero, ir.const(1, dtype), x)
    others_zero = b.call("subtract", count, _as(b, zero, dtype))
    return b.call("where", b.call("equal", others_zero, ir.const(0, dtype)), b.call("divide", masked_prod, safe),
                  ir.const(0, dtype))


@register_vjp("scatter_elements")
def scatter_elements_vjp(b, call, out, g):
    """Forward: y = data with updates combined (update, add, mul, min, max) at indices along axis
    Backward: g (zeroed there for update) and gather(g), times the others' product (mul) or an even tie share"""
    data, indices, updates = call.args
    axis, reduction = call.attrs["axis"], call.attrs["reduction"]
    dtype = data.type.dtype
    if reduction == "update":
        return [_scatter(b, g, indices, b.call("zeros_like", updates), axis, "update"), None,
                _gather(b, g, indices, axis)]
    if reduction == "add":
        return [g, None, _gather(b, g, indices, axis)]
    if reduction == "mul":
        zero = ir.const(0, dtype)
        zeros_d = _as(b, b.call("equal", data, zero), dtype)
        zeros_u = _as(b, b.call("equal", updates, zero), dtype)
        count = _scatter(b, zeros_d, indices, zeros_u, axis, "add")
        one = ir.const(1, dtype)
        masked = _scatter(b, b.call("where", b.call("equal", data, zero), one, data), indices,
                          b.call("where", b.call("equal", updates, zero), one, updates), axis, "mul")
        d_data = b.call("multiply", g, _others(b, data, count, masked))
        d_upd = b.call("multiply", _gather(b, g, indices, axis),
                       _others(b, updates, _gather(b, count, indices, axis), _gather(b, masked, indices, axis)))
        return [d_data, None, d_upd]
    # min / max: the entries equal to the result share its gradient evenly (torch's amax / amin)
    hit_d = _as(b, b.call("equal", data, out), dtype)
    hit_u = _as(b, b.call("equal", updates, _gather(b, out, indices, axis)), dtype)
    share = b.call("divide", g, _scatter(b, hit_d, indices, hit_u, axis, "add"))
    return [b.call("multiply", hit_d, share), None, b.call("multiply", hit_u, _gather(b, share, indices, axis))]
