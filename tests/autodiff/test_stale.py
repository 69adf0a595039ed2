"""A compiled step computes with the tensors the user's Python holds now (issue: stale values).

Each test is a scenario that used to replay stale values; the reference is an eager run, or a fresh
value_and_grad traced on the current state.
"""
import warnings

import numpy as np
import pytest

import autodiff
import nn
import tracer
from autodiff import TraceMismatchError

RNG = np.random.default_rng(0)
X = RNG.normal(size=(8, 2)).astype("float32")
Y = (X @ np.array([1.0, -2.0], "float32")).astype("float32")


def fresh_value_and_grad(fn, wrt, *args):
    return autodiff.value_and_grad(fn, wrt=wrt)(*args)


def test_manual_sgd_with_in_place_update_trains():
    w = tracer.tensor(np.zeros(2, "float32"))
    step = autodiff.value_and_grad(lambda x: ((x @ w - Y) ** 2).mean(), wrt=[w])
    losses = []
    for _ in range(4):
        loss, (g,) = step(X)
        before = w
        w -= 0.05 * g
        assert w is before
        losses.append(float(loss))
    assert losses[0] > losses[1] > losses[2] > losses[3]
    assert float(((tracer.tensor(X) @ w - Y) ** 2).mean()) < losses[-1]


def test_closure_variable_rebound_is_seen():
    w = tracer.tensor(np.zeros(2, "float32"))

    def loss(x):
        return ((x @ w - Y) ** 2).mean()

    step = autodiff.value_and_grad(loss, wrt=[])
    values = []
    for _ in range(3):
        value, _ = step(X)
        values.append(float(value))
        w = w + 0.5  # noqa: F841 - the closure cell now holds a new tensor
    expected = [float(((X @ np.full(2, 0.5 * i, "float32") - Y) ** 2).mean()) for i in range(3)]
    np.testing.assert_allclose(values, expected, rtol=1e-6)


W_GLOBAL = tracer.tensor(np.ones(2, "float32"))


def _global_loss(x):
    return (x @ W_GLOBAL).sum()


def test_global_rebound_is_seen_and_wrt_follows_identity():
    global W_GLOBAL
    old = W_GLOBAL
    step = autodiff.value_and_grad(_global_loss, wrt=[old])
    v1, (g1,) = step(X)
    W_GLOBAL = tracer.tensor(np.full(2, 3.0, "float32"))
    try:
        # fn no longer reads (nor reaches) the tensor asked about: an error naming it, not a silent zero
        with pytest.raises(ValueError, match=r"wrt\[0\] \(shape \(2,\), float32\): neither read by fn"):
            step(X)
        v2, (g2,) = autodiff.value_and_grad(_global_loss, wrt=[W_GLOBAL])(X)
        v3, _ = autodiff.value_and_grad(_global_loss, wrt=[])(X)
    finally:
        W_GLOBAL = old
    np.testing.assert_allclose(float(v2), 3 * float(v1), rtol=1e-5)
    np.testing.assert_allclose(float(v3), 3 * float(v1), rtol=1e-5)
    np.testing.assert_allclose(g1.numpy(), X.sum(0), rtol=1e-5)
    np.testing.assert_allclose(g2.numpy(), X.sum(0), rtol=1e-5)


