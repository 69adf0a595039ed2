"""Layers, norms and activations against torch (float64), weights copied both ways; their own behaviour without torch."""
import numpy as np
import pytest

import nn
import tracer

from .torch_pairs import assert_same, randomize

rng = np.random.default_rng(0)


def _x(*shape):
    return rng.standard_normal(shape)


D = dict(dtype="float64")

# name: (tracegrad module, torch module from (tnn, torch float64 kwargs), inputs)
CASES = {
    "batchnorm1d_2d_input": (lambda: nn.BatchNorm1d(4, **D), lambda tnn, T: tnn.BatchNorm1d(4, **T), lambda: [_x(8, 4)]),
    "batchnorm1d_3d_input": (lambda: nn.BatchNorm1d(4, momentum=0.3, **D), lambda tnn, T: tnn.BatchNorm1d(4, momentum=0.3, **T),
                             lambda: [_x(5, 4, 6)]),
    "batchnorm2d": (lambda: nn.BatchNorm2d(3, **D), lambda tnn, T: tnn.BatchNorm2d(3, **T), lambda: [_x(4, 3, 5, 5) * 2 + 1]),
    "batchnorm2d_no_affine": (lambda: nn.BatchNorm2d(3, affine=False, **D), lambda tnn, T: tnn.BatchNorm2d(3, affine=False, **T),
                              lambda: [_x(2, 3, 4, 4)]),
    "batchnorm2d_eval": (lambda: randomize_buffers(nn.BatchNorm2d(3, **D).eval()),
                         lambda tnn, T: tnn.BatchNorm2d(3, **T).eval(), lambda: [_x(2, 3, 4, 4)]),
    "batchnorm2d_no_running_stats": (lambda: nn.BatchNorm2d(3, track_running_stats=False, **D).eval(),
                                     lambda tnn, T: tnn.BatchNorm2d(3, track_running_stats=False, **T).eval(),
                                     lambda: [_x(2, 3, 4, 4)]),
    "groupnorm": (lambda: nn.GroupNorm(2, 6, **D), lambda tnn, T: tnn.GroupNorm(2, 6, **T), lambda: [_x(3, 6, 4, 4)]),
    "groupnorm_3d": (lambda: nn.GroupNorm(3, 6, eps=1e-3, **D), lambda tnn, T: tnn.GroupNorm(3, 6, eps=1e-3, **T),
                     lambda: [_x(2, 6, 5)]),
    "layernorm_no_affine": (lambda: nn.LayerNorm(6, elementwise_affine=False, **D),
                            lambda tnn, T: tnn.LayerNorm(6, elementwise_affine=False, **T), lambda: [_x(3, 6)]),
    "layernorm_two_axes": (lambda: nn.LayerNorm((4, 6), **D), lambda tnn, T: tnn.LayerNorm((4, 6), **T),
                           lambda: [_x(2, 4, 6)]),
    "layernorm_no_bias": (lambda: nn.LayerNorm(6, bias=False, **D), lambda tnn, T: tnn.LayerNorm(6, bias=False, **T),
                          lambda: [_x(2, 3, 6)]),
    "conv1d": (lambda: nn.Conv1d(4, 6, 3, stride=2, padding=1, **D), lambda tnn, T: tnn.Conv1d(4, 6, 3, stride=2, padding=1, **T),
               lambda: [_x(2, 4, 9)]),
    "conv1d_same_dilated_grouped": (lambda: nn.Conv1d(4, 6, 4, padding="same", dilation=2, groups=2, **D),
                                    lambda tnn, T: tnn.Conv1d(4, 6, 4, padding="same", dilation=2, groups=2, **T),
                                    lambda: [_x(2, 4, 10)]),
    "conv2d_same_even_kernel": (lambda: nn.Conv2d(3, 4, (2, 4), padding="same", **D),
                                lambda tnn, T: tnn.Conv2d(3, 4, (2, 4), padding="same", **T), lambda: [_x(2, 3, 6, 7)]),
    "conv2d_valid": (lambda: nn.Conv2d(3, 4, 3, padding="valid", bias=False, **D),
                     lambda tnn, T: tnn.Conv2d(3, 4, 3, padding="valid", bias=False, **T), lambda: [_x(1, 3, 5, 5)]),
    "unflatten": (lambda: nn.Unflatten(1, (2, 3)), lambda tnn, T: tnn.Unflatten(1, (2, 3)), lambda: [_x(4, 6)]),
    "flatten_unflatten": (lambda: nn.Sequential(nn.Flatten(), nn.Linear(12, 6, **D), nn.Unflatten(1, (3, -1))),
                          lambda tnn, T: tnn.Sequential(tnn.Flatten(), tnn.Linear(12, 6, **T), tnn.Unflatten(1, (3, -1))),
                          lambda: [_x(2, 3, 4)]),
    "dropout2d_eval": (lambda: nn.Dropout2d(0.5).eval(), lambda tnn, T: tnn.Dropout2d(0.5).eval(), lambda: [_x(2, 3, 4, 4)]),
    "softmax": (lambda: nn.Softmax(dim=1), lambda tnn, T: tnn.Softmax(dim=1), lambda: [_x(3, 4, 5)]),
    "log_softmax": (lambda: nn.LogSoftmax(dim=-1), lambda tnn, T: tnn.LogSoftmax(dim=-1), lambda: [_x(3, 4)]),
    "tanh": (nn.Tanh, lambda tnn, T: tnn.Tanh(), lambda: [_x(3, 4)]),
    "gelu_tanh": (lambda: nn.GELU(approximate="tanh"), lambda tnn, T: tnn.GELU(approximate="tanh"), lambda: [_x(3, 4) * 3]),
    "leaky_relu": (lambda: nn.LeakyReLU(0.2), lambda tnn, T: tnn.LeakyReLU(0.2), lambda: [_x(3, 4)]),
    "elu": (lambda: nn.ELU(0.7), lambda tnn, T: tnn.ELU(0.7), lambda: [_x(3, 4) * 30]),
    "softplus": (lambda: nn.Softplus(beta=2.0, threshold=5.0), lambda tnn, T: tnn.Softplus(beta=2.0, threshold=5.0),
                 lambda: [_x(4, 5) * 6]),
    "softplus_extremes": (nn.Softplus, lambda tnn, T: tnn.Softplus(), lambda: [np.array([-800.0, -30.0, 0.0, 19.0, 25.0, 900.0])]),
    "mish": (nn.Mish, lambda tnn, T: tnn.Mish(), lambda: [_x(3, 4) * 4]),
    "sigmoid": (nn.Sigmoid, lambda tnn, T: tnn.Sigmoid(), lambda: [_x(3, 4)]),
    "silu": (nn.SiLU, lambda tnn, T: tnn.SiLU(), lambda: [_x(3, 4)]),
    "mha_cross": (lambda: nn.MultiheadAttention(8, 2, batch_first=True, **D), lambda tnn, T: tnn.MultiheadAttention(8, 2, batch_first=True, **T),
                  lambda: [_x(2, 3, 8), _x(2, 5, 8), _x(2, 5, 8)]),
    "mha_seq_first_no_bias": (lambda: nn.MultiheadAttention(6, 3, bias=False, batch_first=False, **D),
                              lambda tnn, T: tnn.MultiheadAttention(6, 3, bias=False, **T),
                              lambda: [_x(4, 2, 6), _x(3, 2, 6), _x(3, 2, 6)]),
}


