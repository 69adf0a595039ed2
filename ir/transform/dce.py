"""Dead-code elimination: drop bindings the return value does not need."""
from __future__ import annotations

from ..nodes import Function, free_vars
from .base import FunctionPass, replace_bindings


class DeadCodeElimination(FunctionPass):
    """Remove every binding whose value the function's result does not depend on.

    Random ops are pure here (their randomness is an explicit seed input), so nothing is kept for
    its side effects.
    """

    def transform_function(self, fn: Function) -> Function:
        if len(fn.blocks) != 1:
            return fn
        live = set(free_vars(fn.body))
        kept = []
        for b in reversed(fn.blocks[0].bindings):
            if b.var in live:
                kept.append(b)
                live.update(free_vars(b.value))
        return replace_bindings(fn, reversed(kept), fn.body)
