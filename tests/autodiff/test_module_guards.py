"""A compiled step guards every module attribute its trace read (issue 19 item 3).

Submodules that hold no tensor (an activation, a Dropout, an Identity), plain Python values on a module
(Dropout's p, LayerNorm's eps, a user's `self.scale = 0.5`) and a module's class are read by the trace
but lie on no route to a captured tensor: replacing or changing one must trace again, never replay the
old computation. Each scenario is compared with an eager run of the same model as it is now.
"""
import copy
import gc
import types
import weakref

import numpy as np
import pytest

import autodiff
import nn
import tracer
from nn import functional as F

RNG = np.random.default_rng(0)
X = RNG.normal(size=(6, 4)).astype("float32")


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 5)
        self.act = nn.ReLU()
        self.drop = nn.Identity()
        self.fc2 = nn.Linear(5, 1)
        self.scale = 0.5

    def forward(self, x):
        return self.fc2(self.drop(self.act(self.fc1(x)))) * self.scale


def loss_of(model):
    return lambda x: (model(x) ** 2).mean()


def eager(model, x=X):
    """The value and gradients of an eager (freshly traced) step on the model as it is now."""
    step = autodiff.value_and_grad(loss_of(model), wrt=model.parameters())
    return step(x)


def assert_matches(got, want):
    (value, grads), (ref_value, ref_grads) = got, want
    np.testing.assert_allclose(float(value), float(ref_value), rtol=1e-6)
    for g, r in zip(grads, ref_grads, strict=True):
        np.testing.assert_allclose(g.numpy(), r.numpy(), rtol=1e-5, atol=1e-7)


def assert_eager_value(got, model, x=X):
    np.testing.assert_allclose(float(got[0]), float(loss_of(model)(tracer.tensor(x))), rtol=1e-6)


class Counting:
    """fn wrapped to count how often it is traced (run with symbolic tensors)."""

    def __init__(self, fn):
        self.fn, self.traces = fn, 0

    def __call__(self, x):
        if x.is_traced:
            self.traces += 1
        return self.fn(x)


def test_activation_swap_is_seen():
    net = Net()
    step = autodiff.value_and_grad(loss_of(net), wrt=net.parameters())
    assert_eager_value(step(X), net)
    net.act = nn.Tanh()
    got = step(X)
    assert_eager_value(got, net)
    assert_matches(got, eager(net))
    net.act = nn.ReLU()  # back to a ReLU, but another object
    assert_eager_value(step(X), net)


def test_identity_replaced_by_dropout_and_back():
    net = Net()
    step = autodiff.value_and_grad(loss_of(net), wrt=net.parameters())
    step(X)
    net.drop = nn.Dropout(0.5)
    tracer.manual_seed(7)
    got = step(X)
    tracer.manual_seed(7)
    want = eager(net)
    assert_matches(got, want)
    no_drop = nn.Identity()
    net.drop = no_drop
    assert_eager_value(step(X), net)


def test_dropout_p_and_layernorm_eps_are_guarded_values():
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 4)
            self.ln = nn.LayerNorm(4)
            self.drop = nn.Dropout(0.0)

        def forward(self, x):
            return self.drop(self.ln(self.fc(x)))

    model = Model()
    step = autodiff.value_and_grad(loss_of(model), wrt=model.parameters())
    assert_eager_value(step(X), model)
    model.ln.eps = 10.0
    assert_eager_value(step(X), model)
    model.drop.p = 1.0  # every value dropped: the loss is 0
    got = step(X)
    assert float(got[0]) == 0.0
    assert_eager_value(got, model)
    model.eval()  # dropout off (training is a guard)
    assert_eager_value(step(X), model)


def test_user_python_attribute_change_retraces_not_baked():
    net = Net()
    step = autodiff.value_and_grad(loss_of(net), wrt=net.parameters())
    first = step(X)
    net.scale = 2.0
    got = step(X)
    assert_eager_value(got, net)
    np.testing.assert_allclose(float(got[0]), 16 * float(first[0]), rtol=1e-5)
    assert_matches(got, eager(net))
    net.scale = 2  # an int equal to the float: Python computes the same, but the type is part of the value
    assert_eager_value(step(X), net)


