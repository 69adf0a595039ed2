"""The Gradient pass: reverse-mode automatic differentiation of one function, as Relax's pass.

`Gradient("main")(mod)` adds `main_adjoint`, which repeats main's bindings, then emits the backward
bindings in reverse order in the same dataflow block, and returns `(original return value,
(grad_1, ..., grad_k))`. Gradients are summed back to each input's own shape and accumulated here,
once; the rules in `autodiff.rules` only say how one op's output gradient maps to its inputs.

Checkpointing: values inside `grad.start_checkpoint` / `grad.end_checkpoint` regions are not kept for
the backward pass. When a rule needs one, it is recomputed from the region's kept inputs just before
that backward step (and reused by later steps), so the executor can free the forward copy after its
last forward use.
"""
from __future__ import annotations

import ir
from ir import (
    Binding,
    Builder,
    Call,
    Expr,
    Function,
    IRModule,
    Tuple,
    TupleGetItem,
    TupleType,
    Var,
    free_vars,
    substitute,
)
from ir.analysis import checkpoint_interior
from ir.nodes import mark_derived
from ir.ops import get_op
from ir.printer import assign_names
from ir.transform.base import paused_gc
from ir.transform.unfuse import Unfuse, has_fused

from .rules import VJPS


class Gradient:
    """Reverse-mode AD as an IR pass (see the module docstring).

    >>> import tracer, autodiff
    >>> mod = tracer.trace(lambda x, y: (x + y).sum(), tracer.spec((3, 3)), tracer.spec((3, 3)))
    >>> sorted(autodiff.Gradient("main")(mod))
    ['main', 'main_adjoint']
    """

    def __init__(self, func_name: str, require_grads: Var | list[Var] | None = None, target_index: int = 0):
        self.func_name = func_name
        self.require_grads = require_grads
        self.target_index = target_index

    def __call__(self, mod: IRModule) -> IRModule:
        name = self.func_name
        if name not in mod:
            raise ValueError(f"Gradient: no function named {name!r} in the module (it has {list(mod)})")
        if f"{name}_adjoint" in mod:
            raise ValueError(f"Gradient: the module already has a function named {name}_adjoint")
        fn = mod[name]
        if has_fused(fn):  # a fused chain is differentiated through its sub-ops' own rules
            mod = Unfuse([name])(mod)
            fn = mod[name]
        if len(fn.blocks) != 1 or not fn.blocks[0].is_dataflow:
            raise ValueError(f"Gradient: {name} must have exactly one dataflow block, it has {len(fn.blocks)} "
                             f"block(s) ({sum(b.is_dataflow for b in fn.blocks)} dataflow)")
        target = self._target(fn)
        require = self._require(fn)
        with paused_gc():
            adjoint = _AdjointBuilder(fn, target, require).build()
        return mod.with_function(f"{name}_adjoint", adjoint)

    def _target(self, fn: Function) -> Expr:
        # As Relax: target_index picks a field of a returned tuple expression; any other return value is the
        # target itself (so a variable bound to a tuple is a tuple target, which is refused below).
        body = fn.body
        outputs = list(body.fields) if isinstance(body, Tuple) else [body]
        i = self.target_index
        if isinstance(i, bool) or not isinstance(i, int):
            raise TypeError(f"Gradient: target_index must be an int, got {i!r}")
        if not 0 <= i < len(outputs):
            hint = (" (as in Relax, target_index picks a field of a returned tuple expression `return (a, b)`, "
                    "not of a variable bound to a tuple)") if isinstance(body.type, TupleType) else ""
            raise ValueError(f"Gradient: target_index {i} is out of range; {self.func_name} returns "
                             f"{len(outputs)} value(s){hint}")
        target = outputs[i]
        t = target.type
        if not (isinstance(t, ir.TensorType) and t.shape == () and t.is_float):
            hint = (": a variable bound to a tuple is a tuple target, as in Relax; return the tuple expression "
                    "`return (a, b)` and choose a field with target_index") if isinstance(target, Var) and \
                isinstance(t, TupleType) else ""
            raise ValueError(f"Gradient: the target (return value {i}) must be a floating-point scalar, "
                             f"got {t}{hint}")
        if not isinstance(target, (Var, ir.Constant)):
            raise ValueError(f"Gradient: the target (return value {i}) must be a variable, got {target!r}")
        return target  # a constant target depends on nothing: every gradient is zero

    def _require(self, fn: Function) -> list[Var]:
        req = self.require_grads
        if req is None:
            return [p for p in fn.params if _is_float(p.type)]
        req = [req] if isinstance(req, Var) else list(req)
        known = set(fn.params) | {b.var for b in fn.blocks[0].bindings}
        seen = set()
        for v in req:
            if not isinstance(v, Var) or v not in known:
                raise ValueError(f"Gradient: require_grads entry {v!r} is not a parameter or variable of "
                                 f"{self.func_name}")
            if v in seen:
                raise ValueError(f"Gradient: require_grads lists {v.name} twice")
            seen.add(v)
            if not _is_float(v.type):
                raise TypeError(f"Gradient: cannot differentiate with respect to {v.name} of type {v.type}: "
                                "only floating-point values have gradients")
        return req


