"""Unfuse: every `fused` binding back into its chain of elementwise bindings (FuseElementwise's inverse).

A `fused` op has no VJP rule of its own: the Gradient pass runs this pass first when the function it
differentiates holds one (a grad of a grad, or Gradient applied to a cleaned-up module), so each
sub-op is differentiated by its own rule. The chain's sub-ops become bindings in evaluation order
(arguments left to right, innermost first); the last one binds the fused binding's own var, so every
reader and the return value stay as they were. Scalar constants of the chain become 0-d constants of
their dtype; each new var keeps the fused binding's Source.
"""
from __future__ import annotations

import numpy as np

from ..nodes import Binding, Block, Call, Constant, Function, Tuple, Var
from ..ops.fused import Const, Leaf, parse_expr
from ..ops.registry import make_call
from .base import FunctionPass, replace_bindings


def has_fused(fn: Function) -> bool:
    """Whether fn holds a `fused` binding (the Gradient pass unfuses only then)."""
    return any(isinstance(b.value, Call) and b.value.op == "fused" for block in fn.blocks for b in block.bindings)


class Unfuse(FunctionPass):
    """Expand `fused` bindings into one binding per sub-op (the identity on functions without any).

    >>> import ir, tracer
    >>> from ir.transform.fuse import FuseElementwise
    >>> mod = FuseElementwise(force=True)(tracer.trace(lambda x: (x * 2.0 + 1.0).exp(), tracer.spec((4,))))
    >>> [b.value.op for b in Unfuse()(mod)["main"].bindings]
    ['multiply', 'add', 'exp']
    """

    def transform_function(self, fn: Function) -> Function:
        if not has_fused(fn):
            return fn
        blocks = []
        for block in fn.blocks:
            out: list[Binding] = []
            for b in block.bindings:
                if isinstance(b.value, Call) and b.value.op == "fused":
                    _expand(b, out)
                else:
                    out.append(b)
            blocks.append(out)
        if len(blocks) == 1:
            return replace_bindings(fn, blocks[0], fn.body)
        new_blocks = [Block(bs, blk.is_dataflow) for blk, bs in zip(fn.blocks, blocks, strict=True)]
        return Function(list(fn.params), new_blocks, fn.body, dict(fn.attrs))


def _expand(b: Binding, out: list) -> None:
    (inputs,) = b.value.args
    fields = list(inputs.fields) if isinstance(inputs, Tuple) else None
    if fields is None:
        raise ValueError(f"Unfuse: {b.var.name} = fused(...) takes a tuple expression, got {inputs!r}")
    tree = parse_expr(b.value.attrs["expr"])
    count = [0]

    def emit(node, last: bool):
        if isinstance(node, Leaf):
            return fields[node.index]
        if isinstance(node, Const):
            return Constant(np.asarray(node.value, dtype=node.dtype))
        call = make_call(node.op, [emit(a, False) for a in node.args], node.attrs)
        if last:
            var = b.var
        else:
            count[0] += 1
            var = Var(f"{b.var.name}_u{count[0]}", call.type, b.var.loc)
        out.append(Binding(var, call))
        return var

    if isinstance(tree, Leaf | Const):
        raise ValueError(f"Unfuse: {b.var.name} = fused(...) has no op in expr {b.value.attrs['expr']!r}")
    emit(tree, True)


__all__ = ["Unfuse", "has_fused"]
