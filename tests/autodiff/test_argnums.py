"""JAX's positional form (issue 19, item 7): grad(fn, argnums=...) differentiates with respect to whatever
floating-point tensors, arrays and numbers those arguments hold (pytrees), gradients in their structure."""
from collections import namedtuple

import numpy as np
import pytest

import autodiff
import tracer
from tests.torch_optional import torch

RNG = np.random.default_rng(5)
X = RNG.normal(size=(16, 3)).astype("float32")
T = RNG.normal(size=(16,)).astype("float32")
Params = namedtuple("Params", ["w", "b"])


def loss(params, x, t):
    return ((x @ params["w"] + params["b"] - t) ** 2).mean()


def torch_grads(w, b, x, t):
    tw, tb = torch.tensor(w, requires_grad=True), torch.tensor(b, requires_grad=True)
    value = ((torch.tensor(x) @ tw + tb - torch.tensor(t)) ** 2).mean()
    value.backward()
    return float(value), tw.grad.numpy(), tb.grad.numpy()


def test_argnums_zero_on_a_dict_of_tensors_matches_torch():
    w, b = RNG.normal(size=3).astype("float32"), np.zeros(1, "float32")
    params = {"w": tracer.tensor(w), "b": tracer.tensor(b)}
    value, g = autodiff.value_and_grad(loss, argnums=0)(params, X, T)
    want, gw, gb = torch_grads(w, b, X, T)
    assert isinstance(g, dict) and list(g) == ["w", "b"]
    np.testing.assert_allclose(float(value), want, rtol=1e-5)
    np.testing.assert_allclose(g["w"].numpy(), gw, rtol=1e-4)
    np.testing.assert_allclose(g["b"].numpy(), gb, rtol=1e-4)


def test_jax_style_functional_training_loop_matches_torch():
    w, b = np.zeros(3, "float32"), np.zeros(1, "float32")
    params = {"w": tracer.tensor(w), "b": tracer.tensor(b)}
    tw, tb = torch.zeros(3, requires_grad=True), torch.zeros(1, requires_grad=True)
    step = autodiff.value_and_grad(loss, argnums=0)
    for _ in range(5):
        value, g = step(params, X, T)
        params = {k: params[k] - 0.1 * g[k] for k in params}  # new tensors every step
        ref = ((torch.tensor(X) @ tw + tb - torch.tensor(T)) ** 2).mean()
        gw, gb = torch.autograd.grad(ref, [tw, tb])
        with torch.no_grad():
            tw, tb = (tw - 0.1 * gw).requires_grad_(), (tb - 0.1 * gb).requires_grad_()
        np.testing.assert_allclose(float(value), float(ref), rtol=1e-5)
    np.testing.assert_allclose(params["w"].numpy(), tw.detach().numpy(), rtol=1e-4, atol=1e-6)


def test_tuple_argnums_and_arrays_and_floats():
    w = RNG.normal(size=3)  # a float64 NumPy array
    fn = lambda w, x, s: (tracer.tanh(x @ w) * s).sum()  # noqa: E731
    gw, gs = autodiff.grad(fn, argnums=(0, 2))(w, X.astype("float64"), 1.5)
    tw, ts = torch.tensor(w, requires_grad=True), torch.tensor(1.5, dtype=torch.float64, requires_grad=True)
    (torch.tanh(torch.tensor(X, dtype=torch.float64) @ tw) * ts).sum().backward()
    np.testing.assert_allclose(gw.numpy(), tw.grad.numpy(), rtol=1e-10)
    np.testing.assert_allclose(float(gs.numpy()), float(ts.grad), rtol=1e-10)


def test_structure_namedtuple_list_nested_and_none_leaves():
    p = Params(w=[tracer.tensor(np.ones(3, "float32"))], b={"bias": tracer.tensor(np.zeros(1, "float32")),
                                                            "unused": None})

    def fn(p, x):
        return ((x @ p.w[0]) + p.b["bias"]).sum()

    g = autodiff.grad(fn, argnums=0)(p, X)
    assert type(g) is Params and isinstance(g.w, list) and g.b["unused"] is None
    np.testing.assert_allclose(g.w[0].numpy(), X.sum(0), rtol=1e-5)
    np.testing.assert_allclose(g.b["bias"].numpy(), [16.0])


