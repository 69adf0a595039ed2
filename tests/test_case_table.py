"""The op registry and the case table that tests it.

Coverage is what the rows do, not what they say: every case is traced (as the forward tests trace it)
and every `grad=True` case is differentiated (as the finite-difference test differentiates it) while
the VJP rules that run are recorded. Every op needs a row whose trace emits it, and every
differentiable op a finite-difference row whose gradient runs through its rule. Rows must also check
something that can differ: no all-dropped dropout masks, no `where` conditions of one value.
"""
import dataclasses
import functools

import numpy as np
import pytest

import ir
import tracer
from autodiff import Gradient
from autodiff.rules import VJPS
from ir.nodes import Call
from tests.autodiff.test_vjp_cases import scalarized
from tests.cases import all_cases

CASES = all_cases()
# ops no row can reach, each with the reason (none at present: add one only with a reason a reviewer accepts)
NO_ROW: dict[str, str] = {
    "fused": "made by ir.transform.FuseElementwise, never traced; tests/ir/test_fuse.py runs it on every row",
}


def _as64(a):
    return a.astype("float64") if a.dtype.kind == "f" else a


def traced_ops(case, inputs) -> set[str]:
    mod = tracer.trace(lambda *xs: case.fn(*xs, **case.kwargs), *inputs)
    return {bd.value.op for f in mod.values() for bd in f.bindings if isinstance(bd.value, Call)}


def rules_run(case) -> set[str]:
    """The ops whose VJP rule runs when the finite-difference test differentiates this case."""
    inputs = [_as64(a) for a in case.inputs]
    mod = tracer.trace(scalarized(case, inputs), *inputs)
    ran: set[str] = set()
    saved = dict(VJPS)
    VJPS.update({name: _recording(name, rule, ran) for name, rule in saved.items()})
    try:
        Gradient("main", require_grads=[p for p in mod["main"].params if p.type.is_float])(mod)
    finally:
        VJPS.update(saved)
    return ran


def _recording(name, rule, ran):
    def recorded(*args):
        ran.add(name)
        return rule(*args)
    return recorded


@functools.cache
def coverage() -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """op -> names of the rows whose trace emits it; op -> names of the grad rows that run its VJP rule."""
    traced: dict[str, list[str]] = {}
    differentiated: dict[str, list[str]] = {}
    for case in CASES:
        for op in traced_ops(case, case.inputs):
            traced.setdefault(op, []).append(case.name)
        if case.grad:
            for op in rules_run(case):
                differentiated.setdefault(op, []).append(case.name)
    return traced, differentiated


def _ops():
    return {name: op for name, op in ir.OPS.items() if not name.startswith("test.")}


def test_every_op_has_inference_a_kernel_and_a_rule():
    for name, op in _ops().items():
        assert callable(op.infer) and callable(op.kernel), name
        if op.differentiable:
            assert name in VJPS, f"{name} is differentiable but has no VJP rule (or mark differentiable=False)"
            doc = (VJPS[name].__doc__ or "").strip().splitlines()
            assert len(doc) == 2 and doc[0].startswith("Forward:") and doc[1].strip().startswith("Backward:"), \
                f"VJP rule of {name} needs a two-line Forward/Backward docstring"
    for name in VJPS:
        assert name in ir.OPS, f"VJP rule for unknown op {name}"
        assert ir.OPS[name].differentiable, f"{name} is marked non-differentiable but has a VJP rule"


def test_every_op_has_a_row_that_traces_it():
    traced, _ = coverage()
    missing = sorted(set(_ops()) - set(traced) - set(NO_ROW))
    assert not missing, f"no row in tests/cases traces {missing}"


def test_every_differentiable_op_has_a_finite_difference_row():
    _, differentiated = coverage()
    needed = {name for name, op in _ops().items() if op.differentiable}
    missing = sorted(needed - set(differentiated) - set(NO_ROW))
    assert not missing, f"no grad=True row in tests/cases runs the VJP rule of {missing}"


def test_no_row_lists_are_current():
    traced, _ = coverage()
    for name in NO_ROW:
        assert name in ir.OPS and name not in traced, f"{name} is exempt from coverage but needs no exemption"


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_claimed_ops_are_traced(case):
    missing = set(case.ops) - traced_ops(case, case.inputs)
    assert not missing, f"{case.name} claims ops={sorted(missing)} that its trace does not emit"


def test_rules_run_sees_what_is_differentiated():
    """The recorder itself: a row through exp and a constant-only cast reports exp but not the cast."""
    case = dataclasses.replace(CASES[0], fn=lambda x: tracer.exp(x) + tracer.astype(tracer.tensor(1), "float64"),
                               inputs=[np.ones(2, "float32")], kwargs={})
    ran = rules_run(case)
    assert "exp" in ran and "astype" not in ran


# ---------------------------------------------------------------- rows check something that can differ

def _record_kernels(monkeypatch, names):
    seen: list[tuple[str, tuple, object]] = []
    for name in names:
        op = ir.OPS[name]

        def kernel(xp, *args, _name=name, _inner=op.kernel, **attrs):
            out = _inner(xp, *args, **attrs)
            seen.append((_name, args, out, attrs))
            return out
        monkeypatch.setitem(ir.OPS, name, dataclasses.replace(op, kernel=kernel))
    return seen


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_rows_are_not_degenerate(case, monkeypatch):
    seen = _record_kernels(monkeypatch, ["where", "nn.dropout"])
    mod = tracer.trace(lambda *xs: case.fn(*xs, **case.kwargs), *case.inputs)
    ir.Executor(mod)["main"](*case.inputs)
    for name, args, out, attrs in seen:
        if name == "where":
            cond = np.broadcast_to(np.asarray(args[0]), np.shape(out))
            assert cond.any() and not cond.all(), f"{case.name}: where's condition is all {bool(cond.flat[0])}"
        elif 0 < attrs["rate"] < 1:
            kept = np.asarray(out) != 0
            assert kept.any() and not kept.all(), f"{case.name}: dropout keeps {kept.sum()} of {kept.size}"
