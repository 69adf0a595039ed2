"""The generated per-call glue of a compiled step (autodiff/glue.py, issue 23 item 3).

After a step's first calls, a replay runs one generated straight-line function instead of the generic path.
Each test counts the generic path's calls (a glue that silently always missed would pass every value test)
and compares with a twin step whose glue is off, so that every semantic of the generic path is checked on
the glue: retrace on a changed guard, errors naming the argument path, no shared buffers among value, aux
and gradients, module state written back, frozen parameters, in-place writes.
"""
from collections import namedtuple

import numpy as np
import pytest

import autodiff
import nn
import tracer
from autodiff import api, glue, step_cache
from nn import functional as F

RNG = np.random.default_rng(0)
X = RNG.normal(size=(6, 4)).astype("float32")
Y = RNG.integers(0, 3, 6)


@pytest.fixture
def generic_calls(monkeypatch):
    """A list that grows by one per call that the generic path serves (and no step reused: a twin is a twin)."""
    monkeypatch.setattr(step_cache, "reuse", lambda step, fn, options: step)
    calls = []
    real = api._GradFunction._call

    def counting(self, args, kwargs):
        calls.append(self)
        return real(self, args, kwargs)
    monkeypatch.setattr(api._GradFunction, "_call", counting)
    return calls


def no_glue(step):
    """The same step with its glue off: every call takes the generic path (the reference)."""
    step._adopt_glue = lambda *a: None
    return step


def arrays(tree):
    if isinstance(tree, tracer.Tensor):
        return [tree.numpy()]
    if isinstance(tree, dict):
        return [a for k in tree for a in arrays(tree[k])]
    if isinstance(tree, (list, tuple)):
        return [a for t in tree for a in arrays(t)]
    return [tree]


def same(a, b):
    for x, y in zip(arrays(a), arrays(b), strict=True):
        if x is None or y is None:
            assert x is None and y is None
        else:
            np.testing.assert_allclose(x, y, rtol=1e-6)


def mlp():
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))


def test_mlp_replays_through_the_glue(generic_calls):
    model = mlp()
    step = autodiff.value_and_grad(lambda x, y: F.cross_entropy(model(x), y), wrt=list(model.parameters()))
    twin = no_glue(autodiff.value_and_grad(lambda x, y: F.cross_entropy(model(x), y), wrt=list(model.parameters())))
    step(X, Y)
    assert len(generic_calls) == 1 and step.glues, "the first call builds the glue"
    source = step.glues[0].source
    assert "for " not in source and "while " not in source  # straight-line
    for _ in range(3):
        got, want = step(X, Y), twin(X, Y)
        same(got, want)
    assert generic_calls.count(step) == 1
    assert step.last is step.glues[0].compiled  # .module / .stats describe the replayed step


def test_pytree_arguments_and_kwargs(generic_calls):
    Batch = namedtuple("Batch", "x y")
    w = tracer.tensor(RNG.normal(size=(4, 3)).astype("float32"))

    def loss(batch, extra, *, scale):
        return ((batch.x @ w) * extra["m"][0]).sum() * scale + batch.y.sum()

    step = autodiff.value_and_grad(loss, wrt=w)
    twin = no_glue(autodiff.value_and_grad(loss, wrt=w))
    b = Batch(X, tracer.tensor(X[:, :3]))
    extra = {"m": [np.float32(2.0)]}
    for scale in (1.0, 2.0, 3.0):
        same(step(b, extra, scale=scale), twin(b, extra, scale=scale))
    assert generic_calls.count(step) == 1  # a Python float is an input: one trace for every value
    # an array where a Tensor was: the same compiled entry, found by the generic path, with a glue of its own
    same(step(Batch(X, X[:, :3]), extra, scale=1.0), twin(b, extra, scale=1.0))
    step(Batch(X, X[:, :3]), extra, scale=1.0)
    assert generic_calls.count(step) == 2 and len(step.cache) == 1
    step(b, extra, scale=1.0)
    assert generic_calls.count(step) == 2
    with pytest.raises(AttributeError):  # another structure: the generic path traces (and fn fails on it)
        step((X, X[:, :3]), extra, scale=1.0)


