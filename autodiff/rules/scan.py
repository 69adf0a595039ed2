"""VJP rules of the scan family: cumsum, cumprod, logcumsumexp (cumargmax / cumargmin are not differentiable)."""
from __future__ import annotations

import numpy as np

import ir

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


def _cumprod_inclusive_vjp(b, x, g, axis):
    """dx_j = sum over i >= j of g_i * (product of x_k, k <= i, k != j), exact where x holds zeros, from
    differentiable ops only (so cumprod differentiates to any order). With z the first zero along the axis:
    before z every x_j != 0 and dx_j = revcumsum(g * y)_j / x_j over i < z; at z the product skips x_z, i.e. it is
    cumprod of x with x_z set to 1; after z every product holds x_z = 0."""
    dtype = x.type.dtype
    zero, one = ir.const(0, dtype), ir.const(1, dtype)
    is_zero = b.call("astype", b.call("equal", x, zero), dtype="int64")
    seen = b.call("cumsum", is_zero, axis=axis)  # zeros up to and including each position
    before = b.call("equal", seen, ir.const(0, "int64"))
    first = b.call("multiply", b.call("equal", seen, ir.const(1, "int64")), b.call("equal", is_zero,
                                                                                  ir.const(1, "int64")))
    y = b.call("cumprod", x, axis=axis)
    head = _revcumsum(b, b.call("where", before, b.call("multiply", g, y), zero), axis)
    dx = b.call("where", before, b.call("divide", head, b.call("where", before, x, one)), zero)
    skipped = b.call("cumprod", b.call("where", first, one, x), axis=axis)
    at_zero = _revcumsum(b, b.call("multiply", g, skipped), axis)
    return b.call("add", dx, b.call("where", first, at_zero, zero))


def _revcumsum(b, v, axis):
    return _reversed(b, b.call("cumsum", _reversed(b, v, axis), axis=axis), axis)


@register_vjp("cumprod")
def cumprod_vjp(b, call, out, g):
    """Forward: y_i = product of x_j for j <= i (j < i when exclusive) along axis (of the flattened x if None)
    Backward: dx_j = sum over i >= j of g_i * (product of x_k, k <= i, k != j), split at the first zero (exact)"""
    (data,) = call.args
    axis, exclusive = call.attrs["axis"], call.attrs["exclusive"]
    x = data if axis is not None else b.call("reshape", data, shape=(data.type.size,))
    along = 0 if axis is None else axis % data.type.ndim
    if exclusive:  # y_i = (inclusive product)_(i-1): the gradient of the inclusive scan at g shifted back one
        n = x.type.shape[along]
        inner = b.call("strided_slice", g, axes=[along], begin=[min(1, n)], end=[n], strides=[1])
        g = b.call("grad.strided_slice_backward", inner, shape=g.type.shape, axes=[along], begin=[0],
                   end=[max(n - 1, 0)], strides=[1])
    dx = _cumprod_inclusive_vjp(b, x, g, along)
    return [dx if axis is not None else b.call("reshape", dx, shape=data.type.shape)]


@register_vjp("logcumsumexp")
def logcumsumexp_vjp(b, call, out, g):
    """Forward: y_i = log(sum of exp(x_j), j <= i) along axis
    Backward: dx_j = sum over i >= j of g_i exp(x_j - y_i), as exp(x + reversed logcumsumexp(log(+-g) - y))"""
    (data,) = call.args
    if data.type.ndim == 0:
        return [g]
    axis = call.attrs["axis"] % data.type.ndim
    dtype = data.type.dtype
    zero = ir.const(0, dtype)

    # entries with gs <= 0 take a huge negative log instead of log(0) = -inf: they add exp(-huge) = 0 just the
    # same, and no inf enters, so the rule differentiates again (a where passes an exact 0 to the branch it
    # did not take)
    huge = ir.const(-float(np.finfo(dtype).max) / 4, dtype)

    def part(gs):  # sum over i >= j of gs_i exp(x_j - y_i) for gs > 0, in log space
        pos = b.call("greater", gs, zero)
        logs = b.call("where", pos, b.call("log", b.call("where", pos, gs, ir.const(1, dtype))), huge)
        scanned = _reversed(b, b.call("logcumsumexp", _reversed(b, b.call("subtract", logs, out), axis), axis=axis),
                            axis)
        return b.call("exp", b.call("add", data, scanned))
    return [b.call("subtract", part(g), part(b.call("negative", g)))]