def _is_float(t) -> bool:
    if isinstance(t, TupleType):
        return len(t.fields) > 0 and all(_is_float(f) for f in t.fields)
    return t.is_float


def _carries_gradient(t) -> bool:
    """A value gradients can flow through: a float tensor, or a tuple with one somewhere inside."""
    if isinstance(t, TupleType):
        return any(_carries_gradient(f) for f in t.fields)
    return t.is_float


class _AdjointBuilder:
    def __init__(self, fn: Function, target: Expr, require: list[Var]):
        self.fn, self.require = fn, require
        self.b = Builder()
        # Fresh vars for the adjoint function; forward bindings are repeated under them.
        names = assign_names(fn)  # adjoints are named after the printed forward names: lv1 -> lv1_adjoint
        self.new: dict[Var, Var] = {p: Var(names[p], p.type) for p in fn.params}
        for bd in fn.blocks[0].bindings:
            var = Var(names[bd.var], bd.var.type, bd.var.loc)
            self.b.bindings.append(Binding(var, substitute(bd.value, self.new)))
            self.new[bd.var] = var
        self.target = self.new.get(target) if isinstance(target, Var) else None  # None: a constant
        self.forward = list(self.b.bindings)
        self.defs = {bd.var: bd.value for bd in self.forward}
        self.interior = checkpoint_interior(self.forward)
        # A region output is kept through its end marker: reading that copy needs no recomputation.
        self.recomputed: dict[Var, Var] = {
            bd.value.args[0]: bd.var for bd in self.forward
            if isinstance(bd.value, Call) and bd.value.op == "grad.end_checkpoint"}
        self.adj: dict[Var, list] = {}
        self.fresh: set[Var] = set()  # vars the rules emitted (named "lv" until they become an adjoint)
        self.needed = self._needed()

    def _needed(self) -> set[Var]:
        """Vars whose adjoint matters: on a path from a required var to the target."""
        wanted = {self.new[v] for v in self.require}
        depends = set(wanted)
        for bd in self.forward:
            # integer and boolean values are piecewise constant: no gradient flows through them
            if (_carries_gradient(bd.var.type) and not _blocks_gradient(bd.value)
                    and any(u in depends for u in free_vars(bd.value))):
                depends.add(bd.var)
        if self.target not in depends:
            return set()
        reach = {self.target}
        for bd in reversed(self.forward):
            if bd.var in reach and bd.var in depends and not _blocks_gradient(bd.value):
                reach.update(u for u in free_vars(bd.value) if u in depends)
        missing = sorted({bd.value.op for bd in self.forward if bd.var in reach and isinstance(bd.value, Call)
                          and get_op(bd.value.op).differentiable and bd.value.op not in VJPS})
        if missing:
            raise ValueError(f"Gradient: no VJP rule for op(s) {', '.join(missing)} on the path to the target")
        return reach

    def build(self) -> Function:
        b = self.b
        if self.needed:
            self._contribute(self.target, b.call("ones", shape=(), dtype=self.target.type.dtype,
                                                 name=f"{self.target.name}_adjoint"))
        for bd in reversed(self.forward):
            if bd.var in self.needed and bd.var in self.adj:
                start = len(b.bindings)
                self._backward(bd)
                mark_derived(b.bindings[start:], bd.var, "gradient")  # they point at the line they differentiate
        grads = []
        for v in self.require:
            g = self._materialize(self.new[v]) if self.new[v] in self.adj else None
            grads.append(g if g is not None else b.zeros(v.type, name=f"{v.name}_adjoint"))
        mark_derived(b.bindings[len(self.forward):], self.target, "gradient")  # the seed and the zeros
        body = Tuple([substitute(self.fn.body, self.new), Tuple(grads)])
        params = [self.new[p] for p in self.fn.params]
        return Function(params, [ir.Block(b.bindings)], body)

    # ---------------------------------------------------------------- adjoint bookkeeping
    def _contribute(self, var: Expr, g) -> None:
        """Add gradient g (an expr, or for tuple values a list per field) to var's adjoint."""
        if isinstance(var, Tuple):  # an inline tuple argument: one gradient per field
            for field, gf in zip(var.fields, self._split(var, g), strict=True):
                if gf is not None:
                    self._contribute(field, gf)
            return
        if isinstance(var, TupleGetItem):  # an inline tuple field (`R.multiply(lv[0], y)`): to its tuple
            fields = [None] * len(var.tuple_value.type.fields)
            fields[var.index] = self._unbroadcast(var, g)
            self._contribute(var.tuple_value, fields)
            return
        if not isinstance(var, Var) or var not in self.needed:
            return
        if isinstance(var.type, TupleType):
            slots = self.adj.setdefault(var, [[] for _ in var.type.fields])
            for i, (ftype, gf) in enumerate(zip(var.type.fields, self._split(var, g), strict=True)):
                if gf is not None:
                    slots[i].append(self._as_expr(ftype, gf))
            return
        self.adj.setdefault(var, []).append(self._unbroadcast(var, g))

    def _unbroadcast(self, var: Expr, g):
        """A rule's gradient summed back to var's own shape (a broadcast argument's gradient is wider)."""
        if isinstance(var.type, TupleType) or g.type.shape == var.type.shape:
            return g
        g = self.b.call("collapse_sum_to", g, shape=var.type.shape)
        self.fresh.add(g)
        return g

    def _as_expr(self, t, g) -> Expr:
        """A gradient given as a list per field (a nested tuple field's) as one expr, zeros where None."""
        if not isinstance(g, list):
            return g
        return Tuple(self.b.zeros(ft) if gf is None else self._as_expr(ft, gf)
                     for ft, gf in zip(t.fields, g, strict=True))

    def _split(self, var: Expr, g) -> list:
        if isinstance(g, (list, tuple)):
            return list(g)
        if isinstance(g, Tuple):
            return list(g.fields)
        return [self.b.get_item(g, i) for i in range(len(var.type.fields))]

    def _materialize(self, var: Var):
        """var's total adjoint as one expr (tuple values: a Tuple with zeros for missing fields)."""
        entry = self.adj.get(var)
        if entry is None:
            return None
        name = f"{var.name}_adjoint"
        if isinstance(var.type, TupleType):
            fields = []
            for ftype, contribs in zip(var.type.fields, entry, strict=True):
                fields.append(self._sum(contribs, name) if contribs else self.b.zeros(ftype, name))
            return Tuple(fields)
        total = self._sum(entry, name)
        if len(entry) == 1 and total in self.fresh and total.name == "lv":
            total.name = name  # readable text: lv1's gradient prints as lv1_adjoint, as in Relax
        self.adj[var] = [total]
        return total

    def _sum(self, contribs: list, name: str):
        if len(contribs) > 1 and isinstance(contribs[0].type, TupleType):  # field by field
            return Tuple(self._sum([c.fields[i] if isinstance(c, Tuple) else self.b.get_item(c, i)
                                    for c in contribs], name) for i in range(len(contribs[0].type.fields)))
        total = contribs[0]
        for i, c in enumerate(contribs[1:], start=2):
            total = self.b.call("add", total, c, name=name if i == len(contribs) else "lv")
        return total

    # ---------------------------------------------------------------- one backward step
    def _backward(self, bd: Binding) -> None:
        g = self._materialize(bd.var)
        value = bd.value
        if isinstance(value, Var):
            self._contribute(value, g)
        elif isinstance(value, TupleGetItem):
            self._contribute(value, g)
        elif isinstance(value, Tuple):
            for field, gf in zip(value.fields, self._split(value, g), strict=True):
                self._contribute(field, gf)
        elif isinstance(value, Call):
            if not get_op(value.op).differentiable:
                return
            rule_builder = Builder()
            grads = VJPS[value.op](rule_builder, value, bd.var, g)
            self._emit_with_recompute(rule_builder.bindings)
            self.fresh.update(b.var for b in rule_builder.bindings)
            for arg, ga in zip(value.args, grads, strict=True):
                if isinstance(ga, Var) and ga in self.interior:
                    ga = self._recompute(ga)
                if ga is not None:
                    self._contribute(arg, ga)

    def _emit_with_recompute(self, bindings: list[Binding]) -> None:
        """Append a rule's bindings, recomputing any checkpointed forward value they read."""
        for bd in bindings:
            mapping = {u: self._recompute(u) for u in free_vars(bd.value) if u in self.interior}
            self.b.bindings.append(Binding(bd.var, substitute(bd.value, mapping) if mapping else bd.value))

    def _recompute(self, var: Var) -> Var:
        hit = self.recomputed.get(var)
        if hit is None:
            value = self.defs[var]
            mapping = {u: self._recompute(u) for u in free_vars(value) if u in self.interior}
            hit = self.b.emit(substitute(value, mapping), name=var.name)
            mark_derived(self.b.bindings[-1:], var, "recompute")
            self.recomputed[var] = hit
        return hit


def _blocks_gradient(value: Expr) -> bool:
    return isinstance(value, Call) and not get_op(value.op).differentiable
