"""Gradient checkpointing over a sequence of modules."""
from __future__ import annotations

import tracer


def segment_sizes(n: int, segments: int) -> list[int]:
    """Sizes of the segments n modules split into: min(segments, n) runs whose sizes differ by at most one,
    the longer ones first.

    >>> segment_sizes(10, 4)
    [3, 3, 2, 2]
    """
    if segments < 1:
        raise ValueError(f"segments must be at least 1, got {segments}")
    count = min(segments, n)
    if count == 0:
        return []
    base, extra = divmod(n, count)
    return [base + 1 if i < extra else base for i in range(count)]


def checkpoint_sequential(modules, segments: int, x):
    """Run `modules` (a Sequential or a list) on x in `segments` segments; inside a trace each segment but
    the last is a `tracer.checkpoint()` region, so the backward pass recomputes its activations instead of
    keeping them (the last one's would be needed at once anyway, as in PyTorch's). Eagerly it just runs them.
    """
    modules = list(modules)
    start = 0
    sizes = segment_sizes(len(modules), segments)
    for i, size in enumerate(sizes):
        part = modules[start:start + size]
        start += size
        if i < len(sizes) - 1:
            with tracer.checkpoint():
                x = _run(part, x)
        else:
            x = _run(part, x)
    return x


def _run(modules, x):
    for m in modules:
        x = m(x)
    return x


__all__ = ["checkpoint_sequential", "segment_sizes"]
