"""Static storage for a compiled function's large intermediate arrays.

Every op of a step allocates its result, and large blocks freed by NumPy go back to the kernel (glibc
returns them above its mmap and trim thresholds), so each step faults the same pages in again: a GPT
step here took 7 000-15 000 minor page faults, a fifth to a third of its time (benchmarks/faults.py). The
shapes and lifetimes are known before the first call, so the executor plans storage once, as Relax's
StaticPlanBlockMemory and TVM's graph executor do: each large intermediate that an out=-capable kernel
produces gets one of a few arrays kept by the generated function between calls, reused by any later
value of the same shape and dtype once the first one has died. Kernels that need large temporaries of
their own (ir.runtime.specialize: GELU, LayerNorm, log-softmax, a matmul's contiguous operand) get
planned scratch arrays too, live for that one instruction.

A buffer's lifetime is that of every value that may share it: the views taken of it (reshape,
permute_dims, slices), tuples holding it, and values written into it in place (ir.runtime.reuse) are one
group, freed when the last of them dies. A group is planned only when none of its values is returned or
a constant, so returned arrays are never planned storage. `plan(compiled)` returns the plan; the
executor's generated function passes `out=` (and `scratch=`) to those kernels (ir.runtime.codegen). The
arrays planned are `compiled.storage_bytes`, held between calls: one set per call running at once
(threads take a set from a pool, ir.runtime.codegen), so calls in turn reuse a single set.
"""
from __future__ import annotations

import functools
import math
from collections import defaultdict
from typing import NamedTuple

import numpy as np

from ..types import TensorType
from .instructions import SPEC
from .reuse import FRESH

MIN_BYTES = 64 * 1024  # below this, malloc serves blocks from its heap without faults


def takes_out(fn) -> bool:
    """True for the specialized kernels that accept out=: ufuncs, a ufunc method (reduce) with fixed axes, and
    the kernels ir.runtime.specialize marks (`fn.takes_out`)."""
    if isinstance(fn, np.ufunc):
        return True
    if (isinstance(fn, functools.partial) and getattr(fn.func, "__name__", "") == "reduce"
            and isinstance(getattr(fn.func, "__self__", None), np.ufunc)):
        return True
    return getattr(fn, "takes_out", False) is True


def _fresh_kernel(fn) -> bool:
    """The kernel's result is always a new array or its `out`, never a view of an operand: an out=-capable kernel
    not marked otherwise, or one (or the function of a partial) marked `fresh = True` (a reduction's reshaped
    result, ir.runtime.specialize's _sum_reshape)."""
    if getattr(fn, "fresh", None) is True or getattr(getattr(fn, "func", None), "fresh", None) is True:
        return True
    return takes_out(fn) and getattr(fn, "fresh", True) is True


class Plan(NamedTuple):
    """The storage of one compiled function: `results` {instruction: storage id of its out=}, `scratch`
    {instruction: storage ids of its scratch=}, `specs` [(shape, dtype) per storage id], `offsets` [the byte
    offset of each storage id in one arena], `size` (the arena's bytes)."""

    results: dict[int, int]
    scratch: dict[int, tuple[int, ...]]
    specs: list[tuple[tuple[int, ...], str]]
    offsets: list[int]
    size: int


EMPTY = Plan({}, {}, [], [], 0)
ALIGN = 64  # bytes: each array starts on a cache line


def allocate(xp, plan: Plan) -> tuple:
    """One set of the plan's arrays: views of one arena, overlapping only where their values never live at once."""
    arena = xp.empty(plan.size, xp.uint8)
    return tuple(arena[o:o + _nbytes(shape, dtype)].view(dtype).reshape(shape)
                 for (shape, dtype), o in zip(plan.specs, plan.offsets, strict=True))


