"""VJP rules of the linalg family."""
from __future__ import annotations

import ir
from ir import Tuple
from ir.ops.linalg import parse_subscripts

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


@register_vjp("einsum")
def einsum_vjp(b, call, out, g):
    """Forward: y = einsum(subscripts, x_1, ..., x_n)
    Backward: dx_i = einsum(g and the other operands -> x_i's letters), broadcast along letters only x_i has"""
    operands = list(call.args[0].fields) if isinstance(call.args[0], Tuple) else \
        [b.get_item(call.args[0], i) for i in range(len(call.args[0].type.fields))]
    ins, out_sub = parse_subscripts(ir.get_op("einsum"), call.attrs["subscripts"])
    grads = []
    for i, (x, sub) in enumerate(zip(operands, ins, strict=True)):
        others = [(g, out_sub)] + [(operands[j], ins[j]) for j in range(len(ins)) if j != i]
        seen = set("".join(s for _, s in others))
        keep = "".join(c for c in sub if c in seen)
        eq = ",".join(s for _, s in others) + "->" + keep
        dx = b.call("einsum", [v for v, _ in others], subscripts=eq)
        if keep != sub:  # letters only x_i has were summed away: each of their entries gets the same gradient
            dx = b.call("reshape", dx, shape=tuple(d if c in seen else 1 for c, d in zip(sub, x.type.shape,
                                                                                         strict=True)))
            dx = b.call("broadcast_to", dx, shape=x.type.shape)
        grads.append(dx)
    return [grads]