def test_changed_guard_and_module_attribute_retrace(generic_calls):
    model = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5), nn.Linear(4, 3))
    step = autodiff.value_and_grad(lambda x, y: F.cross_entropy(model(x), y), wrt=list(model.parameters()))
    model.eval()
    v_eval, _ = step(X, Y)
    step(X, Y)
    assert generic_calls.count(step) == 1
    model.train()
    step(X, Y)  # training: dropout active, a new trace
    assert generic_calls.count(step) == 2
    model.eval()
    v_again, _ = step(X, Y)
    np.testing.assert_allclose(float(v_again), float(v_eval), rtol=1e-6)
    model[1].p = 0.0
    model.train()
    step(X, Y)
    n = generic_calls.count(step)
    v_p0, _ = step(X, Y)  # p = 0: the same as eval, and the glue serves it
    np.testing.assert_allclose(float(v_p0), float(v_eval), rtol=1e-6)
    assert generic_calls.count(step) == n


def test_captured_tensor_rebound_is_fed_or_retraced(generic_calls):
    w = tracer.tensor(np.ones((4, 3), "float32"))
    holder = {"w": w, "kept": w}  # w stays reachable when holder["w"] is rebound: its gradient is then None
    step = autodiff.value_and_grad(lambda x: (x @ holder["w"]).sum(), wrt=[w])
    step(X)
    step(X)
    holder["w"] = tracer.tensor(np.full((4, 3), 2.0, "float32"))  # not the wrt tensor: its gradient is None
    value, grads = step(X)
    np.testing.assert_allclose(float(value), 2.0 * X.sum() * 3, rtol=1e-5)
    assert grads == [None]
    holder["w"] = w
    n = generic_calls.count(step)
    value, grads = step(X)
    np.testing.assert_allclose(float(value), X.sum() * 3, rtol=1e-5)
    assert grads[0] is not None
    holder["w"] = tracer.tensor(np.ones((5, 3), "float32"))  # another shape: the generic path decides (it raises)
    with pytest.raises(Exception, match="matmul"):
        step(X)
    assert generic_calls.count(step) > n


def test_errors_name_the_argument_path(generic_calls):
    w = tracer.tensor(np.ones(4, "float32"))
    step = autodiff.value_and_grad(lambda d: (d["x"] @ w).sum(), wrt=w)
    step({"x": X})
    step({"x": X})
    with pytest.raises(TypeError, match=r"args\[0\]\['x'\]"):
        step({"x": iter([1.0])})


def test_no_buffer_shared_between_value_aux_gradients_and_weights(generic_calls):
    w1 = tracer.tensor(RNG.normal(size=3).astype("float32"))
    w2 = tracer.tensor(RNG.normal(size=3).astype("float32"))

    def loss(x):
        t = tracer.tanh(x)
        return (w1 * w2).sum() + (w1 * t).sum(), {"t": t}

    step = autodiff.value_and_grad(loss, wrt=[w1, w2, w1], has_aux=True)
    x = RNG.normal(size=3).astype("float32")
    for _ in range(3):
        (value, aux), grads = step(x)
        buffers = [value.numpy(), aux["t"].numpy()] + [g.numpy() for g in grads]
        bases = [b if b.base is None else b.base for b in buffers]
        assert len({id(b) for b in bases}) == len(bases)
        assert not any(np.shares_memory(g.numpy(), w.numpy()) for g in grads for w in (w1, w2))
        np.testing.assert_allclose(grads[1].numpy(), w1.numpy(), rtol=1e-6)
        grads[1].numpy()[...] = 0  # the user's to write: the weight stays
        assert np.abs(w1.numpy()).sum() > 0
    assert generic_calls.count(step) == 1


