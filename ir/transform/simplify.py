"""Algebraic clean-up of generated IR: what the Gradient pass leaves behind when rules compose."""
from __future__ import annotations

from ..nodes import Binding, Call, Constant, Expr, Function, Var, substitute
from ..ops.registry import make_call
from .base import FunctionPass, replace_bindings

_SHAPE_NOOPS = ("broadcast_to", "collapse_sum_to", "reshape")


class Simplify(FunctionPass):
    """Remove aliases, additions of zeros, multiplications by ones, broadcasts/reshapes/collapses
    to an unchanged shape, and fold chains of transposes (dropping those that cancel out)."""

    def transform_function(self, fn: Function) -> Function:
        if len(fn.blocks) != 1:
            return fn
        mapping: dict[Var, Expr] = {}
        defs: dict[Var, Expr] = {}
        out = []
        for b in fn.blocks[0].bindings:
            value = substitute(b.value, mapping)
            simpler = self._simplify(value, defs, b.var)
            if isinstance(simpler, Var) and simpler.type == b.var.type:
                mapping[b.var] = simpler
                continue
            defs[b.var] = simpler
            out.append(Binding(b.var, simpler))
        return replace_bindings(fn, out, substitute(fn.body, mapping))

    def _simplify(self, value: Expr, defs: dict[Var, Expr], var: Var) -> Expr:
        if not isinstance(value, Call):
            return value
        op, args = value.op, value.args
        if op in _SHAPE_NOOPS and args[0].type == var.type:
            return args[0]
        if op == "add":
            for keep, other in ((args[0], args[1]), (args[1], args[0])):
                if _is_fill(other, defs, 0.0) and keep.type == var.type:
                    return keep
        if op == "multiply":
            for keep, other in ((args[0], args[1]), (args[1], args[0])):
                if _is_fill(other, defs, 1.0) and keep.type == var.type:
                    return keep
        if op == "permute_dims":
            return self._fold_permutes(value, defs)
        if op == "broadcast_to":
            return self._skip_unsqueeze(value, defs)
        return value

    def _skip_unsqueeze(self, value: Call, defs) -> Expr:
        """broadcast_to(reshape(x, (1, .., 1) + x.shape), s) is broadcast_to(x, s)."""
        inner = defs.get(value.args[0]) if isinstance(value.args[0], Var) else None
        if not (isinstance(inner, Call) and inner.op == "reshape"):
            return value
        src = inner.args[0]
        shape, src_shape = inner.attrs["shape"], src.type.shape
        lead = len(shape) - len(src_shape)
        if lead < 0 or shape[lead:] != src_shape or any(d != 1 for d in shape[:lead]):
            return value
        return make_call("broadcast_to", [src], value.attrs)

    def _fold_permutes(self, value: Call, defs) -> Expr:
        x = value.args[0]
        ndim = x.type.ndim
        axes = value.attrs["axes"] or tuple(reversed(range(ndim)))
        inner = defs.get(x) if isinstance(x, Var) else None
        if isinstance(inner, Call) and inner.op == "permute_dims":
            source = inner.args[0]
            inner_axes = inner.attrs["axes"] or tuple(reversed(range(ndim)))
            axes = tuple(inner_axes[a] for a in axes)
            x = source
        if axes == tuple(range(ndim)):
            return x
        if x is value.args[0]:
            return value
        return make_call("permute_dims", [x], {"axes": axes})


def _is_fill(expr: Expr, defs: dict[Var, Expr], fill: float) -> bool:
    if isinstance(expr, Constant):
        return expr.data.size > 0 and bool((expr.data == fill).all())
    value = defs.get(expr) if isinstance(expr, Var) else None
    if isinstance(value, Call):
        if value.op in ("zeros", "zeros_like"):
            return fill == 0.0
        if value.op in ("ones", "ones_like"):
            return fill == 1.0
        if value.op in ("full", "full_like"):
            return value.attrs.get("fill_value") == fill
    return False


__all__ = ["Simplify"]
