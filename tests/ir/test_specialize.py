"""Specialized kernels (ir.runtime.specialize) compute bit for bit what the generic kernels compute, on
every op-table row, forward and through the cleaned-up adjoint, and on the values where a careless
rewrite differs (signed zeros, NaN, empty and 0-d arrays, both `where` paths)."""
import numpy as np
import pytest

import ir
import tracer
from autodiff import Gradient
from ir.runtime.instructions import SPEC
from tests.autodiff.test_vjp_cases import CASES as GRAD_CASES
from tests.autodiff.test_vjp_cases import scalarized
from tests.cases import all_cases

CASES = all_cases()


def _run(mod, name, args, specialize: bool):
    ex = ir.Executor(mod, check_types=True)
    ex.specialize_kernels = specialize
    return ex[name](*args), ex[name]


def _flat(out):
    if isinstance(out, tuple | list):
        return [a for o in out for a in _flat(o)]
    return [np.asarray(out)]


def _same_bits(got, want):
    for g, w in zip(_flat(got), _flat(want), strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape
        assert np.ascontiguousarray(g).tobytes() == np.ascontiguousarray(w).tobytes()


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_forward_case_specialized_equals_generic(case):
    mod = tracer.trace(lambda *xs: case.fn(*xs, **case.kwargs), *case.inputs)
    want, _ = _run(mod, "main", case.inputs, False)
    got, _ = _run(mod, "main", case.inputs, True)
    _same_bits(got, want)


@pytest.mark.parametrize("case", GRAD_CASES, ids=[c.name for c in GRAD_CASES])
def test_adjoint_case_specialized_equals_generic(case):
    inputs = [a.astype("float32") if a.dtype.kind == "f" else a for a in case.inputs]
    mod = tracer.trace(scalarized(case, inputs), *inputs)
    params = [p for p in mod["main"].params if p.type.is_float]
    mod = ir.transform.cleanup()(Gradient("main", require_grads=params)(mod))
    want, _ = _run(mod, "main_adjoint", inputs, False)
    got, _ = _run(mod, "main_adjoint", inputs, True)
    _same_bits(got, want)


EDGE = np.array([-0.0, 0.0, np.nan, -np.inf, np.inf, -1.5, 2.5, 1e-45], "float32")


@pytest.mark.parametrize("fn", [
    tracer.relu, lambda x: -x, lambda x: x.sum(), lambda x: x.mean(), lambda x: x.max(),
    lambda x: tracer.maximum(x, tracer.zeros_like(x)), lambda x: tracer.softmax(x.reshape(2, 4)),
    lambda x: tracer.log_softmax(x.reshape(4, 2), axis=0), lambda x: x.reshape(2, 4).T,
    lambda x: tracer.where(x > 0, x, x * 2)], ids=["relu", "neg", "sum", "mean", "max", "maximum", "softmax",
                                                   "log_softmax", "T", "where"])
def test_signed_zeros_nan_and_infinities_as_the_kernels(fn):
    mod = tracer.trace(fn, EDGE)
    with np.errstate(all="ignore"):
        want, _ = _run(mod, "main", [EDGE], False)
        got, compiled = _run(mod, "main", [EDGE], True)
    assert any(kind == SPEC for kind, *_ in compiled.instrs)  # the specialized path ran
    _same_bits(got, want)


@pytest.mark.parametrize("n", [100, 5000])  # both sides of where's size switch
def test_where_both_paths(n):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(n).astype("float32")
    x[::7] = -0.0
    mod = tracer.trace(lambda x: tracer.where(x <= 0, tracer.zeros_like(x), x * 3), x)
    _same_bits(_run(mod, "main", [x], True)[0], _run(mod, "main", [x], False)[0])


def test_reductions_over_0d_empty_and_inner_axes():
    z = np.array(3.5, "float32")
    for fn, x in [(lambda x: x.sum(), z), (lambda x: x.mean(), z),
                  (lambda x: x.sum(axis=1), np.zeros((3, 0), "float32")),
                  (lambda x: x.mean(axis=(0, 2), keepdims=True), np.arange(24, dtype="float64").reshape(2, 3, 4))]:
        mod = tracer.trace(fn, x)
        _same_bits(_run(mod, "main", [x], True)[0], _run(mod, "main", [x], False)[0])


def test_integer_and_half_reductions_keep_the_generic_kernel():
    for dtype in ("int32", "float16"):
        x = np.arange(6).astype(dtype)
        mod = tracer.trace(lambda x: x.sum(), x)
        _, compiled = _run(mod, "main", [x], True)
        assert [kind for kind, *_ in compiled.instrs] != [SPEC]


def test_the_generated_step_calls_specialized_kernels_without_the_array_module():
    mod = tracer.trace(lambda x: (x.reshape(2, 3).T * 2).sum(axis=0), np.ones(6, "float32"))
    _, compiled = _run(mod, "main", [np.ones(6, "float32")], True)
    src = compiled.source
    assert "xp" not in src.split("\n", 1)[1]  # every op specialized: no kernel takes the array module
