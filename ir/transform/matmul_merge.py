"""Sums of small matmuls as one matmul of concatenated operands.

A weight used at every step of a loop (an RNN's hidden-to-hidden weight, read T times) gets, from the
Gradient pass, one contribution per step summed by a chain of adds:

    dW = x_0.T @ g_0 + x_1.T @ g_1 + ... + x_{T-1}.T @ g_{T-1}        x_t: (M, K), g_t: (M, N)

T products with a short inner dimension (M, the batch) and T - 1 adds of (K, N) tensors. It is one
product with an inner dimension of T * M:

    dW = concat(x_t, axis=0).T @ concat(g_t, axis=0)

one BLAS call that runs near peak speed, and no (K, N) temporaries. The sum is taken in another order,
so the values agree up to float rounding.

The rewrite matches the whole tree of adds (every inner add read once, no broadcasting), groups its
2-D matmul terms by form (first operand a transpose or not) and dtype, and merges each group of two or
more whose concats copy fewer elements than the adds write (short inner dimensions: the weight
gradients of a loop, not a forward `x @ w1 + y @ w2`, which would copy the weights on every call);
other terms are added to the merged products as before.
"""
from __future__ import annotations

from ..nodes import Call, Expr, Function, Tuple, Var
from ..ops.registry import make_call
from .base import use_counts
from .lower import _Rewrite

_T = (1, 0)


class MergeMatmulSums(_Rewrite):
    """add(matmul(x_0, y_0), matmul(x_1, y_1), ...) of 2-D products of one shape -> matmul(concat(x_t,
    axis=1), concat(y_t, axis=0)), the x_t's concatenated untransposed when every one is a transpose."""

    def transform_function(self, fn: Function) -> Function:
        if len(fn.blocks) != 1:
            return fn
        bindings = fn.blocks[0].bindings
        uses = use_counts(bindings, fn.body)
        adds = {b.var: b.value for b in bindings if isinstance(b.value, Call) and b.value.op == "add"}
        # an add read once by another add (of one type throughout) is inside that add's tree: only the
        # tree's root is rewritten
        self._inner = {id(adds[a]) for c in adds.values() if all(a.type == c.type for a in c.args)
                       for a in c.args if isinstance(a, Var) and a in adds and uses[a] == 1}
        self._stacks = _stacks(bindings)
        self._moved: dict[int, Var] = {}  # id of a stack's concat emitted earlier by a merge -> its new var
        try:
            return super().transform_function(fn)
        finally:
            del self._inner, self._stacks, self._moved

    def rewrite(self, call: Call, defs, uses, emit):
        if id(call) in self._moved:
            return self._moved[id(call)]  # an alias, which Simplify removes
        if call.op != "add" or id(call) in self._inner:
            return None
        terms: list[Expr] = []
        _sum_terms(call, defs, uses, call.type, terms, top=True)
        groups: dict[tuple, list[tuple[Expr, Expr]]] = {}
        singles: dict[tuple, Expr] = {}
        rest: list[Expr] = []
        for t in terms:
            mm = defs.get(t) if isinstance(t, Var) and uses[t] == 1 else None
            key = _form(mm, call, defs)
            if key is None:
                rest.append(t)
                continue
            groups.setdefault(key, []).append(mm.args)
            singles.setdefault(key, t)
        chosen = [key for key, pairs in groups.items() if _worth_merging(pairs, call.type.shape)]
        if not chosen:
            return None
        merged = [self._merged(key, groups[key], defs, emit) for key in chosen]
        rest += [singles[key] for key in groups if key not in chosen]
        total = [emit(m) for m in merged] + rest
        acc = total[0]
        for t in total[1:-1]:
            acc = emit(make_call("add", [acc, t]))
        return make_call("add", [acc, total[-1]]) if len(total) > 1 else merged[0]

    def _merged(self, key: tuple, pairs: list[tuple[Expr, Expr]], defs, emit) -> Call:
        _, transposed = key
        stacked = self._stacked([y for _, y in pairs], defs, emit)
        if stacked is None:
            ys = emit(make_call("concat", [Tuple([y for _, y in pairs])], {"axis": 0}))
        else:  # in the stack's order, so that one concat serves both
            ys, order = stacked
            pairs = sorted(pairs, key=lambda p: order[p[1]])
        if transposed:  # concat the rows of the untransposed operands (contiguous copies), then one transpose
            rows = emit(make_call("concat", [Tuple([_transposed(x, defs) for x, _ in pairs])], {"axis": 0}))
            xs = emit(make_call("permute_dims", [rows], {"axes": _T}))
        else:
            xs = emit(make_call("concat", [Tuple([x for x, _ in pairs])], {"axis": 1}))
        return make_call("matmul", [xs, ys])

    def _stacked(self, ys: list[Expr], defs, emit):
        """(the ys concatenated, {y: position}) from a concat of them along a new leading axis that the function
        makes anyway (the gradient of an RNN's hoisted input projection, split into steps), else None. A
        stack bound later is bound here instead, once its parts are all bound."""
        found = self._stacks.get(frozenset(ys)) if len(set(ys)) == len(ys) else None
        if found is None:
            return None
        var, concat, sources = found
        if var in defs:
            stack = var
        elif id(concat) in self._moved:
            stack = self._moved[id(concat)]
        elif all(p in defs for p in concat.args[0].fields):
            stack = self._moved[id(concat)] = emit(concat)
        else:
            return None
        rows = sum(y.type.shape[0] for y in ys)
        flat = emit(make_call("reshape", [stack], {"shape": (rows, ys[0].type.shape[1])}))
        return flat, {y: i for i, y in enumerate(sources)}


