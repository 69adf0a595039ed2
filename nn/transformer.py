"""torch.nn's Transformer family: TransformerEncoderLayer, TransformerDecoderLayer, TransformerEncoder,
TransformerDecoder and Transformer, with torch's constructors, submodule names (so state dicts carry over) and
calls. Attention is nn.MultiheadAttention; masks follow it (bool True: may not attend; float: added).
"""
from __future__ import annotations

import copy
import math

import numpy as np

import tracer

from . import functional as F
from . import init
from .attention import MultiheadAttention
from .layers import Dropout, LayerNorm, Linear
from .module import Module
from .parameter import factory_dtype


def _activation(activation, layer: str):
    if isinstance(activation, str):
        if activation == "relu":
            return F.relu
        if activation == "gelu":
            return F.gelu
        raise RuntimeError(f"{layer}: activation should be relu/gelu, not {activation}")
    if not callable(activation):
        raise TypeError(f"{layer}: activation must be 'relu', 'gelu' or a callable, got {activation!r}")
    return activation


def _mask(mask):
    if mask is None or isinstance(mask, tracer.Tensor):
        return mask
    return tracer.tensor(np.asarray(mask))


class TransformerEncoderLayer(Module):
    """Self-attention then a feed-forward block (linear1, activation, dropout, linear2), each with a residual
    connection and LayerNorm after it (before it with norm_first=True), as torch's."""

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048, dropout: float = 0.1,
                 activation=F.relu, layer_norm_eps: float = 1e-5, batch_first: bool = False, norm_first: bool = False,
                 bias: bool = True, device=None, dtype=None):
        super().__init__()
        dt = factory_dtype(dtype)
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first,
                                            dtype=dt)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, dtype=dt)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, dtype=dt)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dt)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dt)
        self.dropout1, self.dropout2 = Dropout(dropout), Dropout(dropout)
        self.activation = _activation(activation, type(self).__name__)
        if device is not None:
            self.to(device=device)

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal: bool = False):
        x = src if isinstance(src, tracer.Tensor) else tracer.tensor(src)
        mask, padding = _mask(src_mask), _mask(src_key_padding_mask)
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), mask, padding, is_causal)
            return x + self._ff_block(self.norm2(x))
        x = self.norm1(x + self._sa_block(x, mask, padding, is_causal))
        return self.norm2(x + self._ff_block(x))

    def _sa_block(self, x, mask, padding, is_causal):
        x = self.self_attn(x, x, x, attn_mask=mask, key_padding_mask=padding, need_weights=False,
                           is_causal=bool(is_causal))[0]
        return self.dropout1(x)

    def _ff_block(self, x):
        return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))


class TransformerDecoderLayer(Module):
    """Self-attention, attention over the encoder's memory, then the feed-forward block, as torch's."""

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048, dropout: float = 0.1,
                 activation=F.relu, layer_norm_eps: float = 1e-5, batch_first: bool = False, norm_first: bool = False,
                 bias: bool = True, device=None, dtype=None):
        super().__init__()
        dt = factory_dtype(dtype)
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first,
                                            dtype=dt)
        self.multihead_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first,
                                                 dtype=dt)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, dtype=dt)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, dtype=dt)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dt)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dt)
        self.norm3 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dt)
        self.dropout1, self.dropout2, self.dropout3 = Dropout(dropout), Dropout(dropout), Dropout(dropout)
        self.activation = _activation(activation, type(self).__name__)
        if device is not None:
            self.to(device=device)

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal: bool = False, memory_is_causal: bool = False):
        x = tgt if isinstance(tgt, tracer.Tensor) else tracer.tensor(tgt)
        memory = memory if isinstance(memory, tracer.Tensor) else tracer.tensor(memory)
        tm, tp, mm, mp = (_mask(m) for m in (tgt_mask, tgt_key_padding_mask, memory_mask, memory_key_padding_mask))
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), tm, tp, tgt_is_causal)
            x = x + self._mha_block(self.norm2(x), memory, mm, mp, memory_is_causal)
            return x + self._ff_block(self.norm3(x))
        x = self.norm1(x + self._sa_block(x, tm, tp, tgt_is_causal))
        x = self.norm2(x + self._mha_block(x, memory, mm, mp, memory_is_causal))
        return self.norm3(x + self._ff_block(x))

    def _sa_block(self, x, mask, padding, is_causal):
        x = self.self_attn(x, x, x, attn_mask=mask, key_padding_mask=padding, need_weights=False,
                           is_causal=bool(is_causal))[0]
        return self.dropout1(x)

    def _mha_block(self, x, memory, mask, padding, is_causal):
        x = self.multihead_attn(x, memory, memory, attn_mask=mask, key_padding_mask=padding, need_weights=False,
                                is_causal=bool(is_causal))[0]
        return self.dropout2(x)

    def _ff_block(self, x):
        return self.dropout3(self.linear2(self.dropout(self.activation(self.linear1(x)))))


