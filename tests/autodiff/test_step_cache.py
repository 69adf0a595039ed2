"""A step made again inside the loop (autodiff/step_cache.py, issue 24 item 6).

`value_and_grad(fn, ...)` made on every iteration hands back the step made before when the code, the options
and what the code reads directly are the same, so it does not trace again; it never hands back a step whose
captures are stale (each test below changes one thing the code reads and checks the value against eager);
where the cache cannot apply, a StepRemadeWarning says once to make the step outside the loop.
"""
import warnings

import numpy as np
import pytest

import autodiff
import nn
import tracer
from autodiff import step_cache
from autodiff.step_cache import StepRemadeWarning
from nn import functional as F

RNG = np.random.default_rng(1)
X = RNG.normal(size=(5, 4)).astype("float32")
Y = RNG.integers(0, 3, 5)
SCALE = 2.0
W_GLOBAL = tracer.tensor(np.ones(4, "float32"))


@pytest.fixture(autouse=True)
def fresh_cache():
    step_cache.clear()
    yield
    step_cache.clear()


def traces(step):
    """How many traces a step compiled (entries in its cache)."""
    return sum(len(v) for v in step.cache.values())


def test_lambda_made_in_a_loop_reuses_one_step():
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    steps = []
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(4):
            step = autodiff.value_and_grad(lambda x, y: F.cross_entropy(model(x), y), wrt=model.parameters())
            value, grads = step(X, Y)
            steps.append(step)
    assert all(s is steps[0] for s in steps) and traces(steps[0]) == 1
    want = F.cross_entropy(model(tracer.tensor(X)), tracer.tensor(Y))
    np.testing.assert_allclose(float(value), float(want), rtol=1e-6)


def test_options_and_wrt_tensors_are_part_of_the_key():
    w1, w2 = tracer.tensor(np.ones(4, "float32")), tracer.tensor(np.ones(4, "float32"))
    made = [autodiff.value_and_grad(lambda x: (x @ w1 + x @ w2).sum(), wrt=w) for w in (w1, w2, w1)]
    assert made[0] is made[2] and made[0] is not made[1]
    f = lambda x: (x @ w1).sum()  # noqa: E731
    kinds = {id(autodiff.value_and_grad(f, wrt=w1)), id(autodiff.grad(f, wrt=w1)),
             id(autodiff.value_and_grad(f, wrt=[w1])), id(autodiff.value_and_grad(f, wrt=w1, check=True)),
             id(autodiff.value_and_grad(f, argnums=0))}
    assert len(kinds) == 5


def loss_with_global_scale(x):
    return (x @ W_GLOBAL).sum() * SCALE


def test_rebinding_a_global_makes_a_new_step():
    global SCALE
    a = autodiff.value_and_grad(loss_with_global_scale, argnums=0)
    va, _ = a(X)
    SCALE = 3.0
    try:
        b = autodiff.value_and_grad(loss_with_global_scale, argnums=0)
        vb, _ = b(X)
    finally:
        SCALE = 2.0
    assert a is not b
    np.testing.assert_allclose(float(vb), 1.5 * float(va), rtol=1e-6)
    assert autodiff.value_and_grad(loss_with_global_scale, argnums=0) is a  # 2.0 again: equal value, reused


def test_rebinding_a_closure_variable_in_the_loop():
    values = []
    for scale in (1.0, 2.0, 2.0):  # the lambdas share the cell of `scale`; its contents change
        step = autodiff.value_and_grad(lambda x: (x * scale).sum(), argnums=0)  # noqa: B023 - the point
        values.append(float(step(X)[0]))
    np.testing.assert_allclose(values, [X.sum(), 2 * X.sum(), 2 * X.sum()], rtol=1e-5)


def test_lambdas_with_defaults_made_in_a_loop():
    values = []
    for k in (1.0, 2.0):
        step = autodiff.value_and_grad(lambda x, k=k: (x * k).sum(), argnums=0)
        values.append(float(step(X)[0]))
    np.testing.assert_allclose(values, [X.sum(), 2 * X.sum()], rtol=1e-5)


def make_loss(scale):
    return lambda x: (x * scale).sum()


def test_same_code_different_closures_never_share():
    f2, f3 = make_loss(2.0), make_loss(3.0)
    assert f2.__code__ is f3.__code__
    s2, s3 = autodiff.value_and_grad(f2, argnums=0), autodiff.value_and_grad(f3, argnums=0)
    assert s2 is not s3
    np.testing.assert_allclose(float(s3(X)[0]), 3 * X.sum(), rtol=1e-5)
    np.testing.assert_allclose(float(s2(X)[0]), 2 * X.sum(), rtol=1e-5)
    # even with equal contents: each function reads its own cell, which may be rebound later
    with pytest.warns(StepRemadeWarning):  # the third step of this code, each with other objects
        assert autodiff.value_and_grad(make_loss(2.0), argnums=0) is not s2


def test_module_swap_and_changed_attribute():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 3)
            self.scale = 1.0

        def forward(self, x):
            return self.fc(x) * self.scale

    box = {"model": Net()}

    def remade():
        m = box["model"]
        return autodiff.value_and_grad(lambda x, y: F.cross_entropy(box["model"](x), y), wrt=m.parameters())

    first = remade()
    first(X, Y)
    box["model"] = Net()  # a module swap: other wrt tensors, another step
    second = remade()
    assert second is not first
    v, _ = second(X, Y)
    want = F.cross_entropy(box["model"](tracer.tensor(X)), tracer.tensor(Y))
    np.testing.assert_allclose(float(v), float(want), rtol=1e-6)
    box["model"].scale = 5.0  # a changed attribute: the reused step's guards retrace
    third = remade()
    v, _ = third(X, Y)
    want = F.cross_entropy(box["model"](tracer.tensor(X)), tracer.tensor(Y))
    np.testing.assert_allclose(float(v), float(want), rtol=1e-6)


def test_bound_method_of_a_changed_plain_object():
    class Config:
        def __init__(self):
            self.k = 1.0

        def loss(self, x):
            return (x * self.k).sum()

    warnings.simplefilter("ignore", StepRemadeWarning)  # (pytest restores the filters after the test)
    cfg = Config()
    a = autodiff.value_and_grad(cfg.loss, argnums=0)
    a(X)
    assert autodiff.value_and_grad(cfg.loss, argnums=0) is a
    cfg.k = 4.0  # baked into a's trace; the re-made step must see it
    b = autodiff.value_and_grad(cfg.loss, argnums=0)
    assert b is not a
    np.testing.assert_allclose(float(b(X)[0]), 4 * X.sum(), rtol=1e-5)
    assert autodiff.value_and_grad(Config().loss, argnums=0) is not b  # another self


def test_warns_once_when_the_cache_cannot_apply():
    with pytest.warns(StepRemadeWarning, match="outside the loop") as record:
        for i in range(5):
            autodiff.value_and_grad(make_loss(float(i)), argnums=0)(X)
    assert len([w for w in record if issubclass(w.category, StepRemadeWarning)]) == 1
    assert record[0].filename == __file__  # points at the line that made the step
    assert issubclass(StepRemadeWarning, UserWarning)


def test_gradcheck_makes_no_kept_steps():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(4):
            autodiff.gradcheck(lambda x: (x * x).sum(), tracer.tensor(np.array([1.0, 2.0])))
