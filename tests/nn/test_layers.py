"""Every layer's forward, eager and traced, against a NumPy reference of its formula (and PyTorch)."""
import numpy as np
import pytest

import nn
import tracer
from tests.nn import references as ref
from tests.nn.helpers import both

rng = np.random.default_rng(0)


def _x(*shape):
    return rng.standard_normal(shape).astype("float32")


def _sd(m):
    return m.state_dict()


# name -> (make the module, make the input, NumPy reference given the state dict and input)
CASES = {
    "linear": (lambda: nn.Linear(5, 3), lambda: _x(4, 5), lambda s, x: ref.linear(x, s["weight"], s["bias"])),
    "linear_3d_no_bias": (lambda: nn.Linear(5, 3, bias=False), lambda: _x(2, 4, 5),
                          lambda s, x: ref.linear(x, s["weight"])),
    "conv2d": (lambda: nn.Conv2d(3, 4, 3), lambda: _x(2, 3, 7, 6),
               lambda s, x: ref.conv2d(x, s["weight"], s["bias"])),
    "conv2d_strided_padded": (lambda: nn.Conv2d(2, 4, (3, 2), stride=2, padding=1), lambda: _x(2, 2, 7, 6),
                              lambda s, x: ref.conv2d(x, s["weight"], s["bias"], (2, 2), (1, 1))),
    "conv2d_dilated_grouped": (lambda: nn.Conv2d(4, 6, 3, dilation=2, groups=2, bias=False), lambda: _x(1, 4, 8, 8),
                               lambda s, x: ref.conv2d(x, s["weight"], None, dilation=(2, 2), groups=2)),
    "maxpool": (lambda: nn.MaxPool2d(2), lambda: _x(2, 3, 6, 7), lambda s, x: ref.pool2d(x, (2, 2), (2, 2), (0, 0), "max")),
    "maxpool_padded": (lambda: nn.MaxPool2d(3, stride=2, padding=1), lambda: -np.abs(_x(1, 2, 7, 7)),
                       lambda s, x: ref.pool2d(x, (3, 3), (2, 2), (1, 1), "max")),
    "avgpool_padded": (lambda: nn.AvgPool2d(3, stride=2, padding=1), lambda: _x(1, 2, 7, 7),
                       lambda s, x: ref.pool2d(x, (3, 3), (2, 2), (1, 1), "avg")),
    "layernorm": (lambda: _perturbed(nn.LayerNorm(6)), lambda: _x(3, 4, 6) * 3 + 1,
                  lambda s, x: ref.layer_norm(x, s["weight"], s["bias"])),
    "relu": (nn.ReLU, lambda: _x(3, 4), lambda s, x: np.maximum(x, 0)),
    "gelu": (nn.GELU, lambda: _x(3, 4) * 3, lambda s, x: ref.gelu(x)),
    "tanh": (nn.Tanh, lambda: _x(3, 4), lambda s, x: np.tanh(x)),
    "flatten": (nn.Flatten, lambda: _x(2, 3, 4, 5), lambda s, x: x.reshape(2, -1)),
    "flatten_middle": (lambda: nn.Flatten(1, 2), lambda: _x(2, 3, 4, 5), lambda s, x: x.reshape(2, 12, 5)),
    "dropout_eval": (lambda: nn.Dropout(0.5).eval(), lambda: _x(3, 4), lambda s, x: x),
    "attention": (lambda: _perturbed(nn.MultiheadAttention(8, 2, batch_first=True)), lambda: _x(2, 5, 8),
                  lambda s, x: ref.causal_attention(x, s["in_proj_weight"], s["in_proj_bias"], s["out_proj.weight"],
                                                    s["out_proj.bias"], 2)),
    "attention_one_head": (lambda: nn.MultiheadAttention(4, 1, bias=False, batch_first=True), lambda: _x(3, 4, 4),
                           lambda s, x: ref.causal_attention(x, s["in_proj_weight"], None, s["out_proj.weight"],
                                                             None, 1)),
    "mlp": (lambda: nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2)), lambda: _x(5, 4),
            lambda s, x: ref.linear(np.tanh(ref.linear(x, s["0.weight"], s["0.bias"])), s["2.weight"], s["2.bias"])),
}


def _perturbed(m):
    """Replace zero/one default inits by random values so the reference checks every term."""
    for p in m.parameters():
        p._data[...] = rng.standard_normal(p.shape) * 0.5
    return m


@pytest.mark.parametrize("name", CASES)
def test_forward_matches_numpy_eager_and_traced(name):
    make, make_x, reference = CASES[name]
    m, x = make(), make_x()
    expected = reference(_sd(m), x)
    for out in both(m, x):
        assert out.dtype == np.float32
        np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)


# torch's state-dict names and shapes for each layer case (checked against torch itself below, when installed)
STATE = {
    "linear": {"weight": (3, 5), "bias": (3,)}, "linear_3d_no_bias": {"weight": (3, 5)},
    "conv2d": {"weight": (4, 3, 3, 3), "bias": (4,)}, "conv2d_strided_padded": {"weight": (4, 2, 3, 2), "bias": (4,)},
    "conv2d_dilated_grouped": {"weight": (6, 2, 3, 3)}, "layernorm": {"weight": (6,), "bias": (6,)},
    "attention": {"in_proj_weight": (24, 8), "in_proj_bias": (24,), "out_proj.weight": (8, 8),
                  "out_proj.bias": (8,)},
    "attention_one_head": {"in_proj_weight": (12, 4), "out_proj.weight": (4, 4)},
    "mlp": {"0.weight": (8, 4), "0.bias": (8,), "2.weight": (2, 8), "2.bias": (2,)},
}


