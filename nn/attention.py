"""Causal multi-head self-attention built from primitives, with torch.nn.MultiheadAttention's parameters."""
from __future__ import annotations

import math

import numpy as np

import tracer

from . import functional as F
from . import init
from .layers import Linear
from .module import Module, Parameter


class MultiheadAttention(Module):
    """Causal self-attention over x (B, T, E) -> (B, T, E).

    Parameters are named and laid out as torch.nn.MultiheadAttention's (in_proj_weight (3E, E) holding
    the q, k, v projections stacked, in_proj_bias, out_proj.weight, out_proj.bias), so its weights
    load directly; the result equals torch's `mha(x, x, x, attn_mask=causal, need_weights=False)[0]`
    with batch_first=True.
    """

    def __init__(self, embed_dim: int, num_heads: int, bias: bool = True, dropout: float = 0.0,
                 dtype: str = "float32"):
        super().__init__()
        if embed_dim % num_heads:
            raise ValueError(f"MultiheadAttention: embed_dim ({embed_dim}) must be divisible by "
                             f"num_heads ({num_heads})")
        self.embed_dim, self.num_heads, self.dropout = embed_dim, num_heads, dropout
        self.in_proj_weight = init.xavier_uniform_(Parameter(np.empty((3 * embed_dim, embed_dim), dtype)))
        self.in_proj_bias = Parameter(np.zeros((3 * embed_dim,), dtype)) if bias else None
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias, dtype=dtype)
        if bias:
            init.zeros_(self.out_proj.bias)  # as torch's _reset_parameters

    def forward(self, x):
        B, T, E = x.shape
        if E != self.embed_dim:
            raise ValueError(f"MultiheadAttention: expected x of shape (B, T, {self.embed_dim}), got {x.shape}")
        H = self.num_heads
        D = E // H
        qkv = F.linear(x, self.in_proj_weight, self.in_proj_bias)            # (B, T, 3E)
        qkv = tracer.permute_dims(tracer.reshape(qkv, (B, T, 3, H, D)), [2, 0, 3, 1, 4])  # (3, B, H, T, D)
        q, k, v = qkv[0], qkv[1], qkv[2]
        scores = tracer.matmul(q * (1.0 / math.sqrt(D)), tracer.permute_dims(k, [0, 1, 3, 2]))  # (B, H, T, T)
        # a large finite negative (not -inf) so a masked score never turns into nan in softmax or its grad
        causal = tracer.tensor(np.tril(np.ones((T, T), dtype=bool)))
        scores = tracer.where(causal, scores, -1e9 if scores.dtype != "float16" else -6e4)
        weights = F.softmax(scores, axis=-1)
        if self.dropout > 0.0:
            weights = F.dropout(weights, self.dropout, training=self.training)
        out = tracer.matmul(weights, v)                                      # (B, H, T, D)
        out = tracer.reshape(tracer.permute_dims(out, [0, 2, 1, 3]), (B, T, E))
        return self.out_proj(out)

    def extra_repr(self) -> str:
        return f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, dropout={self.dropout}"


__all__ = ["MultiheadAttention"]
