"""VJP rules of the gamma function family (ir/ops/gamma_fns.py): each derivative is the next function of the
family, so every order differentiates (lgamma -> digamma -> polygamma(1) -> polygamma(2) ...)."""
from __future__ import annotations

from .registry import register_vjp


@register_vjp("lgamma")
def lgamma_vjp(b, call, out, g):
    """Forward: y = lgamma(x)
    Backward: dx = g * digamma(x)"""
    return [b.call("multiply", g, b.call("digamma", call.args[0]))]


@register_vjp("digamma")
def digamma_vjp(b, call, out, g):
    """Forward: y = digamma(x)
    Backward: dx = g * polygamma(1, x)"""
    return [b.call("multiply", g, b.call("polygamma", call.args[0], n=1))]


@register_vjp("polygamma")
def polygamma_vjp(b, call, out, g):
    """Forward: y = polygamma(n, x)
    Backward: dx = g * polygamma(n + 1, x)"""
    return [b.call("multiply", g, b.call("polygamma", call.args[0], n=call.attrs["n"] + 1))]
