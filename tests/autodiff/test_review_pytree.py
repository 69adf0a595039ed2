"""Review of pytree arguments, argnums, the unused-wrt rule and distinct results (issue 19, items 1, 5, 6, 7, 18):
scenarios a JAX or PyTorch user writes, each compared with an eager run of the same Python (and torch)."""
import numpy as np
import pytest

import autodiff
import tracer
from nn import optim
from tests.torch_optional import torch

X = np.array([3.0, 4.0], "float32")


def _value(result):
    return float(result[0])


# ------------------------------------------------------------------ in-place writes through aliased leaves

def _add_then_read(b):
    b[0].add_(1.0)  # writes the first leaf in place ...
    return (b[1] * b[1]).sum()  # ... and reads the second: eagerly the same tensor, so the write shows


def test_same_tensor_at_two_leaves_written_through_one_never_gives_the_stale_value():
    eager_t = tracer.tensor(X)
    eager = float(_add_then_read([eager_t, eager_t]))  # (X + 1) ** 2 summed: 41
    step = autodiff.value_and_grad(_add_then_read, argnums=0)
    t = tracer.tensor(X)
    with pytest.raises(ValueError, match=r"args\[0\]\[1\] is the same tensor.*args\[0\]\[0\]"):
        got = _value(step([t, t]))
        assert got == eager, f"compiled {got}, eager {eager}"  # the stale read gave 25, eager 41
    np.testing.assert_array_equal(t.numpy(), X)  # refused before anything was written


def test_same_array_at_two_leaves_written_through_one_is_refused():
    def fn(b):
        b[0] += 1.0
        return (b[1] * b[1]).sum()
    step = autodiff.value_and_grad(fn, argnums=0)
    x = X.copy()
    with pytest.raises(ValueError, match=r"args\[0\]\[1\]"):
        step([x, x])
    base = np.arange(4, dtype="float32")
    with pytest.raises(ValueError, match="buffer"):  # a view of a written argument: the same memory
        step([base, base[:2]])


def test_argument_written_in_place_that_fn_also_reads_as_a_captured_tensor_is_refused():
    w = tracer.tensor(X)

    def fn(a):
        a.add_(1.0)
        return (w * w).sum()  # eagerly w is a: 3*3 + ... of the written values
    step = autodiff.value_and_grad(fn, argnums=0)
    with pytest.raises(ValueError, match=r"args\[0\]"):
        step(w)
    np.testing.assert_array_equal(w.numpy(), X)
    other = tracer.tensor(X)
    value, _ = step(other)  # no alias: the eager answer, and the write lands
    assert float(value) == float((w * w).sum())
    np.testing.assert_array_equal(other.numpy(), X + 1)


# ------------------------------------------------------------------ object leaves and iterators

class Batch:
    def __init__(self, x):
        self.x = x


def test_a_new_object_argument_at_a_reused_address_is_not_served_the_old_trace():
    w = tracer.tensor(X)
    step = autodiff.value_and_grad(lambda b: (b.x * w).sum(), wrt=w)
    ids = set()
    for k in range(5):
        b = Batch(np.full(2, float(k), "float32"))
        ids.add(id(b))
        value, grad = step(b)
        assert float(value) == 7.0 * k, (k, float(value))
        np.testing.assert_array_equal(grad.numpy(), b.x)
        del b
    assert len(ids) < 5  # CPython gave a freed object's address to the next one: the case this test is about

    # the same object, passed again, still replays: tensors on it are found again where the trace found them
    calls = []

    def counted(b):
        calls.append(1)
        return (b.x * w).sum()
    step = autodiff.value_and_grad(counted, wrt=w)
    b = Batch(tracer.tensor(np.ones(2, "float32")))
    for k in range(3):
        b.x = tracer.tensor(np.full(2, float(k), "float32"))
        assert float(step(b)[0]) == 7.0 * k
    assert len(calls) == 1


def test_a_generator_argument_is_refused_naming_it():
    w = tracer.tensor(X)
    step = autodiff.value_and_grad(lambda xs: sum((v * w).sum() for v in xs), wrt=w)
    for k in range(2):
        gen = (v for v in [np.full(2, float(k), "float32")])
        with pytest.raises(TypeError, match=r"args\[0\].*generator.*list"):
            step(gen)
        del gen
    with pytest.raises(TypeError, match=r"kwargs\['xs'\]\[1\].*iterator"):
        step(xs=[X, iter([X])])


# ------------------------------------------------------------------ the unused-wrt rule, against torch

