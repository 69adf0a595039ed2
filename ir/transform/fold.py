"""Fold scalar constants, and drop broadcasts an elementwise op would make anyway.

The Gradient pass seeds the adjoint with `ones(())` and composes rules mechanically, so a loss like
`-(y * log_softmax(z)).sum(axis=1).mean()` leaves a chain of scalar ops on constants (negate,
reshape, divide by the batch size) and two broadcasts of the result to the logits' shape before the
multiply that uses it: seven bindings that compute one number and a view. Relax's FoldConstant folds
such chains; this pass does it for results of one element (they print inline as `R.const`, so the
IR stays readable; larger constants stay computed) and then removes a `broadcast_to` whose only job
the consuming elementwise op does itself:

    lv = R.broadcast_to(c, (32, 10)); lv1 = R.multiply(lv, y)   ->   lv1 = R.multiply(c, y)

when the other operands broadcast with `c` to the same result shape. Values are unchanged: a folded
constant is computed by the op's own kernel, and broadcasting inside the op reads the same elements.
"""
from __future__ import annotations

import math

import numpy as np

from ..nodes import Binding, Call, Constant, Expr, Function, Var, substitute
from ..ops.registry import get_op, make_call
from ..types import TensorType
from .base import FunctionPass, replace_bindings

# elementwise ops that broadcast their operands themselves
_BROADCASTING = frozenset({"add", "subtract", "multiply", "divide", "power", "maximum", "minimum", "floor_divide",
                           "floor_mod", "where", "less", "less_equal", "greater", "greater_equal", "equal",
                           "not_equal"})
# never evaluated at compile time: random draws, checks that raise at run time, region markers
_KEEP = ("random.", "nn.dropout", "check_index", "grad.")


class FoldConstants(FunctionPass):
    """Fold one-element constant expressions; remove broadcasts into broadcasting elementwise ops."""

    def transform_function(self, fn: Function) -> Function:
        if len(fn.blocks) != 1:
            return fn
        mapping: dict[Var, Expr] = {}
        defs: dict[Var, Call] = {}
        out = []
        for b in fn.blocks[0].bindings:
            value = substitute(b.value, mapping)
            if isinstance(value, Call):
                value = self._rewrite(value, defs)
                folded = _fold(value)
                if folded is not None:
                    mapping[b.var] = folded
                    continue
                defs[b.var] = value
            out.append(Binding(b.var, value))
        return replace_bindings(fn, out, substitute(fn.body, mapping))

    def _rewrite(self, call: Call, defs: dict[Var, Call]) -> Call:
        if call.op in ("broadcast_to", "reshape", "expand_dims") and isinstance(call.args[0], Var):
            inner = defs.get(call.args[0])
            # broadcast_to(broadcast_to(x, s1), s2) and a reshape of a broadcast one-element constant
            if isinstance(inner, Call) and inner.op == "broadcast_to" and (
                    call.op == "broadcast_to" or _one_element_constant(inner.args[0])):
                src = inner.args[0]
                if call.op != "broadcast_to":
                    src = Constant(np.asarray(src.data).reshape(()))
                return make_call("broadcast_to", [src], {"shape": call.type.shape})
        if call.op not in _BROADCASTING:
            return call
        args = list(call.args)
        for i, a in enumerate(args):
            inner = defs.get(a) if isinstance(a, Var) else None
            if not (isinstance(inner, Call) and inner.op == "broadcast_to"):
                continue
            trial = args[:i] + [inner.args[0]] + args[i + 1:]
            shapes = [t.type.shape for t in trial]
            try:
                if np.broadcast_shapes(*shapes) == call.type.shape:
                    args = trial
            except ValueError:
                continue
        if args == list(call.args):
            return call
        return make_call(call.op, args, call.attrs)


def _one_element_constant(e: Expr) -> bool:
    return isinstance(e, Constant) and np.asarray(e.data).size == 1


def _fold(call: Call) -> Constant | None:
    """The call's value as a constant, when it has one element and every argument is a constant."""
    t = call.type
    if not isinstance(t, TensorType) or math.prod(t.shape) != 1 or call.op.startswith(_KEEP):
        return None
    if not all(isinstance(a, Constant) for a in call.args) or call.op == "fused":
        return None
    op = get_op(call.op)
    if op.tuple_input:
        return None
    try:
        with np.errstate(all="ignore"):
            value = np.asarray(op.kernel(np, *[np.asarray(a.data) for a in call.args], **call.attrs))
    except Exception:  # noqa: BLE001 - an op that raises (integer division by zero) raises when it runs
        return None
    if value.shape != t.shape or value.dtype != np.dtype(t.dtype):
        return None
    return Constant(value)


__all__ = ["FoldConstants"]
