"""Passes over IR modules: each is a callable `pass(mod) -> mod` that returns a new module."""
from .base import FunctionPass, Pass, Sequential
from .cse import CommonSubexpressionElimination
from .dce import DeadCodeElimination
from .fuse import FuseElementwise
from .layout import LayoutLowering
from .simplify import Simplify
from .unfuse import Unfuse


def cleanup() -> Sequential:
    """The standard clean-up after generating IR: simplify, merge duplicates, fold transposes into
    matmuls (LayoutLowering), drop dead code, fuse elementwise chains (FuseElementwise; opt-in:
    TRACEGRAD_FUSE=1 or ir.transform.fuse.set_enabled(True))."""
    return Sequential([Simplify(), CommonSubexpressionElimination(), LayoutLowering(), Simplify(),
                       DeadCodeElimination(), FuseElementwise()])


__all__ = ["CommonSubexpressionElimination", "DeadCodeElimination", "FunctionPass", "FuseElementwise",
           "LayoutLowering", "Pass", "Sequential", "Simplify", "Unfuse", "cleanup"]