@pytest.mark.parametrize("name", CASES)
def test_state_dict_names_and_shapes(name):
    state = CASES[name][0]().state_dict()
    assert [(k, v.shape) for k, v in state.items()] == list(STATE.get(name, {}).items())


def test_embedding_looks_up_rows_eager_and_traced():
    m = nn.Embedding(10, 4)
    idx = np.array([[1, 2, 9], [0, 0, 3]])
    expected = m.state_dict()["weight"][idx]
    np.testing.assert_array_equal(np.asarray(m(idx)), expected)
    np.testing.assert_array_equal(np.asarray(m(tracer.tensor(idx))), expected)
    for out in both(m, idx):
        np.testing.assert_array_equal(out, expected)


def test_dropout_training_zeroes_and_scales_with_fresh_masks():
    m = nn.Dropout(0.25)
    x = np.ones((200, 50), "float32")
    a, b = np.asarray(m(x)), np.asarray(m(x))
    assert set(np.unique(a).tolist()) <= {0.0, float(np.float32(1 / 0.75))}
    assert abs((a == 0).mean() - 0.25) < 0.03
    assert not np.array_equal(a, b)
    with pytest.raises(ValueError):
        nn.Dropout(1.5)


def test_attention_is_causal():
    m = nn.MultiheadAttention(8, 4, batch_first=True)
    x = _x(1, 6, 8)
    changed = x.copy()
    changed[:, 4:] += 10.0  # later positions cannot affect earlier outputs
    a, b = np.asarray(m(x)), np.asarray(m(changed))
    np.testing.assert_allclose(a[:, :4], b[:, :4], rtol=1e-5, atol=1e-6)
    assert not np.allclose(a[:, 4:], b[:, 4:])


def test_constructor_errors():
    with pytest.raises(ValueError, match="divisible"):
        nn.MultiheadAttention(6, 4)
    with pytest.raises(ValueError, match="groups"):
        nn.Conv2d(3, 4, 3, groups=2)
    with pytest.raises(ValueError, match=r"expected query \(L, B, E\) with E=8"):
        nn.MultiheadAttention(8, 2)(np.zeros((1, 2, 4), "float32"))


# ---------------------------------------------------------------- against PyTorch, weights copied over

def _torch_module(name):
    torch = pytest.importorskip("torch")
    tnn = torch.nn
    return torch, {
        "linear": lambda: tnn.Linear(5, 3), "linear_3d_no_bias": lambda: tnn.Linear(5, 3, bias=False),
        "conv2d": lambda: tnn.Conv2d(3, 4, 3), "conv2d_strided_padded": lambda: tnn.Conv2d(2, 4, (3, 2), 2, 1),
        "conv2d_dilated_grouped": lambda: tnn.Conv2d(4, 6, 3, dilation=2, groups=2, bias=False),
        "maxpool": lambda: tnn.MaxPool2d(2), "maxpool_padded": lambda: tnn.MaxPool2d(3, 2, 1),
        "avgpool_padded": lambda: tnn.AvgPool2d(3, 2, 1), "layernorm": lambda: tnn.LayerNorm(6),
        "relu": tnn.ReLU, "gelu": tnn.GELU, "tanh": tnn.Tanh, "flatten": tnn.Flatten,
        "flatten_middle": lambda: tnn.Flatten(1, 2), "dropout_eval": lambda: tnn.Dropout(0.5).eval(),
        "mlp": lambda: tnn.Sequential(tnn.Linear(4, 8), tnn.Tanh(), tnn.Linear(8, 2)),
    }.get(name)


@pytest.mark.parametrize("name", CASES)
def test_forward_matches_torch(name):
    torch, make_torch = _torch_module(name)
    make, make_x, _ = CASES[name]
    m, x = make(), make_x()
    if name.startswith("attention"):
        heads = 2 if name == "attention" else 1
        tm = torch.nn.MultiheadAttention(x.shape[-1], heads, bias=name == "attention", batch_first=True)
        mask = torch.nn.Transformer.generate_square_subsequent_mask(x.shape[1])
        tx = torch.tensor(x)
        run = lambda: tm(tx, tx, tx, attn_mask=mask, need_weights=False)[0]  # noqa: E731
    else:
        tm = make_torch()
        run = lambda: tm(torch.tensor(x))  # noqa: E731
    # the state dicts share names and layouts, both ways
    assert [(k, tuple(v.shape)) for k, v in tm.state_dict().items()] == list(STATE.get(name, {}).items())
    tm.load_state_dict({k: torch.tensor(v) for k, v in m.state_dict().items()})
    with torch.no_grad():
        expected = run().numpy()
    np.testing.assert_allclose(np.asarray(m(x)), expected, rtol=1e-4, atol=1e-5)
    m.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})


def test_embedding_matches_torch():
    torch = pytest.importorskip("torch")
    m, tm = nn.Embedding(7, 3), torch.nn.Embedding(7, 3)
    tm.load_state_dict({k: torch.tensor(v) for k, v in m.state_dict().items()})
    idx = np.array([[6, 0], [2, 2]])
    np.testing.assert_array_equal(np.asarray(m(idx)), tm(torch.tensor(idx)).detach().numpy())
