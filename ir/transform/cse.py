"""Common-subexpression elimination that leaves checkpoint recomputations alone."""
from __future__ import annotations

from ..analysis import checkpoint_interior
from ..nodes import Binding, Call, Constant, Function, Tuple, TupleGetItem, Var, substitute
from .base import FunctionPass, replace_bindings


def _key(expr):
    if isinstance(expr, Var):
        return ("var", id(expr))
    if isinstance(expr, Call):
        attrs = expr.attrs
        akey = tuple(sorted([(k, repr(v)) for k, v in attrs.items()])) if attrs else ()
        return ("call", expr.op, tuple([("var", id(a)) if isinstance(a, Var) else _key(a) for a in expr.args]), akey)
    if isinstance(expr, Constant):
        return ("const", expr.data.dtype.str, expr.data.shape, expr.data.tobytes())
    if isinstance(expr, Tuple):
        return ("tuple", tuple(_key(f) for f in expr.fields))
    if isinstance(expr, TupleGetItem):
        return ("item", _key(expr.tuple_value), expr.index)
    return ("other", id(expr))


class CommonSubexpressionElimination(FunctionPass):
    """Bind each distinct computation once.

    Values inside checkpoint regions are never merged: the Gradient pass recomputes them on purpose
    (a recomputation is the same expression as its forward original), and merging the two would keep
    the forward value alive until the backward pass, silently undoing the checkpoint.
    """

    def transform_function(self, fn: Function) -> Function:
        if len(fn.blocks) != 1:
            return fn
        bindings = fn.blocks[0].bindings
        # Only the forward part (up to the last end marker) holds originals a recomputation could merge
        # into; backward values computed from recomputations are ordinary and may be merged.
        ends = [i for i, b in enumerate(bindings) if isinstance(b.value, Call) and b.value.op == "grad.end_checkpoint"]
        interior = checkpoint_interior(bindings[: ends[-1] + 1]) if ends else checkpoint_interior(bindings)
        seen: dict[tuple, Var] = {}
        mapping: dict[Var, Var] = {}
        out = []
        for b in bindings:
            value = substitute(b.value, mapping)
            if b.var not in interior and not isinstance(value, Var):
                key = _key(value)
                if key in seen:
                    mapping[b.var] = seen[key]
                    continue
                seen[key] = b.var
            out.append(Binding(b.var, value))
        return replace_bindings(fn, out, substitute(fn.body, mapping))
