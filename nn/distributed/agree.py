"""What the processes agree on before a collective moves data: shapes, missing gradients and failures.

MPI and NCCL collectives trust every process to pass buffers of the same size in the same order. When
they do not (an uneven last batch, a model built differently, a gradient that is None on one process
only) the collective fails deep inside MPI ("Message truncated"), or, worse, pairs the wrong buffers and
returns numbers. When one process raised before the collective, the others wait in it forever. So before
the data moves, every process sends a small description of what it is about to reduce, or of the
exception it raised, in one allgather of a few hundred pickled bytes; every process then sees the same
list and takes the same decision: all go on, or all raise, with a message naming the ranks.

A gradient that is None on some processes but an array on others (a parameter that this process's batch
did not reach) counts as zeros there, as in PyTorch DDP (find_unused_parameters): the loss averaged over
the processes does not depend on it through those processes, so zero is its exact contribution, and
every process gets the same averaged array back. Only when it is None everywhere does it stay None.
Handing None back on some processes and an array on others would let their optimizers move the
parameter differently (Adam skips a None), and the processes would drift apart silently.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tracer import Tensor

from .buckets import all_reduce_arrays, broadcast_arrays, like, on_gpu

_MESSAGE_CHARS = 400  # of a failed process's exception, in the others' error


@dataclass(frozen=True)
class Failed:
    """What a process that raised sends in place of its description."""

    rank: int
    error: str  # "ValueError: the message"


def tell_failure(world, error: BaseException, what: str) -> None:
    """Called where a process raised before a collective the others are waiting in: they are told (and
    raise), and `error` gets a note saying so. Nothing to do on one process."""
    if world.size == 1:
        return
    text = f"{type(error).__name__}: {error}"
    if len(text) > _MESSAGE_CHARS:
        text = text[:_MESSAGE_CHARS] + "..."
    gathered = world.host.allgather_object(Failed(world.rank, text))
    others = [f"rank {g.rank} raised {g.error}" for g in gathered if isinstance(g, Failed) and g.rank != world.rank]
    error.add_note(f"{what}: raised on rank {world.rank} of {world.size}; the other processes were told and "
                   "raise too" + (f" (also {'; '.join(others)})" if others else ""))


def agree(world, local, what: str) -> list:
    """Every process's `local`, in rank order (one small allgather); raises RuntimeError on every
    process when some process sent Failed."""
    gathered = world.host.allgather_object(local)
    failed = [g for g in gathered if isinstance(g, Failed)]
    if failed:
        who = "; ".join(f"rank {g.rank} raised {g.error}" for g in failed)
        raise RuntimeError(f"{what}: {who}. This process (rank {world.rank} of {world.size}) stops as well, so that "
                           "no process waits forever in a collective that the failed one will not join")
    return gathered


def spec(array, value) -> tuple:
    """What the processes must agree on about one array: shape, dtype, device; and whether it is a Tensor."""
    return (tuple(array.shape), str(array.dtype), "gpu" if on_gpu(array) else "cpu", isinstance(value, Tensor))


def describe(s) -> str:
    if s is None:
        return "None"
    if s[0] == "number":
        return f"the number {s[1]!r}"
    return f"shape {s[0]} {s[1]}" + (" on the GPU" if s[2] == "gpu" else "")


def first_difference(gathered: list, what: str, hint: str) -> str | None:
    """A message naming the first entry where some process's [(name, spec)] list differs from rank 0's."""
    base = gathered[0]
    for r, theirs in enumerate(gathered[1:], 1):
        for i in range(max(len(base), len(theirs))):
            mine = base[i] if i < len(base) else None
            other = theirs[i] if i < len(theirs) else None
            if mine != other:
                if mine is None or other is None:
                    return (f"{what}: rank 0 has {len(base)} values and rank {r} has {len(theirs)}; the first one "
                            f"that only one of them has is {(mine or other)[0]} ({describe((mine or other)[1])}){hint}")
                if mine[0] != other[0]:
                    return (f"{what}: value {i} is {mine[0]} on rank 0 but {other[0]} on rank {r}: the processes "
                            f"do not hold the same values{hint}")
                return (f"{what}: {mine[0]} has {describe(mine[1])} on rank 0 but {describe(other[1])} on rank {r}"
                        f"{hint}")
    return None


def merge(gathered: list, what: str, op: str, hints) -> list:
    """Per value: the spec all processes reduce (None where it is None everywhere). Raises ValueError,
    identically on every process, when the shapes, dtypes or devices differ, or when a value is None on
    some processes and op has no neutral element to stand in for it."""
    names = [[name for name, _ in g] for g in gathered]
    if any(n != names[0] for n in names[1:]):
        raise ValueError(first_difference(gathered, what, hints(names[0][0] if names[0] else "")))
    merged = []
    for i, name in enumerate(names[0]):
        have = [(r, g[i][1]) for r, g in enumerate(gathered) if g[i][1] is not None]
        if not have:
            merged.append(None)
            continue
        r0, s0 = have[0]
        for r, s in have[1:]:
            if s[:3] != s0[:3]:
                raise ValueError(f"{what}: {name} has {describe(s0)} on rank {r0} but {describe(s)} on rank {r}"
                                 f"{hints(name)}")
        if len(have) < len(gathered) and op not in ("sum", "mean"):
            missing = [r for r, g in enumerate(gathered) if g[i][1] is None]
            raise ValueError(f"{what}: {name} is None on rank {', '.join(map(str, missing))} but has {describe(s0)} "
                             f"on rank {r0}; op={op!r} has no neutral value to stand in for None (sum and mean "
                             "count None as zeros)")
        merged.append(s0)
    return merged


def _zeros(s):
    shape, dtype, device, _ = s
    if device == "gpu":
        import cupy as xp  # another process reduces a CuPy array here: so does this one
    else:
        xp = np
    out = xp.empty(int(np.prod(shape, dtype=np.int64)), dtype).reshape(shape)
    out[...] = 0
    return out


def reduce_values(world, entries, op: str, bucket_bytes: int, what: str, hints=lambda name: ""):
    """entries: [(name, value or None, its array or None)]. Returns (the reduced values in entries' order,
    the arrays that went into the collectives). On several processes the processes first agree (see the
    module doc): None where it is None everywhere, zeros standing in for a None elsewhere."""
    layout = [(name, None if array is None else spec(array, value)) for name, value, array in entries]
    if world.size > 1:
        specs = merge(agree(world, layout, what), what, op, hints)
    else:
        specs = [s for _, s in layout]
    arrays = [_zeros(s) if array is None else array
              for (_, _, array), s in zip(entries, specs, strict=True) if s is not None]
    reduced = iter(all_reduce_arrays(world, arrays, op, bucket_bytes))
    out = []
    for (_, value, _), s in zip(entries, specs, strict=True):
        if s is None:
            out.append(None)
            continue
        r = next(reduced)
        out.append(like(value, r) if value is not None else Tensor.wrap(r) if s[3] else r)
    return out, arrays


def broadcast_values(world, named, root: int, bucket_bytes: int, what: str, hint: str = "") -> None:
    """named: [(name, array or Python number)]; the arrays are overwritten in place with root's values. On
    several processes they first check that every process holds the same names, shapes and dtypes, and the
    same numbers (which cannot be overwritten): ValueError naming the first difference, on every process,
    instead of a truncated message or a broadcast into the wrong arrays."""
    arrays = [a for _, a in named if hasattr(a, "shape")]
    if world.size > 1:
        layout = [(name, spec(a, None)[:3] if hasattr(a, "shape") else ("number", a)) for name, a in named]
        message = first_difference(agree(world, layout, what), what, hint)
        if message is not None:
            raise ValueError(message)
    broadcast_arrays(world, arrays, root, bucket_bytes)
