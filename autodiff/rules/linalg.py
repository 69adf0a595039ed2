"""VJP rules of the linalg family."""
from __future__ import annotations

from .registry import register_vjp


def _swap_last(b, x):
    axes = list(range(x.type.ndim))
    axes[-2:] = axes[-1], axes[-2]
    return b.call("permute_dims", x, axes=axes)


@register_vjp("matmul")
def matmul_vjp(b, call, out, g):
    """Forward: y = x1 @ x2
    Backward: dx1 = g @ x2^T, dx2 = x1^T @ g  (1-D operands as a row / a column)"""
    x1, x2 = call.args
    k = x1.type.shape[-1]
    # Lift 1-D operands to matrices and g to the matching (..., n, m) shape, then drop the dim again.
    a = x1 if x1.type.ndim > 1 else b.call("reshape", x1, shape=(1, k))
    c = x2 if x2.type.ndim > 1 else b.call("reshape", x2, shape=(k, 1))
    g_shape = out.type.shape[:max(a.type.ndim, c.type.ndim) - 2] + (a.type.shape[-2], c.type.shape[-1])
    g = g if g.type.shape == g_shape else b.call("reshape", g, shape=g_shape)
    da = b.call("matmul", g, _swap_last(b, c))
    dc = b.call("matmul", _swap_last(b, a), g)
    # The batch dims may be broadcast ones; the Gradient pass sums them back to each input's shape.
    if x1.type.ndim == 1:
        da = b.call("reshape", da, shape=da.type.shape[:-2] + (k,))
    if x2.type.ndim == 1:
        dc = b.call("reshape", dc, shape=dc.type.shape[:-2] + (k,))
    return [da, dc]
