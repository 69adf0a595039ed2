"""Static storage for a compiled function's large intermediate arrays.

Every op of a step allocates its result, and large blocks freed by NumPy go back to the kernel (glibc
returns them above its mmap and trim thresholds), so each step faults the same pages in again: a GPT
step here took 7 000-15 000 minor page faults, a fifth to a third of its time (docs/benchmarks.md). The
shapes and lifetimes are known before the first call, so the executor plans storage once, as Relax's
StaticPlanBlockMemory and TVM's graph executor do: each large intermediate that an out=-capable kernel
produces gets one of a few arrays kept by the generated function between calls, reused by any later
value of the same shape and dtype once the first one has died.

A value gets planned storage only when nothing can keep a view of it (every op that reads it is one that
returns a new buffer), it is not returned, and neither is any value written into its buffer in place
(ir.runtime.reuse). Returned arrays are always new. `plan(compiled)` returns the plan; the executor's generated
function passes `out=` to those kernels (ir.runtime.codegen). The arrays planned are `compiled.storage_bytes`,
held between calls: one set per call running at once (threads take a set from a pool, ir.runtime.codegen),
so calls in turn reuse a single set.
"""
from __future__ import annotations

import functools
import math
from collections import defaultdict

import numpy as np

from ..types import TensorType
from .instructions import SPEC
from .reuse import FRESH

MIN_BYTES = 64 * 1024  # below this, malloc serves blocks from its heap without faults


def takes_out(fn) -> bool:
    """True for the specialized kernels that accept out=: ufuncs and a ufunc method (reduce) with fixed axes."""
    if isinstance(fn, np.ufunc):
        return True
    return (isinstance(fn, functools.partial) and getattr(fn.func, "__name__", "") == "reduce"
            and isinstance(getattr(fn.func, "__self__", None), np.ufunc))


def plan(compiled, min_bytes: int | None = None) -> tuple[dict[int, int], list[tuple[tuple[int, ...], str]]]:
    """({instruction index: storage id}, [(shape, dtype) per storage id]) for `compiled`, a CompiledFunction
    whose instructions carry their op names (`instr_ops`); values under `min_bytes` (MIN_BYTES) allocate."""
    min_bytes = MIN_BYTES if min_bytes is None else min_bytes
    instrs, frees, reuse, ops = compiled.instrs, compiled.frees, compiled.reuse, compiled.instr_ops
    keep = compiled.keep_slots
    root: dict[int, int] = {}  # slot -> the slot whose buffer it is (through in-place reuse)
    viewed: set[int] = set()  # slots some reader may keep a view of
    last: dict[int, int] = {}  # slot -> the instruction after which it is freed
    for i, (_kind, _fn, args, _attrs, out) in enumerate(instrs):
        if ops[i] not in FRESH:  # a view op, a tuple, an item, an alias: may keep the buffer alive
            viewed.update(args)
        into = reuse[i] if reuse else None
        root[out] = root.get(into[1], into[1]) if into is not None else out
        for s in frees[i]:
            last[s] = i
    groups: dict[int, list[int]] = defaultdict(list)
    for s, r in root.items():
        groups[r].append(s)
    candidates: dict[int, int] = {}  # instruction index -> root slot
    for i, (kind, fn, _args, _attrs, out) in enumerate(instrs):
        var = compiled.bound_var.get(out)
        if kind != SPEC or (reuse and reuse[i] is not None) or not takes_out(fn) or var is None:
            continue
        t = var.type
        if not isinstance(t, TensorType) or math.prod(t.shape) * np.dtype(t.dtype).itemsize < min_bytes:
            continue
        members = groups[out]
        if any(m in keep or m in viewed or m not in last for m in members):
            continue
        candidates[i] = out
    assign: dict[int, int] = {}
    specs: list[tuple[tuple[int, ...], str]] = []
    free: dict[tuple, list[int]] = defaultdict(list)
    release: dict[int, list[int]] = defaultdict(list)
    for i in range(len(instrs)):
        if i in candidates:
            t = compiled.bound_var[candidates[i]].type
            spec = (t.shape, t.dtype)
            sid = free[spec].pop() if free[spec] else len(specs)
            if sid == len(specs):
                specs.append(spec)
            assign[i] = sid
            release[max(last[m] for m in groups[candidates[i]])].append(sid)
        for sid in release.pop(i, ()):
            free[specs[sid]].append(sid)
    return assign, specs


__all__ = ["MIN_BYTES", "plan", "takes_out"]