def randomize_buffers(bn):
    bn.running_mean._data[...] = rng.standard_normal(bn.running_mean.shape)
    bn.running_var._data[...] = rng.uniform(0.5, 2.0, bn.running_var.shape)
    return bn


@pytest.mark.parametrize("name", CASES)
def test_module_matches_torch_with_weights_copied_both_ways(name):
    torch = pytest.importorskip("torch")
    make, make_torch, make_inputs = CASES[name]
    ours, inputs = randomize(make()), make_inputs()
    theirs = make_torch(torch.nn, dict(dtype=torch.float64))
    assert_same(torch, ours, theirs, inputs)


# ---------------------------------------------------------------- attention masks and weights


def _mha_pair(torch, heads=2, e=8):
    ours = randomize(nn.MultiheadAttention(e, heads, batch_first=True, dtype="float64"))
    theirs = torch.nn.MultiheadAttention(e, heads, batch_first=True, dtype=torch.float64)
    theirs.load_state_dict({k: torch.tensor(v) for k, v in ours.state_dict().items()})
    return ours, theirs


@pytest.mark.parametrize("masks", ["bool_attn", "float_attn", "per_head_attn", "padding", "both", "causal"])
@pytest.mark.parametrize("average", [True, False])
def test_attention_masks_and_weights_match_torch(masks, average):
    torch = pytest.importorskip("torch")
    ours, theirs = _mha_pair(torch)
    q, k = _x(2, 3, 8), _x(2, 5, 8)
    kwargs = {}
    if masks in ("bool_attn", "both"):
        kwargs["attn_mask"] = rng.uniform(size=(3, 5)) < 0.3
    if masks == "float_attn":
        kwargs["attn_mask"] = rng.standard_normal((3, 5))
    if masks == "per_head_attn":
        kwargs["attn_mask"] = rng.uniform(size=(4, 3, 5)) < 0.3
    if masks in ("padding", "both"):
        kwargs["key_padding_mask"] = np.array([[False] * 4 + [True], [False] * 2 + [True] * 3])
    if masks == "causal":
        q, k = k, k
        kwargs["is_causal"] = True
        kwargs["attn_mask"] = np.triu(np.ones((5, 5), bool), 1)  # torch takes is_causal as a hint with the mask
    if "attn_mask" in kwargs and kwargs["attn_mask"].dtype == bool and masks != "causal":
        kwargs["attn_mask"][..., 0] = False  # no row fully masked: torch gives NaN there, tracegrad uniform weights
    kwargs["average_attn_weights"] = average
    out, weights = ours(q, k, k, **kwargs)
    t_kwargs = {n: torch.tensor(v) if isinstance(v, np.ndarray) else v for n, v in kwargs.items()}
    t_out, t_weights = theirs(torch.tensor(q), torch.tensor(k), torch.tensor(k), **t_kwargs)
    np.testing.assert_allclose(out.numpy(), t_out.detach().numpy(), rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(weights.numpy(), t_weights.detach().numpy(), rtol=1e-7, atol=1e-9)


def test_attention_one_argument_is_causal_self_attention():
    m = randomize(nn.MultiheadAttention(8, 2, batch_first=True, dtype="float64"))
    x = _x(2, 5, 8)
    causal = np.triu(np.ones((5, 5), bool), 1)
    out, weights = m(x, x, x, attn_mask=causal)
    np.testing.assert_allclose(m(x).numpy(), out.numpy(), rtol=1e-12)
    assert np.all(weights.numpy()[:, np.triu_indices(5, 1)[0], np.triu_indices(5, 1)[1]] < 1e-300)
    assert m(x, x, x, need_weights=False)[1] is None
    with pytest.raises(ValueError, match="key_padding_mask must have shape"):
        m(x, x, x, key_padding_mask=np.zeros((2, 4), bool))
    with pytest.raises(ValueError, match="attn_mask must have shape"):
        m(x, x, x, attn_mask=np.zeros((4, 5), bool))
    with pytest.raises(TypeError, match="pass bias by keyword"):
        nn.MultiheadAttention(8, 2, False)
    padding = np.zeros((2, 5), bool)
    padding[0] = True  # every key of sample 0 masked: -inf scores give NaN there, as torch's (issue 20 item 6)
    with np.errstate(invalid="ignore"):
        out, weights = m(x, x, x, key_padding_mask=padding)
    assert np.isnan(weights.numpy()[0]).all() and np.isnan(out.numpy()[0]).all()
    assert np.isfinite(out.numpy()[1]).all() and np.isfinite(weights.numpy()[1]).all()


# ---------------------------------------------------------------- own behaviour (no torch)


def test_conv_padding_same_keeps_the_length_and_refuses_strides():
    assert nn.Conv1d(2, 3, 4, padding="same")(np.zeros((1, 2, 7), "float32")).shape == (1, 3, 7)
    assert nn.Conv2d(2, 3, (3, 4), padding="same", dilation=2)(np.zeros((1, 2, 6, 7), "float32")).shape == (1, 3, 6, 7)
    with pytest.raises(ValueError, match="Conv2d: padding='same' is not supported for strided"):
        nn.Conv2d(2, 3, 3, stride=2, padding="same")
    with pytest.raises(ValueError, match="Conv1d: padding must be"):
        nn.Conv1d(2, 3, 3, padding="full")
    assert nn.Conv1d(2, 3, 3)(np.zeros((2, 5), "float32")).shape == (3, 3)  # unbatched (C, L), as torch
    with pytest.raises(RuntimeError, match=r"conv1d: expected a 2-d \(unbatched\) or 3-d"):
        nn.Conv1d(2, 3, 3)(np.zeros((1, 1, 2, 5), "float32"))


def test_dropout2d_zeroes_whole_channels_and_scales_the_rest():
    tracer.manual_seed(0)
    y = nn.Dropout2d(0.25)(np.ones((64, 16, 3, 3), "float32")).numpy()
    per_channel = y.reshape(64, 16, 9)
    assert np.all(per_channel.min(-1) == per_channel.max(-1))  # one draw per (sample, channel)
    assert set(np.unique(y).tolist()) <= {0.0, float(np.float32(1 / 0.75))}
    assert abs((per_channel[..., 0] == 0).mean() - 0.25) < 0.05
    with pytest.raises(ValueError, match="Dropout2d"):
        nn.Dropout2d()(np.ones((3, 4), "float32"))


def test_activation_functions_reach_the_right_limits():
    x = tracer.tensor(np.array([-1000.0, -1.0, 0.0, 1.0, 1000.0]))
    np.testing.assert_allclose(nn.functional.softplus(x).numpy(), [0.0, np.log1p(np.exp(-1.0)), np.log(2.0),
                                                                   1 + np.log1p(np.exp(-1.0)), 1000.0], rtol=1e-12)
    np.testing.assert_allclose(nn.functional.elu(x).numpy(), [-1.0, np.expm1(-1.0), 0.0, 1.0, 1000.0], rtol=1e-12)
    assert nn.Softmax()(np.zeros((2, 3), "float32")).numpy().sum(axis=1).tolist() == [1.0, 1.0]  # torch's dim 1 for 2-d
    assert nn.Softmax()(np.zeros((2, 3, 4), "float32")).numpy().sum(axis=0).max() == 1.0          # and 0 for 3-d
    with pytest.raises(ValueError, match="GELU: approximate"):
        nn.GELU(approximate="fast")


def test_norm_layers_check_their_input():
    with pytest.raises(ValueError, match=r"BatchNorm2d: expected 4-d input with 3 channels"):
        nn.BatchNorm2d(3)(np.zeros((2, 3, 4), "float32"))
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        nn.BatchNorm1d(3)(np.zeros((1, 3), "float32"))
    with pytest.raises(ValueError, match="momentum"):
        nn.BatchNorm1d(3, momentum=1.5)  # None is the cumulative average (tests/nn/test_norm_torch.py)
    with pytest.raises(ValueError, match="divisible by num_groups"):
        nn.GroupNorm(4, 6)
    with pytest.raises(ValueError, match=r"expected input \(N, 6, ...\)"):
        nn.GroupNorm(2, 6)(np.zeros((2, 4, 3), "float32"))
    assert list(nn.LayerNorm(4, elementwise_affine=False).parameters()) == []
