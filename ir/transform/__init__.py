"""Passes over IR modules: each is a callable `pass(mod) -> mod` that returns a new module."""
from .base import FunctionPass, Pass, Sequential
from .cse import CommonSubexpressionElimination
from .dce import DeadCodeElimination
from .fold import FoldConstants
from .fuse import FuseElementwise
from .layout import LayoutLowering
from .lower import BatchedWeightGradients, SliceGradientsToConcat
from .matmul_merge import MergeMatmulSums
from .remat import RecomputeActivations, ReluMask
from .simplify import Simplify
from .unfuse import Unfuse


def cleanup() -> Sequential:
    """The standard clean-up after generating IR: simplify, merge duplicates, fold transposes into
    matmuls (LayoutLowering), drop dead code, fuse elementwise chains (FuseElementwise; opt-in:
    TRACEGRAD_FUSE=1 or ir.transform.fuse.set_enabled(True))."""
    return Sequential([Simplify(), CommonSubexpressionElimination(), LayoutLowering(), Simplify(),
                       DeadCodeElimination(), FuseElementwise()])


def optimize() -> Sequential:
    """What a compiled step runs on top of cleanup(): fold scalar constants and the broadcasts that
    elementwise ops make themselves (FoldConstants), one 2-D matmul for each weight gradient of a batched
    matmul (BatchedWeightGradients), a concat for gradients of slices that tile an axis
    (SliceGradientsToConcat), ReLU's backward mask read from its output (ReluMask), transposes folded into
    the new matmuls (LayoutLowering), drop what that left dead, and recompute large activations whose
    input is kept anyway instead of keeping them from the forward to the backward pass
    (RecomputeActivations). cleanup() alone keeps the adjoint as Relax's Gradient pass documents it."""
    # the patterns are written on ops: fused chains (fusion on) are expanded first and fused again last
    return Sequential([Unfuse(), FoldConstants(), BatchedWeightGradients(), MergeMatmulSums(), SliceGradientsToConcat(),
                       ReluMask(), LayoutLowering(), Simplify(), DeadCodeElimination(), RecomputeActivations(),
                       FuseElementwise()])


__all__ = ["BatchedWeightGradients", "CommonSubexpressionElimination", "DeadCodeElimination", "FoldConstants",
           "FunctionPass", "FuseElementwise", "LayoutLowering", "MergeMatmulSums", "Pass", "RecomputeActivations",
           "ReluMask", "Sequential", "Simplify", "SliceGradientsToConcat", "Unfuse", "cleanup", "optimize"]
