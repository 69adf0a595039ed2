"""The Transformer family and F.scaled_dot_product_attention against torch: state-dict keys, outputs and every
gradient, eagerly, in value_and_grad and with loss.backward() (float64 and float32), with bool and float masks."""
import numpy as np
import pytest

import nn
import tracer
from nn import functional as F

from .torch_triple import compare

rng = np.random.default_rng(0)
D = "float64"


def _x(*shape, dtype=D):
    return rng.standard_normal(shape).astype(dtype)


def _bool_mask(*shape):
    m = rng.uniform(size=shape) < 0.3
    m[..., 0] = False  # every query attends somewhere (torch gives NaN for a fully masked row)
    return m


def _float_mask(*shape, dtype=D):
    return (rng.standard_normal(shape) * 0.5).astype(dtype)


def _encoder_call(masks):
    def call(m, lib, src):
        return m(src, **{k: lib.tensor(v) for k, v in masks.items()})
    return call


_PAD = np.array([[False] * 4 + [True], [False] * 2 + [True] * 3])  # (B=2, S=5)
_CAUSAL = np.triu(np.ones((5, 5), bool), 1)

CASES = {
    "encoder_layer_post_norm_bool_masks": (
        lambda: nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, dtype=D),
        lambda tnn, T: tnn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, dtype=T),
        lambda: [_x(5, 2, 8)], _encoder_call(dict(src_mask=_bool_mask(5, 5), src_key_padding_mask=_PAD)), D),
    "encoder_layer_norm_first_gelu_batch_first_float_masks_float32": (
        lambda: nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, activation="gelu", batch_first=True,
                                           norm_first=True),
        lambda tnn, T: tnn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, activation="gelu", batch_first=True,
                                                   norm_first=True),
        lambda: [_x(2, 5, 8, dtype="float32")],
        _encoder_call(dict(src_mask=_float_mask(5, 5, dtype="float32"),
                           src_key_padding_mask=np.where(_PAD, -1e4, 0.0).astype("float32"))), "float32"),
    "encoder_layer_callable_activation_no_bias_eval_dropout": (
        lambda: nn.TransformerEncoderLayer(8, 4, 12, activation=nn.GELU(approximate="tanh"), bias=False,
                                           layer_norm_eps=1e-3, dtype=D),
        lambda tnn, T: tnn.TransformerEncoderLayer(8, 4, 12, activation=tnn.GELU(approximate="tanh"), bias=False,
                                                   layer_norm_eps=1e-3, dtype=T),
        lambda: [_x(5, 2, 8)], _encoder_call(dict(src_mask=_CAUSAL)), D),
    "encoder_stack_with_norm_causal": (
        lambda: nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, dtype=D), 2,
                                      nn.LayerNorm(8, dtype=D)),
        lambda tnn, T: tnn.TransformerEncoder(tnn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, dtype=T), 2,
                                              tnn.LayerNorm(8, dtype=T), enable_nested_tensor=False),
        lambda: [_x(5, 2, 8)],
        lambda m, lib, src: m(src, mask=lib.tensor(np.where(_CAUSAL, -np.inf, 0.0)), is_causal=True), D),
}


@pytest.mark.parametrize("name", CASES)
def test_transformer_layer_matches_torch(name):
    torch = pytest.importorskip("torch")
    make, make_torch, inputs, call, dtype = CASES[name]
    train = "eval" not in name
    ours = make()
    for p in ours.parameters():  # LayerNorm's ones and zeros would hide a swapped weight and bias
        p._data[...] = p._data + rng.uniform(-0.2, 0.2, p.shape)
    compare(torch, ours, make_torch(torch.nn, getattr(torch, dtype)), inputs(), call, dtype, train=train)


def test_decoder_layer_norm_first_with_every_mask():
    torch = pytest.importorskip("torch")
    ours = nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0, norm_first=True, batch_first=True, dtype=D)
    theirs = torch.nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0, norm_first=True, batch_first=True,
                                              dtype=torch.float64)
    masks = dict(tgt_mask=_bool_mask(3, 3), memory_mask=_bool_mask(3, 5),
                 tgt_key_padding_mask=np.array([[False, False, True], [False] * 3]), memory_key_padding_mask=_PAD)

    def call(m, lib, tgt, memory):
        return m(tgt, memory, **{k: lib.tensor(v) for k, v in masks.items()})
    compare(torch, ours, theirs, [_x(2, 3, 8), _x(2, 5, 8)], call, D, train=True)


