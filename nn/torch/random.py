"""torch.random: manual_seed, seed, initial_seed and fork_rng (a context that restores tracer's generator)."""
from __future__ import annotations

import contextlib
import copy

from tracer import rng as _rng

from .tensors import Generator, initial_seed, manual_seed, seed


@contextlib.contextmanager
def fork_rng(devices=None, enabled: bool = True, **kwargs):
    """Draws inside the block do not change the draws after it."""
    saved = copy.deepcopy(_rng._generator)
    try:
        yield
    finally:
        if enabled:
            _rng._generator = saved


def get_rng_state():
    raise NotImplementedError("torch.random.get_rng_state: tracegrad's generator state is not exposed; "
                              "torch.manual_seed(seed), or torch.Generator().manual_seed(seed) passed as "
                              "generator=, makes draws repeatable")


__all__ = ["Generator", "fork_rng", "get_rng_state", "initial_seed", "manual_seed", "seed"]