def test_nothing_changed_replays_without_tracing():
    net = Net()
    net.drop = nn.Dropout(0.25)
    fn = Counting(loss_of(net))
    step = autodiff.value_and_grad(fn, wrt=net.parameters())
    for _ in range(5):
        step(X)
    assert fn.traces == 1
    net.scale = 0.5  # rebound to an equal value: no new trace
    net.drop.p = 0.25
    step(X)
    assert fn.traces == 1
    net.scale = 0.75
    step(X)
    step(X)
    assert fn.traces == 2


def test_sequential_child_swap_and_class_swap():
    model = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 1))
    step = autodiff.value_and_grad(loss_of(model), wrt=model.parameters())
    step(X)
    setattr(model, "1", nn.Tanh())  # what Sequential.__setitem__ (item 20) will do
    got = step(X)
    assert_eager_value(got, model)
    assert_matches(got, eager(model))
    model._modules["1"].__class__ = nn.Sigmoid  # the same object, another class
    assert_eager_value(step(X), model)


def test_attribute_added_or_removed_after_the_trace():
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 1)

        def forward(self, x):
            y = self.fc(x)
            if getattr(self, "offset", None) is not None:
                y = y + self.offset
            return y

    model = Model()
    step = autodiff.value_and_grad(loss_of(model), wrt=model.parameters())
    step(X)
    model.offset = 3.0
    assert_eager_value(step(X), model)
    del model.offset
    assert_eager_value(step(X), model)


def test_list_of_numbers_on_a_module_is_compared_by_value():
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 2)
            self.coefs = [1.0, -1.0]

        def forward(self, x):
            y = self.fc(x)
            return y[:, 0] * self.coefs[0] + y[:, 1] * self.coefs[1]

    model = Model()
    step = autodiff.value_and_grad(loss_of(model), wrt=model.parameters())
    step(X)
    model.coefs[1] = 5.0
    assert_eager_value(step(X), model)


def test_method_replaced_on_the_instance_or_the_class():
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 1)

        def forward(self, x):
            return self.head(self.fc(x))

        def head(self, y):
            return y

    model = Model()
    step = autodiff.value_and_grad(loss_of(model), wrt=model.parameters())
    step(X)
    model.head = types.MethodType(lambda self, y: y * 3.0, model)
    assert_eager_value(step(X), model)
    del model.head
    assert_eager_value(step(X), model)
    Model.head = lambda self, y: tracer.tanh(y)
    assert_eager_value(step(X), model)


def test_functional_module_in_a_closure():
    act = {"fn": nn.ReLU()}
    fc = nn.Linear(4, 1)

    def fn(x):
        return (act["fn"](fc(x)) ** 2).mean()

    step = autodiff.value_and_grad(fn, wrt=fc.parameters())
    step(X)
    old = act["fn"]  # still alive: the guards on what the trace read of it still hold
    act["fn"] = nn.Tanh()  # a dict item, not a module attribute: the route to the module read is guarded
    np.testing.assert_allclose(float(step(X)[0]), float(fn(tracer.tensor(X))), rtol=1e-6)
    assert isinstance(old, nn.ReLU)


def test_guards_do_not_keep_the_model_alive():
    net = Net()
    step = autodiff.value_and_grad(lambda x: (net(x) ** 2).mean(), wrt=net.parameters())
    step(X)
    ref = weakref.ref(net.act)
    net.act = nn.Tanh()
    step(X)
    gc.collect()
    assert ref() is None


def test_temporary_modules_made_in_forward_do_not_retrace_every_call():
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 1))

        def forward(self, x):
            return self.layers[:3](x)  # a new Sequential per call

    model = Model()
    fn = Counting(loss_of(model))
    step = autodiff.value_and_grad(fn, wrt=model.parameters())
    for _ in range(3):
        assert_eager_value(step(X), model)
    assert fn.traces == 1


@pytest.mark.parametrize("swap", ["gelu", "class_attr"])
def test_class_level_value_read_by_forward(swap):
    class Scaled(nn.Module):
        factor = 2.0

        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 1)
            self.act = nn.ReLU()

        def forward(self, x):
            return self.act(self.fc(x)) * self.factor

    model = Scaled()
    step = autodiff.value_and_grad(loss_of(model), wrt=model.parameters())
    step(X)
    if swap == "gelu":
        model.act = nn.GELU()
    else:
        Scaled.factor = -3.0
    assert_eager_value(step(X), model)