def test_transformer_with_square_subsequent_mask():
    torch = pytest.importorskip("torch")
    ours = nn.Transformer(8, 2, 1, 2, dim_feedforward=16, dropout=0.0, dtype=D)
    theirs = torch.nn.Transformer(8, 2, 1, 2, dim_feedforward=16, dropout=0.0, dtype=torch.float64)
    mask = nn.Transformer.generate_square_subsequent_mask(4, dtype=D)
    np.testing.assert_array_equal(mask.numpy(), torch.nn.Transformer.generate_square_subsequent_mask(
        4, dtype=torch.float64).numpy())

    def call(m, lib, src, tgt):
        tgt_mask = m.generate_square_subsequent_mask(4, dtype=D if lib is tracer else torch.float64)
        return m(src, tgt, tgt_mask=tgt_mask, tgt_is_causal=True, src_key_padding_mask=lib.tensor(_PAD),
                 memory_key_padding_mask=lib.tensor(_PAD))
    compare(torch, ours, theirs, [_x(5, 2, 8), _x(4, 2, 8)], call, D, train=True)


def test_encoder_deep_copies_its_layer_and_checks_arguments():
    layer = nn.TransformerEncoderLayer(8, 2, 16)
    enc = nn.TransformerEncoder(layer, 3)
    w = [m.linear1.weight for m in enc.layers]
    assert len({id(t) for t in w}) == 3 and all(t is not layer.linear1.weight for t in w)
    np.testing.assert_array_equal(w[0].numpy(), w[2].numpy())  # copies, as torch's (not re-initialised)
    assert list(enc.state_dict())[:2] == ["layers.0.self_attn.in_proj_weight", "layers.0.self_attn.in_proj_bias"]
    with pytest.raises(RuntimeError, match="activation should be relu/gelu, not swish"):
        nn.TransformerEncoderLayer(8, 2, activation="swish")
    with pytest.raises(RuntimeError, match="batch number of src and tgt must be equal"):
        nn.Transformer(8, 2, 1, 1, 16)(np.zeros((5, 2, 8), "float32"), np.zeros((3, 3, 8), "float32"))
    values = [p.numpy() for p in nn.Transformer(8, 2, 1, 1, 16).parameters() if p.ndim > 1]
    assert all(np.abs(v).max() <= np.sqrt(6 / sum(v.shape)) for v in values)  # xavier_uniform_ bound


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_functional_scaled_dot_product_attention_matches_torch(dtype):
    torch = pytest.importorskip("torch")
    tol = dict(rtol=1e-10, atol=1e-12) if dtype == D else dict(rtol=1e-5, atol=1e-6)
    q, k, v = _x(2, 2, 3, 4, dtype=dtype), _x(2, 2, 5, 4, dtype=dtype), _x(2, 2, 5, 6, dtype=dtype)
    options = [dict(), dict(attn_mask=~_bool_mask(3, 5)), dict(attn_mask=_float_mask(2, 1, 3, 5, dtype=dtype)),
               dict(is_causal=True), dict(scale=0.3, attn_mask=~_bool_mask(2, 2, 3, 5))]
    for opts in options:
        t_opts = {n: torch.tensor(o) if isinstance(o, np.ndarray) else o for n, o in opts.items()}
        tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
        want = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, **t_opts)
        want.backward(torch.tensor(np.ones(want.shape, dtype)))
        ours = [tracer.tensor(a, requires_grad=True) for a in (q, k, v)]
        got = F.scaled_dot_product_attention(*ours, **opts)
        assert got.dtype == dtype
        np.testing.assert_allclose(got.numpy(), want.detach().numpy(), **tol, err_msg=str(opts))
        got.sum().backward()
        for g, t in zip(ours, (tq, tk, tv), strict=True):
            np.testing.assert_allclose(g.grad.numpy(), t.grad.numpy(), **tol, err_msg=f"gradient {opts}")
    mod = tracer.trace(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, is_causal=True), q, k, v)
    assert str(mod).count("scaled_dot_product_attention") == 1  # one op, not the matmul/softmax composite
    with pytest.raises(RuntimeError, match="attn_mask should not be set when is_causal"):
        F.scaled_dot_product_attention(q, k, v, attn_mask=~_bool_mask(3, 5), is_causal=True)
    with pytest.raises(ValueError, match=r"query \(..., L, E\), key \(..., S, E\)"):
        F.scaled_dot_product_attention(q, k[..., :3], v)
