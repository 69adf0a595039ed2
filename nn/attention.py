"""Multi-head attention built from primitives, with torch.nn.MultiheadAttention's parameters and call."""
from __future__ import annotations

import math

import numpy as np

import tracer

from . import functional as F
from . import init
from .layers import Linear
from .module import Module, Parameter, check_input, factory_dtype, place


class MultiheadAttention(Module):
    """Attention of `query` (B, L, E) over `key` (B, S, E) and `value` (B, S, E), as torch's with
    batch_first=True (the default here; batch_first=False takes (L, B, E), as torch's default).

    `mha(query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
    average_attn_weights=True, is_causal=False)` returns (output, weights) as torch does: weights (B, L, S),
    averaged over the heads, or (B, H, L, S), or None when need_weights=False. attn_mask (L, S) or
    (B * H, L, S) and key_padding_mask (B, S) are boolean (True: may not attend) or float (added to the
    scores). `mha(x)` with one argument is causal self-attention and returns the output alone (the
    shorthand of `mha(x, x, x, attn_mask=causal, need_weights=False)[0]`).

    Parameters are named and laid out as torch's (in_proj_weight (3E, E) holding the q, k, v projections
    stacked, in_proj_bias, out_proj.weight, out_proj.bias), so weights load either way.

    >>> import numpy as np
    >>> mha = MultiheadAttention(8, 2)
    >>> out, weights = mha(np.ones((2, 3, 8), "float32"), np.ones((2, 5, 8), "float32"), np.ones((2, 5, 8), "float32"))
    >>> out.shape, weights.shape
    ((2, 3, 8), (2, 3, 5))
    """

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 batch_first: bool = True, device=None, dtype=None):
        super().__init__()
        dtype = factory_dtype(dtype, self)
        if isinstance(dropout, bool):  # the old positional order was (embed_dim, num_heads, bias, dropout)
            raise TypeError("MultiheadAttention: dropout must be a number; pass bias by keyword (torch's order is "
                            "embed_dim, num_heads, dropout, bias)")
        if embed_dim % num_heads:
            raise ValueError(f"MultiheadAttention: embed_dim ({embed_dim}) must be divisible by "
                             f"num_heads ({num_heads})")
        self.embed_dim, self.num_heads, self.dropout, self.batch_first = embed_dim, num_heads, dropout, batch_first
        self.in_proj_weight = init.xavier_uniform_(Parameter(np.empty((3 * embed_dim, embed_dim), dtype)))
        self.in_proj_bias = Parameter(np.zeros((3 * embed_dim,), dtype)) if bias else None
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias, dtype=dtype)
        if bias:
            init.zeros_(self.out_proj.bias)  # as torch's _reset_parameters
        place(self, device)

    def forward(self, query, key=None, value=None, key_padding_mask=None, need_weights: bool = True,
                attn_mask=None, average_attn_weights: bool = True, is_causal: bool = False):
        if key is None and value is None:
            x = check_input(self, query, self.in_proj_weight.dtype)
            return self.forward(x, x, x, need_weights=False, is_causal=True, attn_mask=None)[0]
        q, k, v = (check_input(self, t, self.in_proj_weight.dtype, what) for t, what in
                   ((query, "query"), (key, "key"), (value, "value")))
        if not self.batch_first:
            q, k, v = (tracer.permute_dims(t, [1, 0, 2]) for t in (q, k, v))
        E, H = self.embed_dim, self.num_heads
        if q.ndim != 3 or q.shape[2] != E or k.shape != v.shape or k.ndim != 3 or k.shape[2] != E \
                or k.shape[0] != q.shape[0]:
            raise ValueError(f"MultiheadAttention: expected x of shape (B, L, {E}) and key, value of one shape "
                             f"(B, S, {E}), got query {q.shape}, key {k.shape}, value {v.shape}")
        B, L, S, D = q.shape[0], q.shape[1], k.shape[1], E // H
        w, b = self.in_proj_weight, self.in_proj_bias
        if q is k and k is v:  # self-attention: one matmul projects q, k and v together
            qkv = tracer.permute_dims(tracer.reshape(F.linear(q, w, b), (B, L, 3, H, D)), [2, 0, 3, 1, 4])
            q, k, v = qkv[0], qkv[1], qkv[2]
        else:
            heads = []
            for i, t in enumerate((q, k, v)):
                proj = F.linear(t, w[i * E:(i + 1) * E], None if b is None else b[i * E:(i + 1) * E])
                heads.append(tracer.permute_dims(tracer.reshape(proj, (B, t.shape[1], H, D)), [0, 2, 1, 3]))
            q, k, v = heads                                                      # (B, H, L|S, D)
        scores = tracer.matmul(q * (1.0 / math.sqrt(D)), tracer.permute_dims(k, [0, 1, 3, 2]))  # (B, H, L, S)
        scores = self._masked(scores, attn_mask, key_padding_mask, is_causal, B, L, S)
        weights = F.softmax(scores, axis=-1)
        if self.dropout > 0.0:
            weights = F.dropout(weights, self.dropout, training=self.training)
        out = tracer.reshape(tracer.permute_dims(tracer.matmul(weights, v), [0, 2, 1, 3]), (B, L, E))
        out = self.out_proj(out)
        if not self.batch_first:
            out = tracer.permute_dims(out, [1, 0, 2])
        if not need_weights:
            return out, None
        return out, (tracer.mean(weights, axis=1) if average_attn_weights else weights)

    def _masked(self, scores, attn_mask, key_padding_mask, is_causal: bool, B: int, L: int, S: int):
        """scores with the masks applied: boolean True and causal positions get a large finite negative (not
        -inf, so a masked score never turns into nan in softmax or its gradient), float masks are added."""
        masks = []
        if is_causal and attn_mask is None:
            masks.append(tracer.tensor(~np.tril(np.ones((L, S), dtype=bool))))
        if attn_mask is not None:
            m = attn_mask if isinstance(attn_mask, tracer.Tensor) else tracer.tensor(np.asarray(attn_mask))
            if m.shape not in ((L, S), (B * self.num_heads, L, S)):
                raise ValueError(f"MultiheadAttention: attn_mask must have shape ({L}, {S}) or "
                                 f"({B * self.num_heads}, {L}, {S}), got {m.shape}")
            masks.append(m if m.ndim == 2 else tracer.reshape(m, (B, self.num_heads, L, S)))
        if key_padding_mask is not None:
            m = key_padding_mask if isinstance(key_padding_mask, tracer.Tensor) else \
                tracer.tensor(np.asarray(key_padding_mask))
            if m.shape != (B, S):
                raise ValueError(f"MultiheadAttention: key_padding_mask must have shape ({B}, {S}), got {m.shape}")
            masks.append(tracer.reshape(m, (B, 1, 1, S)))
        low = -1e9 if scores.dtype != "float16" else -6e4
        for m in masks:
            scores = tracer.where(m, low, scores) if m.dtype == "bool" else scores + tracer.astype(m, scores.dtype)
        return scores

    def extra_repr(self) -> str:
        return f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, dropout={self.dropout}"


__all__ = ["MultiheadAttention"]
