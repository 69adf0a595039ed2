"""Markers: identities at run time that carry meaning for the Gradient pass."""
from __future__ import annotations

from .registry import declare, tensor_arg


def _infer_identity(op, types):
    return tensor_arg(op, types, 0)


def _identity(xp, x):
    return x


# Values flowing into a checkpoint region pass through start_checkpoint, values leaving it through
# end_checkpoint; everything computed in between is recomputed in the backward pass (Chen et al. 2016).
declare("grad.start_checkpoint", infer=_infer_identity, kernel=_identity)
declare("grad.end_checkpoint", infer=_infer_identity, kernel=_identity)
# The Gradient pass treats stop_gradient's output as a constant: no gradient flows to its input.
declare("grad.stop_gradient", infer=_infer_identity, kernel=_identity, differentiable=False)
