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


class Generator:
    """A seeded source of seeds for the random constructors (torch.Generator's role): pass it as
    `generator=` to draw from it instead of the global generator that `manual_seed` seeds.

    >>> import tracer
    >>> a = tracer.randn(3, generator=tracer.Generator(0))
    >>> b = tracer.randn(3, generator=tracer.Generator().manual_seed(0))
    >>> bool((a.numpy() == b.numpy()).all())
    True
    """

    def __init__(self, seed: int | None = None):
        self._rng = np.random.default_rng(seed)

    def manual_seed(self, seed: int) -> Generator:
        """Restart the draws from `seed`; returns the generator, as torch's does."""
        self._rng = np.random.default_rng(seed)
        return self

    def draw_seed(self) -> np.ndarray:
        """A fresh 0-d int64 seed."""
        return np.asarray(self._rng.integers(2**63 - 1), dtype="int64")


def fresh_seed(source=True) -> np.ndarray:
    """The seed a compiled step feeds to a random op's fresh-seed parameter on each call: drawn from the
    tensor's `_fresh_seed` marker when it is a Generator (`randn(..., generator=g)` inside a traced
    function), else from the global generator (dropout, randn without one)."""
    return source.draw_seed() if isinstance(source, Generator) else draw_seed()
