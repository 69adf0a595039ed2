"""Layout-aware lowering: transposes fold into matmuls, so results come out contiguous.

A matmul's result is a fresh C-contiguous array; a transpose of it (`permute_dims` swapping the last
two axes) is a strided view. The adjoint of `x @ w.T` (nn.Linear) is exactly that: `(g.T @ x).T`, a
view whose rows run across memory, so an optimizer updating `w -= lr * dw` walks it against the cache.
This pass rewrites `(A @ B).T` into `B.T @ A.T`: the same values, computed by BLAS straight into the
transposed layout. Transposes on a matmul's operands stay views (BLAS reads a transposed operand
without copying), and a transpose of a transpose cancels, so `(A.T @ B).T` becomes `B.T @ A`.

>>> import numpy as np, tracer, ir
>>> mod = tracer.trace(lambda a, b: tracer.permute_dims(a @ b, (1, 0)), tracer.spec((2, 3)), tracer.spec((3, 4)))
>>> [bd.value.op for bd in LayoutLowering()(mod)["main"].bindings]
['permute_dims', 'permute_dims', 'matmul']
"""
from __future__ import annotations

from ..nodes import Binding, Call, Expr, Function, Var
from ..ops.registry import make_call
from .base import FunctionPass, replace_bindings, use_counts


def _swap_last(ndim: int) -> tuple[int, ...]:
    return tuple(range(ndim - 2)) + (ndim - 1, ndim - 2)


class LayoutLowering(FunctionPass):
    """Rewrite `permute_dims(matmul(a, b))` that swaps the last two axes into `matmul(b.T, a.T)`
    when the matmul has no other use (both operands at least 2-D). Values are unchanged."""

    def transform_function(self, fn: Function) -> Function:
        if len(fn.blocks) != 1:
            return fn
        bindings = fn.blocks[0].bindings
        defs: dict[Var, Expr] = {b.var: b.value for b in bindings}
        candidates = []  # transposes of matmul results
        for b in bindings:
            v = b.value
            if isinstance(v, Call) and v.op == "permute_dims" and isinstance(v.args[0], Var):
                inner = defs.get(v.args[0])
                if isinstance(inner, Call) and inner.op == "matmul":
                    candidates.append(v)
        if not candidates:
            return fn
        uses = use_counts(bindings, fn.body)
        fold: dict[Var, Call] = {}  # matmul var -> the permute that is its only use
        for v in candidates:
            if uses[v.args[0]] != 1:
                continue
            inner = defs[v.args[0]]
            a, c = inner.args
            ndim = v.args[0].type.ndim
            axes = v.attrs["axes"] or tuple(reversed(range(ndim)))
            if a.type.ndim < 2 or c.type.ndim < 2 or tuple(axes) != _swap_last(ndim):
                continue
            fold[v.args[0]] = v
        if not fold:
            return fn
        out: list[Binding] = []
        for b in bindings:
            if b.var in fold:
                continue  # computed transposed where its transpose is bound
            v = b.value
            if isinstance(v, Call) and v.op == "permute_dims" and v.args[0] in fold:
                a, c = defs[v.args[0]].args
                args = []
                for x in (c, a):
                    t, extra = _transposed(x, defs, fold, b.var.name)
                    out.extend(extra)
                    args.append(t)
                v = make_call("matmul", args, defs[v.args[0]].attrs)
            out.append(Binding(b.var, v))
        return replace_bindings(fn, out, fn.body)


def _transposed(x: Expr, defs, fold, name: str) -> tuple[Expr, list[Binding]]:
    """x with its last two axes swapped: the source of a transpose it is (unless that source is a
    matmul folded away), or a new transpose binding."""
    ndim = x.type.ndim
    inner = defs.get(x) if isinstance(x, Var) else None
    if isinstance(inner, Call) and inner.op == "permute_dims":
        axes = inner.attrs["axes"] or tuple(reversed(range(ndim)))
        if tuple(axes) == _swap_last(ndim) and inner.args[0] not in fold:
            return inner.args[0], []
    call = make_call("permute_dims", [x], {"axes": _swap_last(ndim)})
    var = Var(f"{name}_t", call.type, getattr(x, "loc", None))
    return var, [Binding(var, call)]


__all__ = ["LayoutLowering"]