def test_a_parameter_only_in_aux_or_behind_stop_gradient_gets_none_as_in_torch():
    w0, v0, u0, z0 = (np.array([1.0, -2.0, 0.5], "float64") * (i + 1) for i in range(4))
    w, v, u, z = (tracer.tensor(a.copy()) for a in (w0, v0, u0, z0))
    x = np.array([0.3, -0.7, 1.1])

    def fn(x):
        # z: in the graph with a zero gradient, twice (torch's dropout(p=1) is z * 0)
        loss = (x * w).sum() + (tracer.stop_gradient(u) * x).sum() + (z * 0.0).sum() + tracer.dropout(z, 1.0).sum()
        return loss, {"v": (v * 2).sum()}  # v: a metric in aux only
    (value, aux), grads = autodiff.value_and_grad(fn, wrt=[w, v, u, z], has_aux=True)(x)

    tw, tv, tu, tz = (torch.tensor(a.copy(), requires_grad=True) for a in (w0, v0, u0, z0))
    tx = torch.tensor(x)
    tloss = (tx * tw).sum() + (tu.detach() * tx).sum() + (tz * 0.0).sum() + torch.nn.functional.dropout(tz, 1.0).sum()
    taux = (tv * 2).sum()
    tloss.backward()
    np.testing.assert_allclose(float(value), tloss.item())
    np.testing.assert_allclose(float(aux["v"]), taux.item())
    for g, t in zip(grads, (tw, tv, tu, tz), strict=True):
        if t.grad is None:
            assert g is None, g
        else:
            np.testing.assert_allclose(g.numpy(), t.grad.numpy())

    # so an optimizer leaves v and u alone, as torch.optim.AdamW does (no decay either)
    opt = optim.AdamW([w, v, u, z], lr=0.1, weight_decay=0.5)
    topt = torch.optim.AdamW([tw, tv, tu, tz], lr=0.1, weight_decay=0.5)
    opt.step(grads)
    topt.step()
    for p, t in zip((w, v, u, z), (tw, tv, tu, tz), strict=True):
        np.testing.assert_allclose(p.numpy(), t.detach().numpy(), rtol=1e-12)


def test_a_parameter_used_only_through_an_integer_op_gets_none_as_in_torch():
    w0 = np.array([0.5, 2.0, -1.0], "float32")
    w, h = tracer.tensor(w0.copy()), tracer.tensor(np.ones(3, "float32"))
    table = tracer.tensor(np.array([10.0, 20.0, 30.0], "float32"))

    def fn():
        return (table[tracer.argmax(w)] * h).sum()  # w picks an index: not in torch's graph
    gw, gh = autodiff.grad(fn, wrt=[w, h])()
    tw = torch.tensor(w0, requires_grad=True)
    th = torch.ones(3, requires_grad=True)
    (torch.tensor([10.0, 20.0, 30.0])[torch.argmax(tw)] * th).sum().backward()
    assert tw.grad is None and gw is None
    np.testing.assert_allclose(gh.numpy(), th.grad.numpy())


# ------------------------------------------------------------------ distinct buffers

def test_the_same_wrt_tensor_twice_gets_two_buffers():
    w = tracer.tensor(np.array([1.0, 2.0], "float32"))
    step = autodiff.value_and_grad(lambda x: (w * x).sum(), wrt={"a": w, "b": w})
    for _ in range(2):  # first call and replay
        _, g = step(X)
        np.testing.assert_array_equal(g["a"].numpy(), X)
        np.testing.assert_array_equal(g["b"].numpy(), X)
        assert not np.shares_memory(g["a"].numpy(), g["b"].numpy())
        g["a"].numpy()[...] = 0.0  # clipping one in place must leave the other alone
        np.testing.assert_array_equal(g["b"].numpy(), X)


# ------------------------------------------------------------------ argnums as JAX takes it

def test_argnums_takes_negative_numpy_and_list_indices_as_jax():
    f = lambda a, b: (a * b * b).sum()  # noqa: E731
    y = np.array([5.0, 6.0], "float32")
    want_a, want_b = y * y, 2 * X * y
    np.testing.assert_allclose(autodiff.grad(f, argnums=-1)(X, y).numpy(), want_b)
    np.testing.assert_allclose(autodiff.grad(f, argnums=np.int64(0))(X, y).numpy(), want_a)
    ga, gb = autodiff.grad(f, argnums=[0, -1])(X, y)
    np.testing.assert_allclose(ga.numpy(), want_a)
    np.testing.assert_allclose(gb.numpy(), want_b)
    with pytest.raises(ValueError, match="argnums"):
        autodiff.grad(f, argnums=-3)(X, y)
    with pytest.raises(ValueError, match="argnums.*same argument"):
        autodiff.grad(f, argnums=(1, -1))(X, y)
    with pytest.raises(TypeError, match="argnums"):
        autodiff.grad(f, argnums=True)


# ------------------------------------------------------------------ nested steps keep a number's weak dtype

def test_a_number_passed_through_a_nested_step_stays_weak():
    inner = autodiff.value_and_grad(lambda a, s: (a ** 2).sum() * s, argnums=0)

    def outer(x, s):
        value, g = inner(x, s)
        return value + g.sum()
    eager_value = outer(tracer.tensor(X), 2.0)
    value, _ = autodiff.value_and_grad(outer, argnums=0)(X, 2.0)
    assert eager_value.dtype == "float32"
    assert value.dtype == eager_value.dtype



def test_a_baked_negative_zero_is_not_served_the_positive_zero_trace():
    import math
    w = tracer.tensor(X)

    def fn(x, c):
        steps = len(range(int(c) + 1))  # c used as a Python value: numbers are baked, one trace per value
        return (x * w).sum() * math.copysign(1.0, c) * steps
    step = autodiff.value_and_grad(fn, wrt=w)
    x = np.ones(2, "float32")
    for c in (0.0, -0.0, 0.0, -0.0):
        assert float(step(x, c)[0]) == float(fn(tracer.tensor(x), c)), c
