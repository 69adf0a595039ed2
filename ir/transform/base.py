"""The pass protocol: a pass is a callable `pass(mod) -> mod` that never mutates its input."""
from __future__ import annotations

import gc
from abc import ABC, abstractmethod
from collections.abc import Callable
from contextlib import contextmanager

from ..nodes import Block, Function, IRModule, Var, free_vars

Pass = Callable[[IRModule], IRModule]


@contextmanager
def paused_gc():
    """Pause Python's cyclic garbage collector while building IR (tracing, the Gradient pass, clean-up,
    verification), then let it resume as it was.

    Building IR allocates many objects and frees few: every few hundred allocations the collector
    runs, and now and then a full collection walks every live object, the growing IR included, so a
    compile with twice the bindings paid more than twice. Reference counting still frees what dies;
    the objects made meanwhile are looked at once, by the first collection after.

    >>> import gc
    >>> with paused_gc():
    ...     gc.isenabled()
    False
    >>> gc.isenabled()
    True
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class Sequential:
    """Apply passes in order: `Sequential([DeadCodeElimination(), ...])(mod)`."""

    def __init__(self, passes: list[Pass]):
        self.passes = list(passes)

    def __call__(self, mod: IRModule) -> IRModule:
        with paused_gc():
            for p in self.passes:
                mod = p(mod)
        return mod


class FunctionPass(ABC):
    """A pass that rewrites every function (or those named) independently."""

    def __init__(self, func_names: list[str] | None = None):
        self.func_names = func_names

    def __call__(self, mod: IRModule) -> IRModule:
        out = mod
        for name, fn in mod.items():
            if self.func_names is None or name in self.func_names:
                out = out.with_function(name, self.transform_function(fn))
        return out

    @abstractmethod
    def transform_function(self, fn: Function) -> Function:
        """The rewritten function (a new one; fn is never mutated)."""


def replace_bindings(fn: Function, bindings, body) -> Function:
    return Function(list(fn.params), [Block(list(bindings), fn.blocks[0].is_dataflow)], body, dict(fn.attrs))


def use_counts(bindings, body) -> dict[Var, int]:
    """How many times each var is read (twice by `x @ x`)."""
    uses: dict[Var, int] = {}
    for e in [b.value for b in bindings] + [body]:
        for u in free_vars(e):
            uses[u] = uses.get(u, 0) + 1
    return uses
