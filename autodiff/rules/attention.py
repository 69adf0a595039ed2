"""VJP rule of the attention family: nn.scaled_dot_product_attention.

The weights P are recomputed from query and key (the forward keeps only the output), from primitives,
so the rule is differentiable again.
"""
from __future__ import annotations

from ir import const
from ir.ops.attention import masked_low

from .registry import register_vjp


def _swap_last(b, x):
    axes = list(range(x.type.ndim))
    axes[-2:] = axes[-1], axes[-2]
    return b.call("permute_dims", x, axes=axes)


@register_vjp("nn.scaled_dot_product_attention")
def nn_scaled_dot_product_attention_vjp(b, call, out, g):
    """Forward: y = P @ v, P = softmax(mask(q @ k^T * scale)) over the last axis
    Backward: dv = P^T @ g, dS = P * (dP - sum(dP * P)), dP = g @ v^T, dq = dS @ k * scale, dk = dS^T @ q * scale"""
    # dmask = dS for a float mask (none for a bool one); dS is zero where a bool or causal mask replaced the score
    q, k, v, mask = call.args
    scale, dtype = call.attrs["scale"], q.type.dtype
    s = b.call("multiply", b.call("matmul", q, _swap_last(b, k)), const(scale, dtype))
    low, zero = const(masked_low(dtype), dtype), const(0.0, dtype)
    allowed = []  # masked scores are constants: no gradient reaches q and k through them
    if call.attrs["is_causal"]:
        allowed.append(b.call("tril", b.call("ones", shape=s.type.shape[-2:], dtype="bool"), k=0))
    if mask.type.dtype == "bool":
        allowed.append(mask)
    for m in allowed:
        s = b.call("where", m, s, low)
    if mask.type.dtype != "bool":
        s = b.call("add", s, mask)
    p = b.call("nn.softmax", s, axis=-1)
    dv = b.call("matmul", _swap_last(b, p), g)
    dp = b.call("matmul", g, _swap_last(b, v))
    ds = b.call("multiply", p, b.call("subtract", dp, b.call("sum", b.call("multiply", dp, p), axis=[-1],
                                                              keepdims=True)))
    for m in allowed:
        ds = b.call("where", m, ds, zero)
    dq = b.call("multiply", b.call("matmul", ds, k), const(scale, dtype))
    dk = b.call("multiply", b.call("matmul", _swap_last(b, ds), q), const(scale, dtype))
    # a float mask broadcast against the scores: the Gradient pass sums dS back to its shape
    return [dq, dk, dv, None if mask.type.dtype == "bool" else ds]
