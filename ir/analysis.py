"""Analyses shared by passes: uses of vars, and which values lie inside checkpoint regions."""
from __future__ import annotations

from .nodes import Binding, Call, Var, free_vars


def checkpoint_interior(bindings: list[Binding]) -> set[Var]:
    """Vars computed inside checkpoint regions, which the backward pass recomputes rather than keeps.

    The outputs of `grad.start_checkpoint` (the region's inputs) and of `grad.end_checkpoint` (its
    outputs) are kept; every value computed from a start marker's output, directly or through other
    such values, before passing through an end marker, is interior.
    """
    roots: set[Var] = set()
    interior: set[Var] = set()
    for b in bindings:
        v = b.value
        if isinstance(v, Call) and v.op == "grad.start_checkpoint":
            roots.add(b.var)
        elif isinstance(v, Call) and v.op == "grad.end_checkpoint":
            continue
        elif any(u in roots or u in interior for u in free_vars(v)):
            interior.add(b.var)
    return interior


def use_counts(bindings: list[Binding], body) -> dict[Var, int]:
    counts: dict[Var, int] = {}
    for b in bindings:
        for u in free_vars(b.value):
            counts[u] = counts.get(u, 0) + 1
    for u in free_vars(body):
        counts[u] = counts.get(u, 0) + 1
    return counts
