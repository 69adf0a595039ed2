"""Step arguments are pytrees, as in JAX (issue 19, item 1): every array, Tensor and Python number at a leaf
of a tuple, list, dict, OrderedDict or namedtuple argument (nested), and every keyword argument, is an input
of the compiled step, read on every call. Each scenario is compared with an eager run (and torch)."""
from collections import OrderedDict, namedtuple

import numpy as np
import pytest

import autodiff
import nn
import tracer
from nn import functional as F
from tests.torch_optional import torch

RNG = np.random.default_rng(3)
X = RNG.normal(size=(32, 4)).astype("float32")
Y = RNG.integers(0, 3, size=32)
Batch = namedtuple("Batch", ["x", "y"])
Other = namedtuple("Other", ["x", "y"])


def counting(fn):
    calls = []

    def counted(*args, **kwargs):
        calls.append(1)
        return fn(*args, **kwargs)
    return counted, calls


def model_and_torch():
    model = nn.Linear(4, 3)
    ref = torch.nn.Linear(4, 3)
    with torch.no_grad():
        ref.weight.copy_(torch.tensor(model.weight.numpy()))
        ref.bias.copy_(torch.tensor(model.bias.numpy()))
    return model, ref


def torch_loss_and_grads(ref, x, y):
    ref.zero_grad()
    loss = torch.nn.functional.cross_entropy(ref(torch.tensor(x)), torch.tensor(y))
    loss.backward()
    return float(loss), [ref.weight.grad.numpy().copy(), ref.bias.grad.numpy().copy()]


def test_batches_from_nn_data_are_read_every_call():
    model, ref = model_and_torch()
    fn, calls = counting(lambda b: F.cross_entropy(model(b[0]), b[1]))
    step = autodiff.value_and_grad(fn, wrt=model.parameters())
    losses = []
    for batch in nn.data.batches((X, Y), 8, shuffle=True, seed=0):
        loss, grads = step(batch)
        x, y = (a.numpy() if isinstance(a, tracer.Tensor) else a for a in batch)
        want, want_grads = torch_loss_and_grads(ref, x, y)
        np.testing.assert_allclose(float(loss), want, rtol=1e-5)
        for g, w in zip(grads, want_grads, strict=True):
            np.testing.assert_allclose(g.numpy(), w, rtol=1e-4, atol=1e-6)
        eager = float(fn(tuple(tracer.tensor(a) for a in (x, y))))
        np.testing.assert_allclose(float(loss), eager, rtol=1e-6)
        losses.append(float(loss))
    assert len(set(losses)) == 4  # four different batches, four different losses
    assert len(calls) == 1 + 4  # one trace, then one eager call per batch


@pytest.mark.parametrize("wrap", [
    lambda x, y: {"x": x, "y": y},
    lambda x, y: OrderedDict([("x", x), ("y", y)]),
    lambda x, y: Batch(x, y),
    lambda x, y: [x, y],
    lambda x, y: {"inputs": {"x": [x]}, "targets": (y,)},
], ids=["dict", "ordereddict", "namedtuple", "list", "nested"])
def test_each_container_kind_reads_its_arrays_every_call(wrap):
    model, ref = model_and_torch()

    def get(b):
        if isinstance(b, dict) and "inputs" in b:
            return b["inputs"]["x"][0], b["targets"][0]
        if isinstance(b, (dict, OrderedDict)):
            return b["x"], b["y"]
        return b[0], b[1]

    fn, calls = counting(lambda b: F.cross_entropy(model(get(b)[0]), get(b)[1]))
    step = autodiff.value_and_grad(fn, wrt=model.parameters())
    for k in range(3):
        x, y = X[8 * k: 8 * k + 8], Y[8 * k: 8 * k + 8]
        loss, (gw, gb) = step(wrap(x, y))
        want, (tw, tb) = torch_loss_and_grads(ref, x, y)
        np.testing.assert_allclose(float(loss), want, rtol=1e-5)
        np.testing.assert_allclose(gw.numpy(), tw, rtol=1e-4, atol=1e-6)
    assert len(calls) == 1


def test_python_numbers_inside_a_container_are_inputs():
    w = tracer.tensor(np.ones(4, "float32"))
    fn, calls = counting(lambda b: (b[0] @ w).sum() * b[1])
    step = autodiff.value_and_grad(fn, wrt=[w])
    for scale in (2.0, 3.0, -1.5):
        value, (g,) = step((X, scale))
        np.testing.assert_allclose(float(value), float(fn((tracer.tensor(X), scale))), rtol=1e-5)
        np.testing.assert_allclose(g.numpy(), X.sum(0) * scale, rtol=1e-5)
    assert len(calls) == 1 + 3


