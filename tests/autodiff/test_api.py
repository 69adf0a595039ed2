"""grad / value_and_grad / gradcheck: structures, caching and replay, captured weights, errors."""
import numpy as np
import pytest

import autodiff
import tracer
from autodiff import api


def weights():
    rng = np.random.default_rng(0)
    return tracer.tensor(rng.normal(size=(3, 2)).astype("float32")), tracer.tensor(np.zeros(2, "float32"))


def loss_fn(w, b):
    return lambda x: tracer.tanh(x @ w + b).sum()


def reference(w, b, x):
    dt = 1 - np.tanh(x @ w.numpy() + b.numpy()) ** 2
    return x.T @ dt, dt.sum(0)


X = np.random.default_rng(1).normal(size=(4, 3)).astype("float32")


@pytest.mark.parametrize("kind", ["tensor", "list", "tuple", "dict"])
def test_gradients_come_back_in_the_structure_of_wrt(kind):
    w, b = weights()
    wrt = {"tensor": w, "list": [w, b], "tuple": (w, b), "dict": {"w": w, "b": b}}[kind]
    g = autodiff.grad(loss_fn(w, b), wrt=wrt)(X)
    gw, gb = reference(w, b, X)
    if kind == "tensor":
        np.testing.assert_allclose(g.numpy(), gw, rtol=1e-5)
    elif kind == "dict":
        assert set(g) == {"w", "b"}
        np.testing.assert_allclose(g["b"].numpy(), gb, rtol=1e-5)
    else:
        assert type(g) is (list if kind == "list" else tuple)
        np.testing.assert_allclose(g[0].numpy(), gw, rtol=1e-5)
        np.testing.assert_allclose(g[1].numpy(), gb, rtol=1e-5)


def test_wrt_an_argument_by_identity():
    x = tracer.tensor(X)
    w, b = weights()
    value, gx = autodiff.value_and_grad(lambda x: loss_fn(w, b)(x), wrt=x)(x)
    dt = 1 - np.tanh(X @ w.numpy()) ** 2
    np.testing.assert_allclose(gx.numpy(), dt @ w.numpy().T, rtol=1e-5)
    np.testing.assert_allclose(value.item(), np.tanh(X @ w.numpy()).sum(), rtol=1e-5)


def test_compiled_once_per_signature_and_sees_in_place_updates(monkeypatch):
    w, b = weights()
    calls = []
    real = api.trace_function
    monkeypatch.setattr(api, "trace_function", lambda *a, **k: calls.append(1) or real(*a, **k))
    step = autodiff.value_and_grad(loss_fn(w, b), wrt=[w, b])
    step(X)
    w._data -= 0.5  # an optimizer's in-place update
    _, (gw, _) = step(X)
    np.testing.assert_allclose(gw.numpy(), reference(w, b, X)[0], rtol=1e-5)
    assert len(calls) == 1
    step(X[:2])  # a new shape retraces
    assert len(calls) == 2
    step(X[:2].astype("float64"))  # a new dtype too
    assert len(calls) == 3
    step(X)
    assert len(calls) == 3


def test_has_aux():
    w, b = weights()

    def f(x):
        h = x @ w
        return h.sum(), (h, h * 2.0)
    (value, (h, h2)), g = autodiff.value_and_grad(f, wrt=[w], has_aux=True)(X)
    np.testing.assert_allclose(h.numpy(), X @ w.numpy(), rtol=1e-6)
    np.testing.assert_allclose(h2.numpy(), 2 * X @ w.numpy(), rtol=1e-6)
    np.testing.assert_allclose(g[0].numpy(), np.repeat(X.sum(0)[:, None], 2, 1), rtol=1e-5)
    g2, aux = autodiff.grad(f, wrt=[w], has_aux=True)(X)
    assert isinstance(aux, tuple) and len(g2) == 1


def test_unused_wrt_is_none_if_reachable_else_an_error():
    w, b = weights()
    unused = tracer.tensor(np.ones((5,), "float32"))
    # not read and not reachable from fn: not what fn computes with (was a silent zero gradient)
    with pytest.raises(ValueError, match=r"wrt\[1\] \(shape \(5,\), float32\): neither read by fn nor reachable"):
        autodiff.grad(loss_fn(w, b), wrt=[w, unused])(X)
    # reachable (an argument fn ignores): None, as torch leaves an unused parameter's .grad None
    g = autodiff.grad(lambda x, spare: loss_fn(w, b)(x), wrt=[w, unused])(X, unused)
    assert g[1] is None and g[0].shape == (3, 2)


def test_errors():
    w, b = weights()
    with pytest.raises(TypeError, match="must return a floating-point scalar.*got R.Tensor\\(\\(4, 2\\)"):
        autodiff.grad(lambda x: x @ w, wrt=[w])(X)
    with pytest.raises(TypeError, match="only floating-point tensors have gradients"):
        autodiff.grad(lambda x: x.sum(), wrt=[tracer.tensor([1, 2])])
    with pytest.raises(TypeError, match="wrt\\[0\\] must be a Tensor"):
        autodiff.grad(lambda x: x.sum(), wrt=[np.ones(2)])
    with pytest.raises(TypeError, match="has_aux=True: fn must return a pair"):
        autodiff.grad(lambda x: (x @ w).sum(), wrt=[w], has_aux=True)(X)


def test_gradcheck_passes_and_reports_failures():
    assert autodiff.gradcheck(lambda x, y: (tracer.sin(x) * y).sum(), tracer.tensor([0.3, 0.5]),
                              tracer.tensor([1.0, 2.0])) is True
    assert autodiff.gradcheck(lambda x: tracer.exp(x), tracer.tensor([[0.1, 0.2]])) is True  # non-scalar output

    from autodiff.rules import VJPS
    original = VJPS["sin"]
    VJPS["sin"] = lambda b, call, out, g: [b.call("multiply", g, out)]  # wrong on purpose
    try:
        with pytest.raises(AssertionError, match="argument 0 .* disagrees at index .*Gradient pass.*finite"):
            autodiff.gradcheck(lambda x: tracer.sin(x).sum(), tracer.tensor([0.3, 0.5]))
    finally:
        VJPS["sin"] = original


def test_guarded_python_state_retraces_once_per_value(monkeypatch):
    calls = []
    real = api.trace_function
    monkeypatch.setattr(api, "trace_function", lambda *a, **k: calls.append(1) or real(*a, **k))
    w = tracer.tensor(np.ones(3, "float32"))
    mode = {"double": False}

    def f(x):
        scale = 2.0 if tracer.guard(lambda: mode["double"]) else 1.0
        return (x * w * scale).sum()
    step = autodiff.grad(f, wrt=[w])
    x = np.ones(3, "float32")
    assert step(x)[0].numpy().tolist() == [1.0, 1.0, 1.0]
    mode["double"] = True
    assert step(x)[0].numpy().tolist() == [2.0, 2.0, 2.0]
    mode["double"] = False
    assert step(x)[0].numpy().tolist() == [1.0, 1.0, 1.0]
    assert len(calls) == 2  # one trace per guarded value, then replays


def test_module_and_stats_of_the_last_call():
    w, b = weights()
    step = autodiff.value_and_grad(loss_fn(w, b), wrt=[w])
    with pytest.raises(RuntimeError, match="no call yet"):
        _ = step.stats
    step(X)
    assert "main_adjoint" in step.module and step.stats.peak_bytes > 0
    assert step.stats.op_counts["tanh"] == 1
