"""Analyses shared by passes: uses of vars, and which values lie inside checkpoint regions."""
from __future__ import annotations

from .nodes import Binding, Call, Function, Var, free_vars


def checkpoint_interior(bindings: list[Binding]) -> set[Var]:
    """Vars computed inside checkpoint regions, which the backward pass recomputes rather than keeps.

    The outputs of `grad.start_checkpoint` (the region's inputs) and of `grad.end_checkpoint` (its
    outputs) are kept. Inside a region, that is from its start markers until the first binding
    after its end markers, every value computed from a start marker's output, directly or through
    other such values, is interior. Later reads of a region's inputs (a backward pass inlined by a
    grad inside a trace reads them) are ordinary values.
    """
    roots: set[Var] = set()
    interior: set[Var] = set()
    inside = closing = False
    for b in bindings:
        v = b.value
        op = v.op if isinstance(v, Call) else None
        if op == "grad.start_checkpoint":
            roots.add(b.var)
            inside, closing = True, False
        elif op == "grad.end_checkpoint":
            closing = True
        else:
            if closing:
                inside = closing = False
            if inside and any(u in roots or u in interior for u in free_vars(v)):
                interior.add(b.var)
    return interior


def checkpoint_regions(fn: Function) -> list[tuple[int, int]]:
    """Each checkpoint region of fn as (first, last) point indices (binding index + 1), markers included."""
    regions, start, closing = [], None, False
    for i, b in enumerate(fn.bindings):
        op = b.value.op if isinstance(b.value, Call) else None
        if op == "grad.start_checkpoint" and (start is None or closing):
            if start is not None:
                regions.append((start + 1, i))
            start, closing = i, False
        elif op == "grad.end_checkpoint" and start is not None:
            closing = True
        elif closing:
            regions.append((start + 1, i))
            start, closing = None, False
    if start is not None and closing:
        regions.append((start + 1, len(fn.bindings)))
    return regions