def test_an_argnum_leaf_fn_does_not_read_gets_zeros_as_in_jax():
    params = {"w": tracer.tensor(np.ones(3, "float32")), "spare": tracer.tensor(np.ones(2, "float32"))}
    g = autodiff.grad(lambda p, x: (x @ p["w"]).sum(), argnums=0)(params, X)
    np.testing.assert_array_equal(g["spare"].numpy(), np.zeros(2, "float32"))


def test_same_tensor_in_two_argnums_is_differentiated_per_position():
    a = tracer.tensor(np.array([1.0, 2.0, 3.0], "float32"))
    ga, gb = autodiff.grad(lambda p, q: (p * p * q).sum(), argnums=(0, 1))(a, a)
    np.testing.assert_allclose(ga.numpy(), 2 * a.numpy() ** 2)  # d/dp p^2 q = 2pq
    np.testing.assert_allclose(gb.numpy(), a.numpy() ** 2)  # d/dq = p^2


def test_captured_tensors_are_constants_under_argnums():
    w = tracer.tensor(np.ones(3, "float32"))
    g = autodiff.grad(lambda x: (x @ w).sum(), argnums=0)(X)
    np.testing.assert_allclose(g.numpy(), np.ones_like(X))


def test_has_aux_with_argnums():
    (value, aux), g = autodiff.value_and_grad(lambda x: ((x ** 2).sum(), {"mean": x.mean()}), argnums=0,
                                              has_aux=True)(X)
    np.testing.assert_allclose(g.numpy(), 2 * X, rtol=1e-6)
    np.testing.assert_allclose(float(aux["mean"]), X.mean(), rtol=1e-5)


def test_second_order_with_argnums():
    x0 = RNG.normal(size=(4,))
    inner = autodiff.grad(lambda x: tracer.sin(x).sum() * (x ** 2).sum(), argnums=0)
    g2 = autodiff.grad(lambda x: inner(x).sum(), argnums=0)(x0)
    tx = torch.tensor(x0, requires_grad=True)
    (g1,) = torch.autograd.grad(torch.sin(tx).sum() * (tx ** 2).sum(), tx, create_graph=True)
    (want,) = torch.autograd.grad(g1.sum(), tx)
    np.testing.assert_allclose(g2.numpy(), want.numpy(), rtol=1e-10)


def test_integer_leaves_are_refused_naming_the_leaf():
    params = {"w": tracer.tensor(np.ones(3, "float32")), "steps": np.arange(3)}
    with pytest.raises(TypeError, match=r"args\[0\]\['steps'\].*int64"):
        autodiff.grad(lambda p, x: (x @ p["w"]).sum(), argnums=0)(params, X)
    with pytest.raises(TypeError, match=r"args\[1\].*int"):
        autodiff.grad(lambda x, n: (x * n).sum(), argnums=(0, 1))(X, 3)
    with pytest.raises(TypeError, match=r"args\[0\]\[1\].*str"):
        autodiff.grad(lambda p: p[0].sum(), argnums=0)((tracer.tensor(np.ones(2, "float32")), "name"))


def test_argnums_out_of_range_and_bad_types():
    with pytest.raises(ValueError, match="argnums=2.*2 positional"):
        autodiff.grad(lambda a, b: a.sum(), argnums=2)(X, X)
    with pytest.raises(TypeError, match="argnums"):
        autodiff.grad(lambda a: a.sum(), argnums="0")
    with pytest.raises(TypeError, match="argnums"):
        autodiff.grad(lambda a: a.sum(), argnums=(0, 0))


def test_exactly_one_of_wrt_and_argnums():
    w = tracer.tensor(np.ones(3, "float32"))
    with pytest.raises(TypeError, match="exactly one of wrt= or argnums="):
        autodiff.grad(lambda x: x.sum())
    with pytest.raises(TypeError, match="exactly one of wrt= or argnums="):
        autodiff.value_and_grad(lambda x: x.sum(), wrt=[w], argnums=0)
    # the positional wrt of earlier releases still works
    (g,) = autodiff.grad(lambda x: (x @ w).sum(), [w])(X)
    np.testing.assert_allclose(g.numpy(), X.sum(0), rtol=1e-5)
    value, (g,) = autodiff.value_and_grad(lambda x: (x @ w).sum(), [w])(X)
    np.testing.assert_allclose(g.numpy(), X.sum(0), rtol=1e-5)