def test_number_in_a_container_used_as_a_python_value_is_baked_per_value():
    w = tracer.tensor(np.ones(4, "float32"))

    def fn(cfg, x):
        h = x
        for _ in range(cfg["depth"]):  # needs a Python int: baked, one trace per value
            h = tracer.tanh(h) * cfg["gain"]
        return (h @ w).sum()

    step = autodiff.value_and_grad(fn, wrt=[w])
    for depth, gain in ((1, 1.0), (2, 0.5), (1, 2.0)):
        value, _ = step({"depth": depth, "gain": gain}, X)
        np.testing.assert_allclose(float(value), float(fn({"depth": depth, "gain": gain}, tracer.tensor(X))),
                                   rtol=1e-5)


def test_keyword_arguments():
    model, ref = model_and_torch()
    fn, calls = counting(lambda x, *, y, weight=1.0: F.cross_entropy(model(x), y) * weight)
    step = autodiff.value_and_grad(fn, wrt=model.parameters())
    for k in range(3):
        x, y = X[8 * k: 8 * k + 8], Y[8 * k: 8 * k + 8]
        loss, (gw, _) = step(x, y=y)
        want, (tw, _) = torch_loss_and_grads(ref, x, y)
        np.testing.assert_allclose(float(loss), want, rtol=1e-5)
        np.testing.assert_allclose(gw.numpy(), tw, rtol=1e-4, atol=1e-6)
    loss, _ = step(X[:8], y=Y[:8], weight=3.0)
    np.testing.assert_allclose(float(loss), 3 * torch_loss_and_grads(ref, X[:8], Y[:8])[0], rtol=1e-5)
    assert len(calls) == 2  # the weight keyword is a new signature


def test_keyword_and_positional_are_both_accepted_by_grad():
    w = tracer.tensor(np.ones(4, "float32"))
    g = autodiff.grad(lambda x, scale: (x @ w).sum() * scale, wrt=w)(X, scale=2.0)
    np.testing.assert_allclose(g.numpy(), 2 * X.sum(0), rtol=1e-5)


def test_cache_key_is_the_tree_structure():
    w = tracer.tensor(np.ones(4, "float32"))
    fn, calls = counting(lambda b: (b["x"] @ w).sum() + (b["y"] * 0).sum())
    step = autodiff.value_and_grad(fn, wrt=[w])
    step({"x": X, "y": Y})
    step({"x": X + 1, "y": Y})  # same structure, new values: a replay
    assert len(calls) == 1
    value, _ = step({"y": Y, "x": X + 2})  # keys in another order: another tree
    assert len(calls) == 2
    np.testing.assert_allclose(float(value), float((X + 2).sum()), rtol=1e-5)
    value, _ = step({"x": X[:5], "y": Y})  # a leaf of another shape
    assert len(calls) == 3
    np.testing.assert_allclose(float(value), float(X[:5].sum()), rtol=1e-5)

    fn2, calls2 = counting(lambda b: (b.x @ w).sum())
    step2 = autodiff.value_and_grad(fn2, wrt=[w])
    step2(Batch(X, Y))
    step2(Other(X, Y))  # another namedtuple type with the same fields is another tree
    assert len(calls2) == 2


def test_wrt_tensor_inside_a_pytree_argument_is_matched_by_identity():
    w = tracer.tensor(np.full(4, 0.5, "float32"))
    b = tracer.tensor(np.zeros(1, "float32"))
    step = autodiff.value_and_grad(lambda p, x: ((x @ p["w"]) + p["b"]).sum(), wrt={"w": w, "b": b})
    for _ in range(3):
        value, g = step({"w": w, "b": b}, X)
        np.testing.assert_allclose(float(value), float((X @ w.numpy()).sum() + 32 * b.numpy()[0]), rtol=1e-5)
        np.testing.assert_allclose(g["w"].numpy(), X.sum(0), rtol=1e-5)
        np.testing.assert_allclose(g["b"].numpy(), [32.0], rtol=1e-6)
        w -= 0.01 * g["w"]
        b -= 0.01 * g["b"]


