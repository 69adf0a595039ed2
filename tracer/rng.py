"""The generator that draws dropout seeds when none is given; `manual_seed` makes runs repeatable."""
from __future__ import annotations

import numpy as np

_generator = np.random.default_rng()


def manual_seed(seed: int) -> None:
    """Seed the draws of fresh dropout masks (eager calls and every replay of a compiled step)."""
    global _generator
    _generator = np.random.default_rng(seed)


def draw_seed() -> np.ndarray:
    """A fresh 0-d int64 seed for a counter-based random op."""
    return np.asarray(_generator.integers(2**63 - 1), dtype="int64")
