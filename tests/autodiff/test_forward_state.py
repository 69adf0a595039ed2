"""Module state written inside a traced forward (issue 19 item 9).

A buffer rebound in forward (`self.scale = self.scale * 0.5`) and a plain tensor attribute bound there
(`self.last = h`) hold concrete values after each compiled call, first call and replays alike, as after
eager calls. A traced value stored where the step cannot write it back (a list, a dict, a non-Module
object) raises a TraceError naming the place, and no traced value is left behind, even when the trace
itself fails. Each scenario runs the same calls on an eager twin of the model.
"""
import copy

import numpy as np
import pytest

import autodiff
import nn
import tracer
from tracer import TraceError

RNG = np.random.default_rng(3)
X = RNG.normal(size=(5, 3)).astype("float32")


class Decaying(nn.Module):
    """A buffer rebound (not updated in place) in forward, and the last activation kept for inspection."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 2)
        self.register_buffer("scale", tracer.tensor(np.ones(2, "float32")))
        self.last = None

    def forward(self, x):
        h = tracer.tanh(self.fc(x))
        self.scale = self.scale * 0.5 + h.mean(axis=0).detach() * 0.1
        self.last = h
        return h * self.scale


def loss_of(model):
    return lambda x: (model(x) ** 2).sum()


def concrete(t):
    assert isinstance(t, tracer.Tensor) and not t.is_traced
    return t.numpy()


def test_buffer_and_plain_attribute_written_back_every_call():
    model = Decaying()
    twin = copy.deepcopy(model)
    step = autodiff.value_and_grad(loss_of(model), wrt=model.parameters())
    seen = []
    for _ in range(4):
        value, _ = step(X)
        want = loss_of(twin)(tracer.tensor(X))
        np.testing.assert_allclose(float(value), float(want), rtol=1e-6)
        np.testing.assert_allclose(concrete(model.scale), twin.scale.numpy(), rtol=1e-6)
        np.testing.assert_allclose(concrete(model.last), twin.last.numpy(), rtol=1e-6)
        assert model._buffers["scale"] is model.scale  # rebound as a buffer, in state_dict
        seen.append(model.last)
    assert len({id(t) for t in seen}) == 4  # a new tensor each call, as the eager assignment makes
    np.testing.assert_allclose(model.state_dict()["scale"], twin.state_dict()["scale"], rtol=1e-6)
    assert seen[0].numpy().shape == (5, 2)


def test_a_held_old_value_keeps_its_values():
    model = Decaying()
    step = autodiff.value_and_grad(loss_of(model), wrt=model.parameters())
    step(X)
    old = model.scale
    before = old.numpy().copy()
    step(X)
    assert model.scale is not old
    np.testing.assert_array_equal(old.numpy(), before)


def test_gradients_of_a_forward_that_writes_state_match_eager():
    model = Decaying()
    twin = copy.deepcopy(model)
    step = autodiff.value_and_grad(loss_of(model), wrt=model.parameters())
    for _ in range(3):
        _, grads = step(X)
        _, ref = autodiff.value_and_grad(loss_of(twin), wrt=twin.parameters())(X)  # traced afresh each time
        for g, r in zip(grads, ref, strict=True):
            np.testing.assert_allclose(g.numpy(), r.numpy(), rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(model.scale.numpy(), twin.scale.numpy(), rtol=1e-6)


def test_attribute_new_in_forward_and_state_dict():
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 1)

        def forward(self, x):
            y = self.fc(x)
            self.activation = y  # an attribute forward adds
            return y

    model = Model()
    step = autodiff.value_and_grad(lambda x: model(x).sum(), wrt=model.parameters())
    for k in range(3):
        x = X * (k + 1)
        step(x)
        np.testing.assert_allclose(concrete(model.activation), model.fc(x).numpy(), rtol=1e-6)
    assert set(model.state_dict()) == {"fc.weight", "fc.bias"}


def test_history_list_raises_naming_it_and_leaves_nothing_behind():
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 1)
            self.history = []

        def forward(self, x):
            h = self.fc(x)
            self.history.append(h)
            return h

    model = Model()
    model.history.append(tracer.tensor([1.0]))
    step = autodiff.value_and_grad(lambda x: model(x).sum(), wrt=model.parameters())
    with pytest.raises(TraceError, match=r"history\[1\].*module attribute"):
        step(X)
    assert len(model.history) == 1 and not model.history[0].is_traced
    model.state_dict()
    model(X)  # eager still works, and appends concretely
    assert not model.history[-1].is_traced


def test_dict_on_a_module_and_attribute_of_a_plain_object_raise():
    class Holder:
        value = None

    holder = Holder()

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 1)
            self.cache = {}

        def forward(self, x):
            h = self.fc(x)
            self.cache["h"] = h
            return h

    model = Model()
    step = autodiff.value_and_grad(lambda x: model(x).sum(), wrt=model.parameters())
    with pytest.raises(TraceError, match=r"cache\['h'\]"):
        step(X)
    assert model.cache == {}

    def fn(x):
        h = model.fc(x)
        holder.value = h
        return h.sum()

    with pytest.raises(TraceError, match=r"holder\.value"):
        autodiff.value_and_grad(fn, wrt=model.parameters())(X)
    assert "value" not in vars(holder)


def test_list_created_in_forward_is_not_left_behind():
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 1)

        def forward(self, x):
            self.steps = []
            h = self.fc(x)
            self.steps.append(h)
            return h

    model = Model()
    with pytest.raises(TraceError, match="steps"):
        autodiff.value_and_grad(lambda x: model(x).sum(), wrt=model.parameters())(X)
    assert "steps" not in vars(model)


def test_a_trace_that_fails_midway_restores_the_attributes():
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 1)
            self.register_buffer("count", tracer.zeros(()))
            self.last = None

        def forward(self, x):
            h = self.fc(x)
            self.count = self.count + 1
            self.last = h
            self.note = "traced"
            if float(h.sum()) > 0:  # Python control flow on a traced value: TraceError
                return h
            return -h

    model = Model()
    count = model.count
    with pytest.raises(TraceError, match="float"):
        autodiff.value_and_grad(lambda x: model(x).sum(), wrt=model.parameters())(X)
    assert model.count is count and model._buffers["count"] is count
    assert model.last is None and "note" not in vars(model)
    model.state_dict()


def test_replays_write_back_without_retracing():
    model = Decaying()
    traces = []

    def fn(x):
        if x.is_traced:
            traces.append(1)
        return loss_of(model)(x)

    step = autodiff.value_and_grad(fn, wrt=model.parameters())
    for _ in range(5):
        step(X)
    assert len(traces) == 1


def test_tracer_trace_returns_the_written_value_and_leaves_the_module_concrete():
    model = Decaying()
    scale = model.scale
    mod = tracer.trace(loss_of(model), tracer.spec((5, 3)))
    assert len(mod["main"].body.fields) == 3  # the loss, then scale and last
    assert model.scale is scale and model.last is None


def test_python_value_written_in_forward_is_seen_on_replay():
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 1)
            self.calls = 0
            self.mode = None

        def forward(self, x):
            self.calls += 1  # read and written: each call traces again, and counts as eagerly
            self.mode = "seen"
            return self.fc(x)

    model = Model()
    step = autodiff.value_and_grad(lambda x: model(x).sum(), wrt=model.parameters())
    for k in range(3):
        model.mode = None
        step(X)
        assert model.calls == k + 1 and model.mode == "seen"


def test_grad_inside_a_trace_binds_in_the_enclosing_trace():
    model = Decaying()
    twin = copy.deepcopy(model)
    inner = autodiff.grad(loss_of(model), wrt=model.fc.weight)

    def outer(x):
        return (inner(x) ** 2).sum()

    step = autodiff.value_and_grad(outer, wrt=model.parameters())
    step(X)
    loss_of(twin)(tracer.tensor(X))
    np.testing.assert_allclose(concrete(model.scale), twin.scale.numpy(), rtol=1e-6)
    np.testing.assert_allclose(concrete(model.last), twin.last.numpy(), rtol=1e-6)


def test_check_mode_with_state_writes():
    model = Decaying()
    twin = copy.deepcopy(model)
    step = autodiff.value_and_grad(loss_of(model), wrt=model.parameters(), check=True)
    for _ in range(3):
        step(X)
        loss_of(twin)(tracer.tensor(X))
    np.testing.assert_allclose(concrete(model.scale), twin.scale.numpy(), rtol=1e-6)