def _offsets(spans: list[tuple[int, float, int]]) -> tuple[list[int], int]:
    """Byte offsets for (first instruction, last instruction, bytes) spans, largest first, each at the lowest
    offset clear of every placed span that lives at the same time (greedy by size, as TVM's planner)."""
    placed: list[tuple[int, float, int, int]] = []  # (start, end, offset, bytes)
    offsets = [0] * len(spans)
    for k in sorted(range(len(spans)), key=lambda k: -spans[k][2]):
        start, end, n = spans[k]
        busy = sorted((o, o + m) for s, e, o, m in placed if s <= end and start <= e)
        at = 0
        for lo, hi in busy:
            if at + n <= lo:
                break
            at = max(at, -(-hi // ALIGN) * ALIGN)
        offsets[k] = at
        placed.append((start, end, at, n))
    return offsets, max((o + m for _, _, o, m in placed), default=0)


def _nbytes(shape, dtype) -> int:
    return math.prod(shape) * np.dtype(dtype).itemsize


def _groups(compiled) -> dict[int, int]:
    """slot -> its group's representative: the values that may share one buffer (union-find)."""
    parent: dict[int, int] = {}

    def find(s):
        while parent.get(s, s) != s:
            parent[s] = parent.get(parent[s], parent[s])
            s = parent[s]
        return s

    reuse = compiled.reuse
    for i, (kind, fn, args, _attrs, out) in enumerate(compiled.instrs):
        into = reuse[i] if reuse else None
        if into is not None:
            parent[find(out)] = find(into[1])
        elif compiled.instr_ops[i] not in FRESH and not (kind == SPEC and _fresh_kernel(fn)):
            for a in args:  # a view, a tuple, an item, an alias, or a kernel that may hand an operand back
                parent[find(a)] = find(out)
    return {s: find(s) for s in range(compiled.n_slots)}


def plan(compiled, min_bytes: int | None = None) -> Plan:
    """The storage Plan of `compiled`, a CompiledFunction whose instructions carry their op names
    (`instr_ops`); values and scratch arrays under `min_bytes` (MIN_BYTES) allocate."""
    min_bytes = MIN_BYTES if min_bytes is None else min_bytes
    instrs, frees, reuse = compiled.instrs, compiled.frees, compiled.reuse
    last: dict[int, int] = {}  # slot -> the instruction after which it is freed
    for i, fs in enumerate(frees):
        for s in fs:
            last[s] = i
    group = _groups(compiled)
    members: dict[int, list[int]] = defaultdict(list)
    for s, g in group.items():
        members[g].append(s)
    end: dict[int, int | None] = {}  # group -> the instruction after which its buffer is free (None: never)
    for g, ms in members.items():
        ok = all(m not in compiled.keep_slots and m in last for m in ms)
        end[g] = max(last[m] for m in ms) if ok else None
    results: dict[int, tuple] = {}  # instruction -> (spec, release instruction)
    scratch: dict[int, list[tuple]] = {}
    for i, (kind, fn, _args, _attrs, out) in enumerate(instrs):
        if kind != SPEC or (reuse and reuse[i] is not None) or not takes_out(fn):
            continue
        extra = [spec for spec in getattr(fn, "scratch", ()) if _nbytes(*spec) >= min_bytes]
        if extra:
            scratch[i] = extra
        var = compiled.bound_var.get(out)
        t = var.type if var is not None else None
        if isinstance(t, TensorType) and _nbytes(t.shape, t.dtype) >= min_bytes and end[group[out]] is not None:
            results[i] = ((t.shape, t.dtype), end[group[out]])
    assign: dict[int, int] = {}
    assign_scratch: dict[int, tuple[int, ...]] = {}
    specs: list[tuple[tuple[int, ...], str]] = []
    spans: list[tuple[int, float, int]] = []

    def take(spec, start, end):
        specs.append(spec)
        spans.append((start, end, _nbytes(*spec)))
        return len(specs) - 1

    for i in range(len(instrs)):
        if i in results:  # live from its instruction through the last use of its group
            spec, end = results[i]
            assign[i] = take(spec, i, end)
        if i in scratch:  # live during its instruction only
            assign_scratch[i] = tuple(take(spec, i, i) for spec in scratch[i])
    offsets, size = _offsets(spans)
    return Plan(assign, assign_scratch, specs, offsets, size)


__all__ = ["ALIGN", "EMPTY", "MIN_BYTES", "Plan", "allocate", "plan", "takes_out"]
