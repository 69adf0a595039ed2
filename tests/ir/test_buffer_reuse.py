"""Buffer reuse: results written into dying operands' buffers; same values, never more bytes."""
import numpy as np
import pytest

import ir
import tracer
from autodiff import Gradient
from ir.runtime.memory import estimate_peak_bytes
from ir.runtime.reuse import plan_reuse
from tests.cases import all_cases

CASES = [c for c in all_cases() if not any("random" in op for op in c.ops)]


def _executor(mod, reuse):
    ex = ir.Executor(mod)
    ex.reuse_buffers = reuse
    return ex


def _same(a, b):
    if isinstance(a, tuple):
        for x, y in zip(a, b, strict=True):
            _same(x, y)
        return
    assert a.shape == b.shape and a.dtype == b.dtype
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_op_case_same_values_and_no_more_bytes(case):
    mod = tracer.trace(lambda *xs: case.fn(*xs, **case.kwargs), *case.inputs)
    if case.grad and isinstance(mod["main"].body.type, ir.TensorType) and mod["main"].body.type.is_float:
        scalar = tracer.trace(lambda *xs: (tracer.exp(case.fn(*xs, **case.kwargs)) * 1.5).sum(), *case.inputs)
        floats = [p for p in scalar["main"].params if p.type.is_float]
        mod = ir.transform.cleanup()(Gradient("main", require_grads=floats)(scalar))
    for name in mod.keys():
        inputs = [a.copy() for a in case.inputs]
        on, off = _executor(mod, True), _executor(mod, False)
        got, want = on[name](*inputs), off[name](*inputs)
        _same(got, want)
        assert on.stats.peak_bytes <= off.stats.peak_bytes
        for a, b in zip(inputs, case.inputs, strict=True):
            np.testing.assert_array_equal(a, b)  # arguments are never written


def test_a_chain_holds_one_buffer():
    mod = tracer.trace(lambda x: tracer.tanh(tracer.exp(-x) * 2.0 + 1.0) + x, tracer.spec((1024,)))
    x = np.linspace(-1, 1, 1024, dtype="float32")
    on, off = _executor(mod, True), _executor(mod, False)
    np.testing.assert_array_equal(on["main"](x), np.tanh(np.exp(-x) * np.float32(2.0) + np.float32(1.0)) + x)
    off["main"](x)
    assert on.stats.peak_bytes == 4096 * 2 + 8  # x, one working buffer, the two constants
    assert off.stats.peak_bytes == 4096 * 3 + 8
    on["main"](x)  # the generated function reuses too
    assert on.stats.peak_bytes == 4096 * 2 + 8
    assert "out=v" in on["main"].source
    assert estimate_peak_bytes(mod["main"]) == on.stats.peak_bytes


def test_a_buffer_with_a_live_view_or_returned_is_not_reused():
    def f(x):
        a = tracer.exp(x)
        v = tracer.reshape(a, (2, 2))  # a view of a's buffer, returned
        return a * 2.0, v
    mod = tracer.trace(f, tracer.spec((4,)))
    assert plan_reuse(mod["main"]) == {}
    x = np.arange(4, dtype="float32")
    for _ in range(2):
        b, v = ir.Executor(mod)["main"](x)
        np.testing.assert_allclose(v.ravel(), np.exp(x), rtol=1e-6)
        np.testing.assert_allclose(b, 2 * np.exp(x), rtol=1e-6)


def test_arguments_and_bool_results_are_never_targets():
    mod = tracer.trace(lambda x, y: (tracer.exp(x) + y) > 0.0, tracer.spec((3,)), tracer.spec((3,)))
    plan = plan_reuse(mod["main"])
    assert all(var.name not in ("x", "y") for _, var in plan.values())
    assert [name for name, _ in plan.values()] == ["add"]
