"""has_aux returns aux pytrees of any kind with the same structure (issue 19, item 18), and everything a
step hands back is memory of its own: an aux output never shares a buffer with a gradient (item 5)."""
from collections import OrderedDict, namedtuple

import numpy as np
import pytest

import autodiff
import tracer
from tests.torch_optional import torch

X = np.random.default_rng(9).normal(size=(4, 3)).astype("float32")
Stats = namedtuple("Stats", ["mean", "maximum"])


def make_aux(h):
    return {"stats": Stats(h.mean(), h.max()), "hidden": [h, (h * 2,)], "none": None, "count": 3,
            "ordered": OrderedDict([("z", h.sum())])}


def check_aux(aux, h):
    assert isinstance(aux, dict) and list(aux) == ["stats", "hidden", "none", "count", "ordered"]
    assert type(aux["stats"]) is Stats
    assert isinstance(aux["hidden"], list) and isinstance(aux["hidden"][1], tuple)
    assert aux["none"] is None and aux["count"] == 3
    assert type(aux["ordered"]) is OrderedDict
    np.testing.assert_allclose(float(aux["stats"].mean), h.mean(), rtol=1e-5)
    np.testing.assert_allclose(float(aux["stats"].maximum), h.max(), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(aux["hidden"][1][0]), 2 * h, rtol=1e-6)
    np.testing.assert_allclose(float(aux["ordered"]["z"]), h.sum(), rtol=1e-5)


def test_aux_pytree_compiled_and_replayed():
    w = tracer.tensor(np.ones(3, "float32"))
    step = autodiff.value_and_grad(lambda x: ((x * w).sum(), make_aux(tracer.tanh(x * w))), wrt=[w], has_aux=True)
    for k in range(2):
        (value, aux), _ = step(X + k)
        check_aux(aux, np.tanh(X + k))
    g, aux = autodiff.grad(lambda x: ((x * w).sum(), make_aux(tracer.tanh(x))), wrt=[w], has_aux=True)(X)
    check_aux(aux, np.tanh(X))


def test_namedtuple_and_dict_aux_alone():
    w = tracer.tensor(np.ones(3, "float32"))
    (_, aux), _ = autodiff.value_and_grad(lambda x: ((x * w).sum(), Stats(x.mean(), x.max())), wrt=[w],
                                          has_aux=True)(X)
    assert type(aux) is Stats
    (_, aux), _ = autodiff.value_and_grad(lambda x: ((x * w).sum(), {"m": x.mean()}), wrt=[w], has_aux=True)(X)
    np.testing.assert_allclose(float(aux["m"]), X.mean(), rtol=1e-5)


def test_aux_pytree_inside_a_trace():
    def outer(w):
        (value, aux), (g,) = autodiff.value_and_grad(
            lambda x: ((x * w).sum(), {"s": Stats(x.mean(), (x * w).max()), "n": None}), wrt=[w], has_aux=True)(
            tracer.tensor(X.astype("float64")))
        assert type(aux["s"]) is Stats and aux["n"] is None
        return g.sum() + aux["s"].maximum
    w = tracer.tensor(np.ones(3))
    got = autodiff.grad(outer, wrt=w)(w)
    tw = torch.ones(3, dtype=torch.float64, requires_grad=True)
    tx = torch.tensor(X.astype("float64"))
    (g,) = torch.autograd.grad((tx * tw).sum(), tw, create_graph=True)
    (want,) = torch.autograd.grad(g.sum() + (tx * tw).max(), tw)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-10)


def test_has_aux_requires_a_pair():
    with pytest.raises(TypeError, match="pair"):
        autodiff.value_and_grad(lambda x: x.sum(), argnums=0, has_aux=True)(X)


def test_aux_and_gradient_never_share_a_buffer():
    # d/dw sum(w * tanh(x)) is tanh(x) itself: the array handed back as aux, unless copied
    fns = [lambda w, x: ((w * tracer.tanh(x)).sum(), tracer.tanh(x)),
           lambda w, x: ((w * tracer.tanh(x)).sum(), {"t": [tracer.tanh(x)]}),
           lambda w, x: ((w * x).sum(), x * 1.0)]
    w = tracer.tensor(np.ones_like(X))
    for fn in fns:
        step = autodiff.value_and_grad(fn, argnums=0, has_aux=True)
        for _ in range(2):  # the first (tracing) call and a replay
            (_, aux), g = step(w, X)
            aux = aux if isinstance(aux, tracer.Tensor) else aux["t"][0]
            want = aux.numpy().copy()
            g._data[...] = 0.0  # an optimizer zeroing the gradient in place
            np.testing.assert_array_equal(aux.numpy(), want)