def _sum_terms(e: Expr, defs, uses, t, terms: list, top: bool) -> None:
    """The terms of the tree of adds under `e` (inner adds read once, every tensor of type t)."""
    value = e if top else defs.get(e) if isinstance(e, Var) and uses[e] == 1 else None
    if isinstance(value, Call) and value.op == "add" and all(a.type == t for a in value.args):
        for a in value.args:
            _sum_terms(a, defs, uses, t, terms, False)
    else:
        terms.append(e)


def _form(mm, root: Call, defs) -> tuple | None:
    """(dtype, first operand transposed) of a 2-D matmul term of the root's type, else None."""
    if not (isinstance(mm, Call) and mm.op == "matmul" and mm.type == root.type):
        return None
    x, y = mm.args
    if x.type.ndim != 2 or y.type.ndim != 2 or x.type.dtype != y.type.dtype:
        return None
    return x.type.dtype, _transposed(x, defs) is not None


def _transposed(x: Expr, defs) -> Expr | None:
    """a when x = permute_dims(a, (1, 0)) (axes None: reversed), else None."""
    value = defs.get(x) if isinstance(x, Var) else None
    if isinstance(value, Call) and value.op == "permute_dims" and value.attrs["axes"] in (None, _T):
        return value.args[0]
    return None


def _worth_merging(pairs: list[tuple[Expr, Expr]], shape: tuple[int, int]) -> bool:
    """Whether the concats copy fewer elements than the adds they replace write: sum_t M_t * (P + N) against
    (T - 1) * P * N for T products (P, M_t) @ (M_t, N). An RNN's weight gradient (M the batch, small) passes;
    `x @ w1 + y @ w2` in a forward pass (concatenating the weights on every call) does not."""
    p, n = shape
    inner = sum(x.type.shape[1] for x, _ in pairs)
    return len(pairs) > 1 and inner * (p + n) <= (len(pairs) - 1) * p * n


def _stacks(bindings) -> dict:
    """{frozenset of the 2-D tensors: (var, concat, tensors in order)} of each concat(reshape(y_t, (1, M, N)),
    axis=0), a stack of 2-D tensors, the function binds."""
    defs = {b.var: b.value for b in bindings}
    out = {}
    for b in bindings:
        c = b.value
        if not (isinstance(c, Call) and c.op == "concat" and c.attrs["axis"] == 0 and isinstance(c.args[0], Tuple)):
            continue
        sources = [_unexpanded(p, defs) for p in c.args[0].fields]
        if all(y is not None for y in sources) and len(set(sources)) == len(sources):
            out.setdefault(frozenset(sources), (b.var, c, sources))
    return out


def _unexpanded(p: Expr, defs) -> Expr | None:
    """y when p = reshape(y, (1,) + y.shape) with y 2-D, else None."""
    value = defs.get(p) if isinstance(p, Var) else None
    if isinstance(value, Call) and value.op == "reshape" and value.args[0].type.ndim == 2:
        y = value.args[0]
        return y if value.type.shape == (1,) + y.type.shape else None
    return None


__all__ = ["MergeMatmulSums"]
