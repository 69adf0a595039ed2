"""Multi-head attention built from primitives, with torch.nn.MultiheadAttention's parameters, defaults and call."""
from __future__ import annotations

import math

import numpy as np

import tracer

from . import functional as F
from . import init
from .layers import Linear
from .module import Module, Parameter, check_input, factory_dtype, place


class MultiheadAttention(Module):
    """torch.nn.MultiheadAttention(embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False,
    add_zero_attn=False, kdim=None, vdim=None, batch_first=False, device=None, dtype=None).

    As torch's, inputs are (L, B, E) by default and (B, L, E) with batch_first=True; unbatched (L, E) works
    too. `mha(query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
    average_attn_weights=True, is_causal=False)` returns (output, weights): weights (B, L, S) averaged over the
    heads, (B, H, L, S) with average_attn_weights=False, None with need_weights=False. attn_mask (L, S) or
    (B * H, L, S) and key_padding_mask (B, S) are boolean (True: may not attend; the score becomes -inf, so a
    query that may attend nowhere gets NaN, as torch's) or float (added to the scores). is_causal=True without
    an attn_mask applies the causal mask (torch asks for the mask itself there); `mha(x)` with one argument is
    tracegrad's shorthand for causal self-attention, returning the output alone.

    Parameters are named and laid out as torch's (in_proj_weight (3E, E) holding the q, k, v projections
    stacked, or q/k/v_proj_weight when kdim or vdim differ from E; in_proj_bias; bias_k, bias_v; out_proj), so
    state dicts load either way.

    >>> import numpy as np
    >>> mha = MultiheadAttention(8, 2)
    >>> out, weights = mha(np.ones((3, 2, 8), "float32"), np.ones((5, 2, 8), "float32"), np.ones((5, 2, 8), "float32"))
    >>> out.shape, weights.shape
    ((3, 2, 8), (2, 3, 5))
    """

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 add_bias_kv: bool = False, add_zero_attn: bool = False, kdim: int | None = None,
                 vdim: int | None = None, batch_first: bool = False, device=None, dtype=None):
        super().__init__()
        dtype = factory_dtype(dtype, self)
        if isinstance(dropout, bool):  # the old positional order was (embed_dim, num_heads, bias, dropout)
            raise TypeError("MultiheadAttention: dropout must be a number; pass bias by keyword (torch's order is "
                            "embed_dim, num_heads, dropout, bias)")
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f"embed_dim and num_heads must be greater than 0, got embed_dim={embed_dim} and "
                             f"num_heads={num_heads} instead")
        if embed_dim % num_heads:
            raise ValueError(f"MultiheadAttention: embed_dim ({embed_dim}) must be divisible by "
                             f"num_heads ({num_heads})")
        self.embed_dim, self.num_heads, self.dropout, self.batch_first = embed_dim, num_heads, dropout, batch_first
        self.kdim = embed_dim if kdim is None else kdim
        self.vdim = embed_dim if vdim is None else vdim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.head_dim = embed_dim // num_heads
        self.add_zero_attn = add_zero_attn
        E = embed_dim
        if self._qkv_same_embed_dim:
            self.in_proj_weight = init.xavier_uniform_(Parameter(np.empty((3 * E, E), dtype)))
            self.q_proj_weight = self.k_proj_weight = self.v_proj_weight = None
        else:
            self.q_proj_weight = init.xavier_uniform_(Parameter(np.empty((E, E), dtype)))
            self.k_proj_weight = init.xavier_uniform_(Parameter(np.empty((E, self.kdim), dtype)))
            self.v_proj_weight = init.xavier_uniform_(Parameter(np.empty((E, self.vdim), dtype)))
            self.in_proj_weight = None
        self.in_proj_bias = Parameter(np.zeros((3 * E,), dtype)) if bias else None
        self.out_proj = Linear(E, E, bias=bias, dtype=dtype)
        if bias:
            init.zeros_(self.out_proj.bias)  # as torch's _reset_parameters
        if add_bias_kv:
            self.bias_k = init.xavier_normal_(Parameter(np.empty((1, 1, E), dtype)))
            self.bias_v = init.xavier_normal_(Parameter(np.empty((1, 1, E), dtype)))
        else:
            self.bias_k = self.bias_v = None
        self._dtype = dtype
        place(self, device)

    def forward(self, query, key=None, value=None, key_padding_mask=None, need_weights: bool = True,
                attn_mask=None, average_attn_weights: bool = True, is_causal: bool = False):
        if key is None and value is None:
            x = check_input(self, query, self.out_proj.weight.dtype)
            return self.forward(x, x, x, need_weights=False, is_causal=True, attn_mask=None)[0]
        dtype = self.out_proj.weight.dtype
        q, k, v = (check_input(self, t, dtype, what) for t, what in ((query, "query"), (key, "key"), (value, "value")))
        unbatched = q.ndim == 2
        if unbatched:  # (L, E): one sequence, as torch
            q, k, v = (tracer.expand_dims(t, 0) for t in (q, k, v))
            if key_padding_mask is not None:
                key_padding_mask = tracer.expand_dims(_mask(key_padding_mask), 0)
        elif not self.batch_first:
            q, k, v = (tracer.permute_dims(t, [1, 0, 2]) for t in (q, k, v))
        E, H, D = self.embed_dim, self.num_heads, self.head_dim
        if q.ndim != 3 or q.shape[2] != E or k.ndim != 3 or v.ndim != 3 or k.shape[2] != self.kdim \
                or v.shape[2] != self.vdim or k.shape[:2] != v.shape[:2] or k.shape[0] != q.shape[0]:
            layout = "(B, L, E)" if self.batch_first else "(L, B, E)"
            raise ValueError(f"MultiheadAttention: expected query {layout} with E={E}, key and value with the same "
                             f"batch and source length and last sizes {self.kdim} and {self.vdim}, got query "
                             f"{tuple(query.shape)}, key {tuple(key.shape)}, value {tuple(value.shape)}")
        B, L = q.shape[0], q.shape[1]
        q, k, v = self._project(q, k, v)                                        # (B, L|S, E)
        attn_mask = None if attn_mask is None else _mask(attn_mask)
        key_padding_mask = None if key_padding_mask is None else _mask(key_padding_mask)
        if is_causal and attn_mask is None:
            attn_mask = tracer.tensor(~np.tril(np.ones((L, k.shape[1]), dtype=bool)))
        if self.bias_k is not None:  # one more key and value, which every query may attend
            k = tracer.concat([k, tracer.broadcast_to(self.bias_k, (B, 1, E))], axis=1)
            v = tracer.concat([v, tracer.broadcast_to(self.bias_v, (B, 1, E))], axis=1)
            attn_mask, key_padding_mask = _pad(attn_mask), _pad(key_padding_mask)
        q, k, v = (tracer.permute_dims(tracer.reshape(t, (B, t.shape[1], H, D)), [0, 2, 1, 3]) for t in (q, k, v))
        if self.add_zero_attn:  # a zero key and value per head
            zeros = tracer.zeros((B, H, 1, D), dtype=k.dtype)
            k, v = tracer.concat([k, zeros], axis=2), tracer.concat([v, zeros], axis=2)
            attn_mask, key_padding_mask = _pad(attn_mask), _pad(key_padding_mask)
        S = k.shape[2]
        scores = tracer.matmul(q * (1.0 / math.sqrt(D)), tracer.permute_dims(k, [0, 1, 3, 2]))  # (B, H, L, S)
        scores = self._masked(scores, attn_mask, key_padding_mask, B, L, S)
        weights = F.softmax(scores, axis=-1)
        if self.dropout > 0.0:
            weights = F.dropout(weights, self.dropout, training=self.training)
        out = tracer.reshape(tracer.permute_dims(tracer.matmul(weights, v), [0, 2, 1, 3]), (B, L, E))
        out = self.out_proj(out)
        if unbatched:
            out = tracer.squeeze(out, 0)
        elif not self.batch_first:
            out = tracer.permute_dims(out, [1, 0, 2])
        if not need_weights:
            return out, None
        weights = tracer.mean(weights, axis=1) if average_attn_weights else weights
        return out, (tracer.squeeze(weights, 0) if unbatched else weights)

    def _project(self, q, k, v):
        E, b = self.embed_dim, self.in_proj_bias
        bias = (None, None, None) if b is None else (b[:E], b[E:2 * E], b[2 * E:])
        if not self._qkv_same_embed_dim:
            ws = (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight)
            return tuple(F.linear(t, w, bb) for t, w, bb in zip((q, k, v), ws, bias, strict=True))
        w = self.in_proj_weight
        if q is k and k is v:  # self-attention: one matmul projects q, k and v together
            qkv = F.linear(q, w, b)
            return qkv[..., :E], qkv[..., E:2 * E], qkv[..., 2 * E:]
        return tuple(F.linear(t, w[i * E:(i + 1) * E], bias[i]) for i, t in enumerate((q, k, v)))

    def _masked(self, scores, attn_mask, key_padding_mask, B: int, L: int, S: int):
        """scores with the masks applied as torch's: boolean True becomes -inf, float masks are added."""
        masks = []
        if attn_mask is not None:
            if attn_mask.shape not in ((L, S), (B * self.num_heads, L, S)):
                raise ValueError(f"MultiheadAttention: attn_mask must have shape ({L}, {S}) or "
                                 f"({B * self.num_heads}, {L}, {S}), got {attn_mask.shape}")
            masks.append(attn_mask if attn_mask.ndim == 2 else tracer.reshape(attn_mask, (B, self.num_heads, L, S)))
        if key_padding_mask is not None:
            if key_padding_mask.shape != (B, S):
                raise ValueError(f"MultiheadAttention: key_padding_mask must have shape ({B}, {S}), got "
                                 f"{key_padding_mask.shape}")
            masks.append(tracer.reshape(key_padding_mask, (B, 1, 1, S)))
        for m in masks:
            if m.dtype == "bool":
                scores = tracer.where(m, -math.inf, scores)
            elif m.dtype.startswith("float"):
                scores = scores + tracer.astype(m, scores.dtype)
            else:
                raise TypeError(f"MultiheadAttention: only bool and floating types of masks are supported, got "
                                f"{m.dtype}")
        return scores


def _mask(m):
    return m if isinstance(m, tracer.Tensor) else tracer.tensor(np.asarray(m))


def _pad(mask):
    """A mask with one more source position on its last axis, which may be attended (False / 0)."""
    if mask is None:
        return None
    pad = tracer.zeros(mask.shape[:-1] + (1,), dtype=mask.dtype)
    return tracer.concat([mask, pad], axis=-1)


__all__ = ["MultiheadAttention"]