def test_a_model_inside_a_tuple_argument_is_searched_as_today():
    model = nn.Linear(4, 1)
    fn, calls = counting(lambda pack: pack[0](pack[1]).sum())
    step = autodiff.value_and_grad(fn, wrt=[])
    step((model, X))
    model.weight = nn.Parameter(np.full((1, 4), 2.0, "float32"))  # rebound inside the model passed in
    value, _ = step((model, X + 1))
    np.testing.assert_allclose(float(value), float(model(tracer.tensor(X + 1)).sum()), rtol=1e-5)
    assert len(calls) == 1


def test_tensor_argument_written_in_place_inside_a_dict():
    buf = tracer.tensor(np.zeros(4, "float32"))
    w = tracer.tensor(np.ones(4, "float32"))

    def fn(state, x):
        state["buf"].add_(x.sum(0))
        return (x @ w).sum()

    step = autodiff.value_and_grad(fn, wrt=[w])
    step({"buf": buf}, X)
    step({"buf": buf}, X)
    np.testing.assert_allclose(buf.numpy(), 2 * X.sum(0), rtol=1e-5)


def test_grad_of_grad_with_pytree_arguments():
    # d/dx of sum(d/dw sum(tanh(x * w))) with x and w passed in containers, against torch
    x0 = RNG.normal(size=(3,)).astype("float64")
    w0 = RNG.normal(size=(3,)).astype("float64")
    w = tracer.tensor(w0)

    def outer(xs):
        inner = autodiff.grad(lambda p: tracer.tanh(p["x"] * p["w"][0]).sum(), wrt=w)
        return inner({"x": xs[0], "w": [w]}).sum()

    x = tracer.tensor(x0)
    g = autodiff.grad(outer, wrt=x)((x,))
    tx, tw = torch.tensor(x0, requires_grad=True), torch.tensor(w0, requires_grad=True)
    (gw,) = torch.autograd.grad(torch.tanh(tx * tw).sum(), tw, create_graph=True)
    (want,) = torch.autograd.grad(gw.sum(), tx)
    np.testing.assert_allclose(g.numpy(), want.numpy(), rtol=1e-10)


def test_unhashable_leaf_error_names_its_path():
    w = tracer.tensor(np.ones(4, "float32"))
    step = autodiff.value_and_grad(lambda b: (b["x"] @ w).sum(), wrt=[w])
    with pytest.raises(TypeError, match=r"args\[0\]\['meta'\]"):
        step({"x": X, "meta": {1, 2}})


def test_ir_parameters_are_named_after_the_leaf_paths():
    w = tracer.tensor(np.ones(4, "float32"))
    step = autodiff.value_and_grad(lambda batch, scale: (batch["x"] @ w).sum() * scale, wrt=[w])
    step({"x": X}, scale=2.0)
    names = [p.name for p in step.module["main"].params]
    assert names[:2] == ["batch_x", "scale"]


def test_stress_random_container_arguments_against_eager():
    # 200 calls, each with a random container kind, fresh arrays and numbers, sometimes as keywords and
    # sometimes with a tensor (not an array) at a leaf: every call must give the eager answer
    rng = np.random.default_rng(11)
    model = nn.Linear(4, 3)
    params = list(model.parameters())

    def fn(batch, scale=1.0):
        x, y = (batch["x"], batch["y"]) if isinstance(batch, dict) else (batch[0], batch[1])
        return F.cross_entropy(model(x), y) * scale

    step = autodiff.value_and_grad(fn, wrt=params)
    kinds = [lambda x, y: (x, y), lambda x, y: [x, y], lambda x, y: {"x": x, "y": y}, lambda x, y: Batch(x, y)]
    for _ in range(200):
        n = int(rng.integers(2, 6))
        x = rng.normal(size=(n, 4)).astype("float32")
        if rng.integers(2):
            x = tracer.tensor(x)
        y = rng.integers(0, 3, size=n)
        batch = kinds[int(rng.integers(len(kinds)))](x, y)
        scale = float(rng.uniform(0.5, 2.0))
        value, grads = step(batch, scale=scale) if rng.integers(2) else step(batch, scale)
        xt = x if isinstance(x, tracer.Tensor) else tracer.tensor(x)
        eager = fn({"x": xt, "y": tracer.tensor(y)}, scale)
        np.testing.assert_allclose(float(value), float(eager), rtol=1e-5)
        _, ref = autodiff.value_and_grad(fn, wrt=params)({"x": xt, "y": y}, scale)
        for g, r in zip(grads, ref, strict=True):
            np.testing.assert_allclose(g.numpy(), r.numpy(), rtol=1e-4, atol=1e-6)
        if rng.integers(4) == 0:  # an optimizer's in-place update between calls
            for p, g in zip(params, grads, strict=True):
                p -= 0.1 * g