def _clones(layer: Module, n: int):
    from .containers import ModuleList
    return ModuleList([copy.deepcopy(layer) for _ in range(n)])


class TransformerEncoder(Module):
    """num_layers deep copies of encoder_layer (layers.0, layers.1, ...), then norm when given, as torch's."""

    def __init__(self, encoder_layer: Module, num_layers: int, norm: Module | None = None,
                 enable_nested_tensor: bool = True, mask_check: bool = True):
        super().__init__()
        self.layers = _clones(encoder_layer, num_layers)
        self.num_layers, self.norm = num_layers, norm

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal: bool | None = None):
        x = src
        for layer in self.layers:
            x = layer(x, src_mask=mask, src_key_padding_mask=src_key_padding_mask, is_causal=bool(is_causal))
        return x if self.norm is None else self.norm(x)


class TransformerDecoder(Module):
    """num_layers deep copies of decoder_layer, then norm when given, as torch's."""

    def __init__(self, decoder_layer: Module, num_layers: int, norm: Module | None = None):
        super().__init__()
        self.layers = _clones(decoder_layer, num_layers)
        self.num_layers, self.norm = num_layers, norm

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal: bool | None = None, memory_is_causal: bool = False):
        x = tgt
        for layer in self.layers:
            x = layer(x, memory, tgt_mask=tgt_mask, memory_mask=memory_mask, tgt_key_padding_mask=tgt_key_padding_mask,
                      memory_key_padding_mask=memory_key_padding_mask, tgt_is_causal=bool(tgt_is_causal),
                      memory_is_causal=memory_is_causal)
        return x if self.norm is None else self.norm(x)


class Transformer(Module):
    """torch.nn.Transformer: an encoder and a decoder (each ending in a LayerNorm), weights with more than one
    dimension xavier-uniform initialised.

    >>> m = Transformer(8, 2, 1, 1, dim_feedforward=16)
    >>> m(np.zeros((5, 2, 8), "float32"), np.zeros((3, 2, 8), "float32")).shape
    (3, 2, 8)
    """

    def __init__(self, d_model: int = 512, nhead: int = 8, num_encoder_layers: int = 6, num_decoder_layers: int = 6,
                 dim_feedforward: int = 2048, dropout: float = 0.1, activation=F.relu, custom_encoder=None,
                 custom_decoder=None, layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, device=None, dtype=None):
        super().__init__()
        common = dict(dim_feedforward=dim_feedforward, dropout=dropout, activation=activation,
                      layer_norm_eps=layer_norm_eps, batch_first=batch_first, norm_first=norm_first, bias=bias,
                      dtype=dtype)
        dt = factory_dtype(dtype)
        self.encoder = custom_encoder if custom_encoder is not None else TransformerEncoder(
            TransformerEncoderLayer(d_model, nhead, **common), num_encoder_layers,
            LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dt))
        self.decoder = custom_decoder if custom_decoder is not None else TransformerDecoder(
            TransformerDecoderLayer(d_model, nhead, **common), num_decoder_layers,
            LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dt))
        self.d_model, self.nhead, self.batch_first = d_model, nhead, batch_first
        for p in self.parameters():
            if p.ndim > 1:
                init.xavier_uniform_(p)
        if device is not None:
            self.to(device=device)

    def forward(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None, src_key_padding_mask=None,
                tgt_key_padding_mask=None, memory_key_padding_mask=None, src_is_causal: bool | None = None,
                tgt_is_causal: bool | None = None, memory_is_causal: bool = False):
        src = src if isinstance(src, tracer.Tensor) else tracer.tensor(src)
        tgt = tgt if isinstance(tgt, tracer.Tensor) else tracer.tensor(tgt)
        batch_axis = 0 if self.batch_first else 1
        if src.ndim == 3 and tgt.ndim == 3 and src.shape[batch_axis] != tgt.shape[batch_axis]:
            raise RuntimeError(f"Transformer: the batch number of src and tgt must be equal, got {src.shape} and "
                               f"{tgt.shape}")
        if src.shape[-1] != self.d_model or tgt.shape[-1] != self.d_model:
            raise RuntimeError(f"Transformer: the feature number of src and tgt must be equal to d_model "
                               f"({self.d_model}), got {src.shape} and {tgt.shape}")
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask, is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask, memory_key_padding_mask=memory_key_padding_mask,
                            tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)

    @staticmethod
    def generate_square_subsequent_mask(sz: int, device=None, dtype=None) -> tracer.Tensor:
        """(sz, sz) float: -inf above the diagonal (a position may not attend to later ones), 0 elsewhere."""
        mask = np.triu(np.full((sz, sz), -math.inf, factory_dtype(dtype)), 1)
        return tracer.tensor(mask, device=device)


__all__ = ["Transformer", "TransformerDecoder", "TransformerDecoderLayer", "TransformerEncoder",
           "TransformerEncoderLayer"]
