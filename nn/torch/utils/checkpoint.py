"""torch.utils.checkpoint: `checkpoint(fn, *args)` runs fn inside a tracegrad checkpoint region (recomputed in
the backward of a traced step instead of kept; eagerly, fn simply runs), `checkpoint_sequential` is
nn.checkpoint_sequential."""
from __future__ import annotations

import tracer

from ...checkpoint import checkpoint_sequential as _sequential


def checkpoint(function, *args, use_reentrant=None, context_fn=None, determinism_check=None, debug=None,
               preserve_rng_state: bool = True, **kwargs):
    """function(*args, **kwargs) as a checkpoint region."""
    return tracer.checkpoint(function)(*args, **kwargs)


def checkpoint_sequential(functions, segments: int, input, use_reentrant=None, **kwargs):  # noqa: A002
    """nn.checkpoint_sequential(functions, segments, input)."""
    return _sequential(functions, segments, input)


__all__ = ["checkpoint", "checkpoint_sequential"]
