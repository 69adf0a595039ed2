"""Attention: `nn.scaled_dot_product_attention(query, key, value, attn_mask, scale, is_causal)`.

softmax(query @ key^T * scale + mask) @ value over the last two axes, as torch's
F.scaled_dot_product_attention. One op rather than the matmul/softmax composite so that a fused kernel
(the speed issue's business) can replace this one kernel, and the VJP is written once
(autodiff/rules/attention.py).

attn_mask is always an argument: a bool mask (True: may attend, as torch), or a float mask added to
the scores; a float 0-d zero stands for "no mask". It broadcasts against the scores (..., L, S).
Masked positions get a large finite negative rather than -inf, so that a row with every key masked
gives uniform weights (torch gives NaN there) and no NaN reaches the gradient.
is_causal masks the upper triangle of the (L, S) scores (torch's tril(ones(L, S)), top-left aligned).
"""
from __future__ import annotations

from ..types import TensorType
from .common import require_float
from .registry import Attr, declare, tensor_arg


def masked_low(dtype: str) -> float:
    """The score that masked positions get: exp of it minus any real score is exactly 0."""
    return -6e4 if dtype == "float16" else -1e9


def _broadcasts(a: tuple, b: tuple) -> bool:
    return all(x == y or x == 1 for x, y in zip(reversed(a), reversed(b), strict=False)) and len(a) <= len(b)


def _infer_sdpa(op, types, scale, is_causal):
    q, k, v, mask = (tensor_arg(op, types, i) for i in range(4))
    for name, t in (("query", q), ("key", k), ("value", v)):
        require_float(op, t, name)
        if t.ndim < 2:
            raise op.error(f"argument {name} must have at least 2 dimensions (..., L, E), got shape {t.shape}")
    if not q.dtype == k.dtype == v.dtype:
        raise op.error(f"query, key and value must have one dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    if not q.ndim == k.ndim == v.ndim or q.shape[:-2] != k.shape[:-2] or k.shape[:-1] != v.shape[:-1] \
            or q.shape[-1] != k.shape[-1]:
        raise op.error(f"expected query (..., L, E), key (..., S, E) and value (..., S, Ev) with the same leading "
                       f"dimensions, got query {q.shape}, key {k.shape}, value {v.shape}")
    scores = (*q.shape[:-1], k.shape[-2])
    if mask.dtype not in ("bool", q.dtype):
        raise op.error(f"argument attn_mask must be bool or {q.dtype} like query, got {mask.dtype}")
    if not _broadcasts(mask.shape, scores):
        raise op.error(f"argument attn_mask of shape {mask.shape} does not broadcast to the scores {scores}")
    return TensorType((*q.shape[:-1], v.shape[-1]), q.dtype)


def attention_scores(xp, q, k, mask, scale, is_causal):
    """The masked, scaled scores (..., L, S) before the softmax."""
    s = xp.matmul(q, xp.swapaxes(k, -1, -2)) * q.dtype.type(scale)
    low = s.dtype.type(masked_low(str(s.dtype)))
    if is_causal:
        s = xp.where(xp.tril(xp.ones(s.shape[-2:], dtype=bool)), s, low)
    if mask.dtype == bool:
        s = xp.where(mask, s, low)
    elif mask.ndim or mask.item() != 0:
        s = s + mask
    return s


def _sdpa(xp, q, k, v, mask, scale, is_causal):
    s = attention_scores(xp, q, k, mask, scale, is_causal)
    e = xp.exp(s - s.max(axis=-1, keepdims=True))
    return xp.matmul(e / e.sum(axis=-1, keepdims=True), v)


declare("nn.scaled_dot_product_attention", ("query", "key", "value", "attn_mask"),
        (Attr("scale", "float"), Attr("is_causal", "bool", False)), infer=_infer_sdpa, kernel=_sdpa)