class Decaying(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.register_buffer("scale", tracer.tensor(np.ones(3, "float32")))

    def forward(self, x):
        h = self.fc(x)
        self.scale = self.scale * 0.5
        return h * self.scale


def test_module_state_written_in_forward(generic_calls):
    model = Decaying()
    step = autodiff.value_and_grad(lambda x: model(x).sum(), wrt=list(model.parameters()))
    for k in range(1, 5):
        step(X)
        np.testing.assert_allclose(model.scale.numpy(), 0.5 ** k)
        assert not model.scale.is_traced
    assert generic_calls.count(step) == 1


def test_in_place_write_to_an_argument(generic_calls):
    w = tracer.tensor(np.ones(4, "float32"))

    def loss(x, acc):
        acc += 1.0
        return (x @ w).sum()

    step = autodiff.value_and_grad(loss, wrt=w)
    acc = np.zeros(3, "float32")
    for _ in range(3):
        step(X, acc)
    np.testing.assert_allclose(acc, 3.0)
    assert generic_calls.count(step) == 1


def test_aliased_in_place_write_is_refused_on_the_glue(generic_calls):
    t = tracer.tensor(np.zeros(3, "float32"))
    w = tracer.tensor(np.ones(3, "float32"))

    def loss(a, b):
        a += 1.0
        return (b * w).sum()
    step = autodiff.value_and_grad(loss, wrt=w)
    step(t, tracer.tensor(np.zeros(3, "float32")))
    step(t, tracer.tensor(np.zeros(3, "float32")))
    assert generic_calls.count(step) == 1
    with pytest.raises(ValueError, match="the same tensor that fn writes in place"):
        step(t, t)


def test_frozen_parameter_toggles(generic_calls):
    model = mlp()
    params = list(model.parameters())
    step = autodiff.value_and_grad(lambda x, y: F.cross_entropy(model(x), y), wrt=params)
    step(X, Y)
    step(X, Y)
    params[0].requires_grad_(False)
    _, grads = step(X, Y)
    assert grads[0] is None and grads[1] is not None
    params[0].requires_grad_(True)
    _, grads = step(X, Y)
    assert grads[0] is not None


def test_argnums_and_grad_without_value(generic_calls):
    params = {"w": RNG.normal(size=(4, 3)).astype("float32"), "b": np.zeros(3, "float32")}
    f = lambda p, x: ((x @ p["w"] + p["b"]) ** 2).sum()  # noqa: E731
    g = autodiff.grad(f, argnums=0)
    twin = no_glue(autodiff.grad(f, argnums=0))
    for _ in range(3):
        same(g(params, X), twin(params, X))
    assert generic_calls.count(g) == 1


def test_check_mode_and_traces_take_the_generic_path(generic_calls, monkeypatch):
    w = tracer.tensor(np.ones(4, "float32"))
    scale = {"k": 2.0}
    step = autodiff.grad(lambda x: (x @ w).sum() * scale["k"], wrt=w)
    step(X)
    step(X)
    n = generic_calls.count(step)
    monkeypatch.setenv("TRACEGRAD_CHECK", "1")
    scale["k"] = 3.0  # baked in: check mode finds it
    with pytest.raises(autodiff.TraceMismatchError):
        step(X)
    monkeypatch.delenv("TRACEGRAD_CHECK")
    assert generic_calls.count(step) == n + 1
    # inside another trace the adjoint is inlined: a second derivative
    v = tracer.tensor(np.array([1.0, 2.0], "float32"))
    inner = autodiff.grad(lambda a: (a ** 3).sum(), argnums=0)
    inner(v)
    inner(v)
    second = autodiff.grad(lambda a: inner(a).sum(), wrt=v)(v)
    np.testing.assert_allclose(second.numpy(), 6 * v.numpy())


def test_a_failing_check_section_never_hides_an_error():
    """A glue whose checks raise answers MISS; the generic path then raises the user's error itself."""
    class Odd:
        training = True

        def __eq__(self, other):
            raise RuntimeError("no comparing")
        __hash__ = None

    w = tracer.tensor(np.ones(4, "float32"))
    step = autodiff.value_and_grad(lambda x, o: (x @ w).sum(), wrt=w)
    step(X, 1)
    with pytest.raises(TypeError, match=r"args\[1\]"):
        step(X, Odd())
    assert glue.MISS is not None