def test_module_parameter_and_plain_attribute_rebound():
    m = nn.Linear(2, 1)
    m.shift = tracer.tensor(np.zeros(1, "float32"))

    class Wrap(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = m

        def forward(self, x):
            return (self.inner(x) + self.inner.shift).sum()

    model = Wrap()
    step = autodiff.value_and_grad(lambda x: model(x), wrt=model.parameters())
    values = autodiff.value_and_grad(lambda x: model(x), wrt=[])
    step(X)
    values(X)
    m.weight = nn.Parameter(np.full((1, 2), 2.0, "float32"))
    m.shift = tracer.tensor(np.full(1, 10.0, "float32"))
    value, _ = values(X)
    expected = float((X @ np.full(2, 2.0) + m.bias.numpy() + 10.0).sum())
    np.testing.assert_allclose(float(value), expected, rtol=1e-5)
    with pytest.raises(ValueError, match=r"wrt\[0\] \(inner.weight, shape \(1, 2\), float32\)"):
        step(X)  # the old weight, which fn no longer reads nor reaches
    fresh_value, fresh_grads = fresh_value_and_grad(lambda x: model(x), model.parameters(), X)
    np.testing.assert_allclose(fresh_grads[0].numpy(), X.sum(0)[None], rtol=1e-5)


def test_rebinding_to_another_shape_retraces():
    box = {"w": tracer.tensor(np.ones(2, "float32"))}
    step = autodiff.value_and_grad(lambda x: (x * box["w"]).sum(), wrt=[])
    step(X)
    box["w"] = tracer.tensor(np.ones((8, 2), "float32") * 2)
    value, _ = step(X)
    np.testing.assert_allclose(float(value), 2 * X.sum(), rtol=1e-5)


def test_container_items_and_length():
    layers = [tracer.tensor(np.ones(2, "float32"))]

    def fn(x):
        out = x
        for w in layers:
            out = out * w
        return out.sum()

    step = autodiff.value_and_grad(fn, wrt=[])
    step(X)
    layers[0] = tracer.tensor(np.full(2, 3.0, "float32"))
    np.testing.assert_allclose(float(step(X)[0]), 3 * X.sum(), rtol=1e-5)
    layers.append(tracer.tensor(np.full(2, 2.0, "float32")))  # one more factor: a new computation
    np.testing.assert_allclose(float(step(X)[0]), 6 * X.sum(), rtol=1e-5)


@pytest.mark.parametrize("fill", [1.0, 2.0])
def test_captured_numpy_array_is_a_snapshot_folded_or_not(fill):
    arr = np.full(2, fill, "float32")
    w = tracer.tensor(np.ones(2, "float32"))
    step = autodiff.value_and_grad(lambda x: (x * arr * w).sum(), wrt=[w])
    v1, (g1,) = step(X)
    arr[:] = 5.0
    v2, (g2,) = step(X)
    assert float(v1) == float(v2)
    np.testing.assert_array_equal(g1.numpy(), g2.numpy())


def test_tensor_copies_from_numpy_shares():
    a = np.ones(3, "float32")
    t, s = tracer.tensor(a), tracer.from_numpy(a)
    a[0] = 7.0
    assert t.numpy()[0] == 1.0 and s.numpy()[0] == 7.0
    s.numpy()[1] = 4.0
    assert a[1] == 4.0
    with pytest.raises(TypeError, match="from_numpy"):
        tracer.from_numpy([1.0, 2.0])


def test_dropout_masks_same_whether_first_call_traced():
    x = np.ones((4, 16), "float32")
    w = tracer.tensor(np.ones(16, "float32"))

    def fn(x):
        return (tracer.dropout(x * w, 0.5)).sum()

    tracer.manual_seed(0)
    eager = [float(fn(tracer.tensor(x))) for _ in range(3)]
    tracer.manual_seed(0)
    step = autodiff.value_and_grad(fn, wrt=[w])
    compiled = [float(step(x)[0]) for _ in range(3)]
    assert compiled == eager
    assert len(set(eager)) > 1


def test_python_number_arguments_are_inputs_not_one_trace_per_value():
    w = tracer.tensor(np.ones(2, "float32"))
    calls = []

    def fn(x, scale):
        calls.append(1)
        return (x @ w).sum() * scale

    step = autodiff.value_and_grad(fn, wrt=[w])
    for s in np.linspace(0.1, 2.0, 200):
        value, (g,) = step(X, float(s))
        np.testing.assert_allclose(float(value), float(X.sum() * s), rtol=1e-5)
        np.testing.assert_allclose(g.numpy(), X.sum(0) * s, rtol=1e-5)
    assert len(calls) == 1
    assert value.dtype == "float32"  # a Python number promotes weakly, as eagerly


def test_python_number_used_as_a_python_value_is_baked_per_value():
    w = tracer.tensor(np.ones(2, "float32"))

    def fn(x, n):
        out = x @ w
        for _ in range(n):
            out = out * 2.0
        return out.sum()

    step = autodiff.value_and_grad(fn, wrt=[w])
    for n in (1, 2, 3, 2):
        np.testing.assert_allclose(float(step(X, n)[0]), X.sum() * 2 ** n, rtol=1e-5)


def test_check_finds_a_baked_closure_number():
    w = tracer.tensor(np.ones(2, "float32"))
    cfg = {"scale": 1.0}
    step = autodiff.value_and_grad(lambda x: (x @ w).sum() * cfg["scale"], wrt=[w], check=True)
    step(X)
    step(X)  # unchanged: fine
    cfg["scale"] = 3.0
    with pytest.raises(TraceMismatchError, match="tracer.guard"):
        step(X)


def test_check_from_the_environment(monkeypatch):
    w = tracer.tensor(np.ones(2, "float32"))
    cfg = {"scale": 1.0}
    step = autodiff.value_and_grad(lambda x: (x @ w).sum() * cfg["scale"], wrt=[w])
    step(X)
    cfg["scale"] = 2.0
    step(X)  # without check: baked, as documented
    monkeypatch.setenv("TRACEGRAD_CHECK", "1")
    with pytest.raises(TraceMismatchError):
        step(X)


def test_guard_retraces_on_change():
    w = tracer.tensor(np.ones(2, "float32"))
    cfg = {"scale": 1.0}
    step = autodiff.value_and_grad(lambda x: (x @ w).sum() * tracer.guard(lambda: cfg["scale"]), wrt=[w])
    step(X)
    cfg["scale"] = 3.0
    np.testing.assert_allclose(float(step(X)[0]), 3 * X.sum(), rtol=1e-5)


def test_in_place_inside_a_trace_on_traced_values_and_outside_buffers():
    stat = tracer.tensor(np.zeros(2, "float32"))
    w = tracer.tensor(np.ones(2, "float32"))

    def fn(x):
        h = x * w
        alias = h
        h += 1.0  # functional inside the trace; every name holding h sees it
        stat.copy_(stat * 0.5 + h.mean(0) * 0.5)  # written back after each call
        return (alias * h).sum()

    eager_stat = tracer.tensor(np.zeros(2, "float32"))
    step = autodiff.value_and_grad(fn, wrt=[w])
    for _ in range(3):
        value, (g,) = step(X)
        h = X + 1.0
        eager_stat = eager_stat * 0.5 + tracer.tensor(h.mean(0) * 0.5)
        np.testing.assert_allclose(float(value), float((h * h).sum()), rtol=1e-5)
        np.testing.assert_allclose(stat.numpy(), eager_stat.numpy(), rtol=1e-6)
    np.testing.assert_allclose(g.numpy(), (2 * h * X).sum(0), rtol=1e-5)
    assert "copy" not in str(tracer.trace(fn, X))  # writes are returned values, not ops


def test_in_place_errors():
    t = tracer.tensor(np.zeros(2, "int64"))
    with pytest.raises(TypeError, match="int64"):
        t += 1.5
    with pytest.raises(RuntimeError, match="shape"):
        tracer.tensor(np.zeros(2, "float32")).add_(tracer.tensor(np.zeros((3, 2), "float32")))


def test_tensor_reached_nowhere_warns_and_still_sees_rebinding():
    class Slots:
        __slots__ = ("w",)

    holder = Slots()
    holder.w = tracer.tensor(np.ones(2, "float32"))
    step = autodiff.value_and_grad(lambda x: (x @ holder.w).sum(), wrt=[])
    with pytest.warns(RuntimeWarning, match="cannot find again"):
        step(X)
    holder.w = tracer.tensor(np.full(2, 4.0, "float32"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_allclose(float(step(X)[0]), 4 * X.sum(), rtol=1e-5)


def test_gradients_are_writable_and_never_alias():
    w = tracer.tensor(np.ones((2, 3), "float32"))
    _, (g,) = autodiff.value_and_grad(lambda x: (x.sum() + w).sum(), wrt=[w])(X)
    assert g.numpy().flags.writeable
    g.numpy()[0, 0] = 123.0


def test_stress_random_mutations_against_fresh_traces():
    rng = np.random.default_rng(1)
    model = nn.Sequential(nn.Linear(2, 3), nn.Tanh(), nn.Linear(3, 1))
    extra = {"bias": tracer.tensor(np.zeros(1, "float32"))}
    params = list(model.parameters())

    def fn(x, scale):
        return ((model(x) + extra["bias"]) ** 2).mean() * scale

    step = autodiff.value_and_grad(fn, wrt=params)
    for _ in range(200):
        what = rng.integers(6)
        layer = model._modules[str(2 * rng.integers(2))]
        if what == 0:
            layer.weight -= 0.1 * tracer.tensor(rng.normal(size=layer.weight.shape).astype("float32"))
        elif what == 1:
            layer.weight = nn.Parameter(rng.normal(size=layer.weight.shape).astype("float32"))
            # the step's wrt still names the old weight, which fn no longer reaches: an error, then a new step
            with pytest.raises(ValueError, match="neither read by fn nor reachable"):
                step(X, 1.0)
            params = list(model.parameters())
            step = autodiff.value_and_grad(fn, wrt=params)
        elif what == 2:
            extra["bias"] = tracer.tensor(rng.normal(size=1).astype("float32"))
        elif what == 3:
            extra["bias"] += 1.0
        elif what == 5:  # a parameterless submodule swapped (issue 19 item 3; more in test_module_guards.py)
            setattr(model, "1", (nn.Tanh, nn.ReLU, nn.Sigmoid, nn.Identity)[rng.integers(4)]())
        else:
            layer.bias.copy_(rng.normal(size=layer.bias.shape).astype("float32"))
        scale = float(rng.uniform(0.5, 2.0))
        value, grads = step(X, scale)
        eager = fn(tracer.tensor(X), scale)
        np.testing.assert_allclose(float(value), float(eager), rtol=1e-5)
        ref_value, ref_grads = fresh_value_and_grad(fn, params, X, scale)
        for g, r in zip(grads, ref_grads, strict=True):
            np.testing.assert_allclose(g.numpy(), r.numpy(), rtol=1e-4, atol=1e-6)