def test_eager_attribute_access_is_not_hooked_outside_traces():
    # recording runs only while a trace is active: outside one, Module uses object's own attribute lookup
    assert "__getattribute__" not in vars(nn.Module)
    net = Net()
    step = autodiff.value_and_grad(loss_of(net), wrt=net.parameters())
    step(X)
    assert "__getattribute__" not in vars(nn.Module)
    with pytest.raises(tracer.TraceError):  # a trace that raises midway unhooks too
        autodiff.value_and_grad(lambda x: F.relu(net(x)).sum() * float(net(x).sum()), wrt=net.parameters())(X)
    assert "__getattribute__" not in vars(nn.Module)


class StatefulBlock(nn.Module):
    """Parameterless submodules, a Python value, a buffer rebound in forward and an activation kept."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 3)
        self.act = nn.Tanh()
        self.drop = nn.Identity()
        self.fc2 = nn.Linear(3, 1)
        self.register_buffer("ema", tracer.zeros((3,)))
        self.gain = 1.0
        self.last = None

    def forward(self, x):
        h = self.drop(self.act(self.fc1(x)))
        self.ema = self.ema * 0.9 + h.mean(axis=0).detach() * 0.1
        self.last = h
        return self.fc2(h * self.gain) + self.ema.sum()


_ACTS = (nn.Tanh, nn.ReLU, nn.Sigmoid, nn.GELU)
_DROPS = (lambda: nn.Identity(), lambda: nn.Dropout(0.0), lambda: nn.Dropout(1.0))


def _mutate(models, what, rng):
    """Apply one mutation, drawn once, to each of the models alike."""
    if what == 0:
        delta = rng.normal(size=(3, 4)).astype("float32") * 0.1
        for m in models:
            m.fc1.weight -= tracer.tensor(delta)
    elif what == 1:
        bias = rng.normal(size=1).astype("float32")
        for m in models:
            m.fc2.bias.copy_(bias)
    elif what == 2:
        cls = _ACTS[rng.integers(len(_ACTS))]
        for m in models:
            m.act = cls()
    elif what == 3:
        make = _DROPS[rng.integers(len(_DROPS))]
        for m in models:
            m.drop = make()
    elif what == 4:
        p = float(rng.choice([0.0, 1.0]))
        for m in models:
            if isinstance(m.drop, nn.Dropout):
                m.drop.p = p
    elif what == 5:
        gain = float(rng.choice([0.5, 1.0, 2.0]))
        for m in models:
            m.gain = gain
    elif what == 6:
        training = bool(rng.integers(2))
        for m in models:
            m.train(training)
    elif what == 7:
        ema = rng.normal(size=3).astype("float32")
        for m in models:
            m.ema = tracer.tensor(ema)  # rebound from outside, between calls
    # what == 8: nothing changes


def test_stress_parameterless_swaps_and_forward_state_against_eager():
    rng = np.random.default_rng(19)
    model = StatefulBlock()
    fresh, eager_model = copy.deepcopy(model), copy.deepcopy(model)

    def loss(m):
        return lambda x: (m(x) ** 2).mean()

    step = autodiff.value_and_grad(loss(model), wrt=model.parameters())
    for _ in range(200):
        _mutate((model, fresh, eager_model), int(rng.integers(9)), rng)
        value, grads = step(X)
        ref_value, ref_grads = autodiff.value_and_grad(loss(fresh), wrt=fresh.parameters())(X)  # traced afresh
        eager_value = loss(eager_model)(tracer.tensor(X))
        np.testing.assert_allclose(float(value), float(eager_value), rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(float(ref_value), float(eager_value), rtol=1e-5, atol=1e-7)
        for g, r in zip(grads, ref_grads, strict=True):
            np.testing.assert_allclose(g.numpy(), r.numpy(), rtol=1e-4, atol=1e-6)
        for m in (model, fresh):
            np.testing.assert_allclose(m.ema.numpy(), eager_model.ema.numpy(), rtol=1e-5, atol=1e-7)
            np.testing.assert_allclose(m.last.numpy(), eager_model.last.numpy(), rtol=1e-5, atol=1e-7)
        assert model._buffers["ema"] is model.ema
