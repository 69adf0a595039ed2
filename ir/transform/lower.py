"""Two rewrites of what the Gradient pass writes for batched layers, each computing the same values
with less memory traffic.

**Weight gradients of batched matmuls.** For `y = x @ w` with `x` of shape (B, T, K), matmul's VJP
gives `dw = collapse_sum_to(x.T @ dy, (K, N))` with `.T` swapping the last two axes: B products of
(K, T) @ (T, N) into a (B, K, N) temporary, then a sum over B. It is one product over all B*T rows:

    dw = reshape(x, (B*T, K)).T @ reshape(dy, (B*T, N))

one BLAS call with a long inner dimension and no temporary. (LayoutLowering then folds a transpose of
the result into the product, so nn.Linear's weight gradient comes out in the weight's own layout.)

**Gradients of the slices of one tensor.** `q, k, v = qkv[0], qkv[1], qkv[2]` gives three
`strided_slice_backward`s, each a zero tensor of qkv's full shape with one slice written, then two
adds of full-size tensors. When the slices tile an axis (stride 1, disjoint, covering it), the sum
is their concatenation along that axis, in order.

Both patterns must match exactly (shapes, axes, single uses), or the IR is left as it is.
"""
from __future__ import annotations

import math
from abc import abstractmethod

from ..nodes import Binding, Call, Expr, Function, Tuple, Var
from ..ops.registry import make_call
from .base import FunctionPass, replace_bindings, use_counts


class _Rewrite(FunctionPass):
    """A single forward walk: `rewrite(call, defs, uses, emit)` returns the value that replaces the call
    (after binding any helper values with `emit(value) -> Var`), or None to keep it."""

    def transform_function(self, fn: Function) -> Function:
        if len(fn.blocks) != 1:
            return fn
        uses = use_counts(fn.blocks[0].bindings, fn.body)
        defs: dict[Var, Expr] = {}
        out: list[Binding] = []
        changed = False
        for b in fn.blocks[0].bindings:
            pending: list[Binding] = []

            def emit(value: Call, name=b.var.name, pending=pending) -> Var:
                var = Var(f"{name}_{len(pending)}", value.type)
                pending.append(Binding(var, value))
                return var
            new = self.rewrite(b.value, defs, uses, emit) if isinstance(b.value, Call) else None
            if new is None:
                defs[b.var] = b.value
                out.append(b)
                continue
            changed = True
            out.extend(pending)
            defs[b.var] = new
            out.append(Binding(b.var, new))
        return replace_bindings(fn, out, fn.body) if changed else fn

    @abstractmethod
    def rewrite(self, call: Call, defs, uses, emit) -> Call | None:
        """The value replacing `call`, or None to keep it."""


class BatchedWeightGradients(_Rewrite):
    """collapse_sum_to(matmul(permute_dims(x, swap last two), g), (K, N)) over all batch axes -> one 2-D
    matmul of the flattened rows."""

    def rewrite(self, call: Call, defs, uses, emit):
        if call.op != "collapse_sum_to" or not isinstance(call.args[0], Var) or uses[call.args[0]] != 1:
            return None
        mm = defs.get(call.args[0])
        if not (isinstance(mm, Call) and mm.op == "matmul" and isinstance(mm.args[0], Var)):
            return None
        perm = defs.get(mm.args[0])
        g = mm.args[1]
        if not (isinstance(perm, Call) and perm.op == "permute_dims"):
            return None
        x = perm.args[0]
        n = x.type.ndim
        if n < 3 or g.type.ndim != n or perm.attrs["axes"] != tuple(range(n - 2)) + (n - 1, n - 2):
            return None
        batch = x.type.shape[:-2]
        k, n_out = x.type.shape[-1], g.type.shape[-1]
        if g.type.shape[:-2] != batch or g.type.shape[-2] != x.type.shape[-2] or call.attrs["shape"] != (k, n_out):
            return None
        rows = math.prod(batch) * x.type.shape[-2]
        xr = emit(make_call("reshape", [x], {"shape": (rows, k)}))
        gr = emit(make_call("reshape", [g], {"shape": (rows, n_out)}))
        xt = emit(make_call("permute_dims", [xr], {"axes": (1, 0)}))
        return make_call("matmul", [xt, gr])


class SliceGradientsToConcat(_Rewrite):
    """A sum of strided_slice_backward values that tile one axis -> their concat along it."""

    def rewrite(self, call: Call, defs, uses, emit):
        if call.op != "add":
            return None
        leaves: list[Call] = []
        if not _add_leaves(call, defs, uses, leaves, top=True):
            return None
        first = leaves[0]
        shape, axes = first.attrs["shape"], first.attrs["axes"]
        if len(axes) != 1 or call.type.shape != shape:
            return None
        spans = []
        for leaf in leaves:
            a = leaf.attrs
            if a["shape"] != shape or a["axes"] != axes or a["strides"] != (1,):
                return None
            spans.append((a["begin"][0], a["end"][0], leaf.args[0]))
        spans.sort(key=lambda s: s[0])
        axis = axes[0] % len(shape)
        edge = 0
        for begin, end, data in spans:
            if begin != edge or data.type.shape[axis] != end - begin:
                return None
            edge = end
        if edge != shape[axis]:
            return None
        return make_call("concat", [Tuple([s[2] for s in spans])], {"axis": axis})


def _add_leaves(e: Expr, defs, uses, leaves: list, top: bool) -> bool:
    value = e if top else defs.get(e) if isinstance(e, Var) and uses[e] == 1 else None
    if isinstance(value, Call) and value.op == "add":
        return all(_add_leaves(a, defs, uses, leaves, False) for a in value.args)
    if isinstance(value, Call) and value.op == "grad.strided_slice_backward":
        leaves.append(value)
        return True
    return False


__all__ = ["BatchedWeightGradients", "SliceGradientsToConcat"]
