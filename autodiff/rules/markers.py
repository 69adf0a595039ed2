"""VJP rules of the markers: checkpoint markers pass the gradient through unchanged.
(`grad.stop_gradient` is declared non-differentiable: nothing flows back through it.)"""
from __future__ import annotations

from .registry import register_vjp


@register_vjp("grad.start_checkpoint")
def grad_start_checkpoint_vjp(b, call, out, g):
    """Forward: y = x  (marks the input of a checkpoint region)
    Backward: dx = g"""
    return [g]


@register_vjp("grad.end_checkpoint")
def grad_end_checkpoint_vjp(b, call, out, g):
    """Forward: y = x  (marks the output of a checkpoint region)
    Backward: dx = g"""
    return [g]
