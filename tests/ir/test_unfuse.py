"""Unfuse expands `fused` bindings back into their chains, and the Gradient pass runs it first, so
a module holding fused bindings (a cleaned adjoint, a grad inside a traced function) differentiates
again: grad of grad with fusion on equals fusion off and finite differences on the op table's
elementwise rows."""
import numpy as np
import pytest

import autodiff
import autodiff.gradient as gradient_mod
import ir
import tracer
from autodiff import Gradient
from ir.transform import Unfuse
from ir.transform.fuse import ELEMENTWISE, FuseElementwise, fusion
from ir.transform.unfuse import has_fused
from tests.autodiff.test_second_order import SECOND
from tests.autodiff.test_second_order import test_every_rule_is_differentiable_again as second_order_case

FUSE = FuseElementwise(force=True)
ELEMENTWISE_ROWS = [c for c in SECOND if set(c.ops) & ELEMENTWISE]


def _ops(fn):
    return [b.value.op for b in fn.bindings if isinstance(b.value, ir.Call)]


def _chain(x, y):
    z = tracer.tanh(x * 0.5 + y) * tracer.exp(-x)
    return tracer.where(z > 0.0, z, z * 0.1).sum()


def test_unfuse_restores_the_chain_and_its_values():
    args = [np.linspace(-2, 2, 12, dtype="float64").reshape(3, 4), np.linspace(1, 0, 4, dtype="float64")]
    mod = tracer.trace(_chain, *args)
    fused = FUSE(mod)
    assert "fused" in _ops(fused["main"])
    back = Unfuse()(fused)
    ir.verify(back)
    assert not has_fused(back["main"]) and has_fused(fused["main"])
    assert sorted(_ops(back["main"])) == sorted(_ops(mod["main"]))
    assert ir.structural_equal(ir.parse(str(back)), back)
    np.testing.assert_array_equal(ir.Executor(back)["main"](*args), ir.Executor(mod)["main"](*args))
    assert Unfuse()(mod)["main"] is mod["main"]  # nothing fused: the very same function


def test_gradient_of_a_module_with_fused_bindings_equals_the_unfused_gradient():
    args = [np.linspace(-2, 2, 12, dtype="float64").reshape(3, 4), np.linspace(1, 0, 4, dtype="float64")]
    mod = tracer.trace(_chain, *args)
    want = ir.Executor(Gradient("main")(mod))["main_adjoint"](*args)
    fused = FUSE(mod)
    adjoint = Gradient("main")(fused)
    assert not has_fused(adjoint["main_adjoint"])
    got = ir.Executor(adjoint)["main_adjoint"](*args)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-12)
    for g, w in zip(got[1], want[1], strict=True):
        assert np.any(g != 0)  # a fused op would block the gradient (zeros) if it were not expanded
        np.testing.assert_allclose(g, w, rtol=1e-12)


def test_grad_of_grad_through_fused_inner_adjoint():
    def derivative(f):
        return lambda t: autodiff.grad(lambda u: f(u).sum(), wrt=t)(t)

    def f(y):
        return tracer.tanh(y * 2.0 + 1.0) * y
    x = np.linspace(-1, 1, 64)
    with fusion(True):
        inner = tracer.trace(derivative(f), tracer.spec((64,), "float64"))
        assert "fused" in _ops(inner["main"])  # the recorded inner adjoint holds fused chains
        got = derivative(derivative(f))(tracer.tensor(x)).numpy()
    with fusion(False):
        want = derivative(derivative(f))(tracer.tensor(x)).numpy()
    t = np.tanh(2 * x + 1)
    np.testing.assert_allclose(want, 4 * (1 - t * t) - 8 * x * t * (1 - t * t), rtol=1e-10)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)


def _hvp(case):
    """A directional second derivative of the row (as tests/autodiff/test_second_order.py builds it)."""
    inputs = [np.asarray(a).astype("float64") if np.asarray(a).dtype.kind == "f" else np.asarray(a)
              for a in case.inputs]
    floats = [i for i, a in enumerate(inputs) if a.dtype.kind == "f"]
    rng = np.random.default_rng(2)
    directions = {i: rng.normal(size=inputs[i].shape) for i in floats}

    def first(*xs):
        out = case.fn(*xs, **case.kwargs)
        outs = list(out) if isinstance(out, tuple | list) else [out]
        return sum((tracer.astype(o, "float64") ** 2.0).sum() for o in outs)

    def directional(*xs):
        grads = autodiff.grad(first, wrt=[xs[i] for i in floats])(*xs)
        return sum((g * tracer.tensor(directions[i])).sum() for g, i in zip(grads, floats, strict=True))
    tensors = [tracer.tensor(a) for a in inputs]
    return [h.numpy() for h in autodiff.grad(directional, wrt=[tensors[i] for i in floats])(*tensors)]


@pytest.mark.parametrize("case", ELEMENTWISE_ROWS, ids=[c.name for c in ELEMENTWISE_ROWS])
def test_grad_of_grad_with_fusion_on_equals_off_and_finite_differences(case, monkeypatch):
    seen = []

    def spy(fn):
        seen.append(has_fused(fn))
        return seen[-1]
    monkeypatch.setattr(gradient_mod, "has_fused", spy)
    with fusion(True):
        on = _hvp(case)
        second_order_case(case)  # against finite differences of the first derivative
    with fusion(False):
        off = _hvp(case)
    assert any(seen)  # the outer Gradient met (and expanded) fused bindings
    for a, b in zip(on, off, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
