"""Gradients of the layers with parameters (and of their inputs) against float64 finite differences."""
import numpy as np
import pytest

import autodiff
import nn
import tracer
from nn import functional as F
from tests.nn.helpers import check_grads, weighted_sum

rng = np.random.default_rng(3)


def _x(*shape):
    return tracer.tensor(rng.standard_normal(shape))  # float64


def _perturb(m):
    for p in m.parameters():
        p._data[...] = rng.standard_normal(p.shape) * 0.5
    return m


LAYERS = {
    "linear": (lambda: nn.Linear(4, 3, dtype="float64"), lambda: _x(2, 5, 4)),
    "conv2d": (lambda: nn.Conv2d(2, 3, 3, stride=2, padding=1, dtype="float64"), lambda: _x(2, 2, 5, 5)),
    "conv2d_grouped": (lambda: nn.Conv2d(4, 2, 2, dilation=2, groups=2, dtype="float64"), lambda: _x(1, 4, 5, 5)),
    "layernorm": (lambda: _perturb(nn.LayerNorm(5, dtype="float64")), lambda: _x(3, 5)),
    "attention": (lambda: _perturb(nn.MultiheadAttention(4, 2, batch_first=True, dtype="float64")), lambda: _x(2, 3, 4)),
}


@pytest.mark.parametrize("name", LAYERS)
def test_layer_gradients(name):
    make, make_x = LAYERS[name]
    m, x = make(), make_x()
    check_grads(lambda: weighted_sum(m(x)), [x, *m.parameters()])


def test_embedding_gradient_accumulates_repeated_rows():
    m = nn.Embedding(6, 3, dtype="float64")
    idx = np.array([[0, 2, 2], [5, 2, 0]])
    check_grads(lambda: weighted_sum(m(idx)), m.parameters())
    (g,) = autodiff.grad(lambda: m(idx).sum(), wrt=m.parameters())()
    np.testing.assert_array_equal(np.asarray(g)[:, 0], [2, 0, 3, 0, 0, 1])


def test_mlp_with_cross_entropy_gradients():
    model = nn.Sequential(nn.Linear(4, 5, dtype="float64"), nn.GELU(), nn.Linear(5, 3, dtype="float64"))
    x, y = _x(6, 4), np.array([0, 2, 1, 1, 0, 2])
    check_grads(lambda: F.cross_entropy(model(x), y), model.parameters())


def test_gradients_match_torch():
    torch = pytest.importorskip("torch")
    m = _perturb(nn.MultiheadAttention(8, 2, batch_first=True, dtype="float64"))
    x = rng.standard_normal((2, 5, 8))
    w = rng.standard_normal((2, 5, 8))
    grads = autodiff.grad(lambda a: (m(a) * tracer.tensor(w)).sum(), wrt=m.parameters())(x)
    tm = torch.nn.MultiheadAttention(8, 2, batch_first=True, dtype=torch.float64)
    tm.load_state_dict({k: torch.tensor(v) for k, v in m.state_dict().items()})
    tx = torch.tensor(x)
    mask = torch.nn.Transformer.generate_square_subsequent_mask(5, dtype=torch.float64)
    (tm(tx, tx, tx, attn_mask=mask, need_weights=False)[0] * torch.tensor(w)).sum().backward()
    for g, (name, p) in zip(grads, tm.named_parameters(), strict=True):
        np.testing.assert_allclose(np.asarray(g), p.grad.numpy(), rtol=1e-7, atol=1e-9, err_msg=name)
