"""scaled_dot_product_attention, torch's F.scaled_dot_product_attention, as the one IR op of ir/ops/attention.py."""
from __future__ import annotations

import math
import numbers

import numpy as np

from .math import as_tensor, where
from .placement import place, tensor_device
from .tensor import Tensor, apply

__all__ = ["scaled_dot_product_attention"]


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p: float = 0.0, is_causal: bool = False,
                                 scale=None, enable_gqa: bool = False) -> Tensor:
    """softmax(query @ key^T * scale + mask) @ value over the last two axes: query (..., L, E), key (..., S, E),
    value (..., S, Ev) -> (..., L, Ev); scale defaults to 1 / sqrt(E).

    attn_mask broadcasts to (..., L, S): bool (True: may attend, as torch) or float (added to the scores).
    is_causal masks the upper triangle (with attn_mask, a RuntimeError, as torch). A row with every key masked
    gives uniform weights (torch: NaN). dropout_p > 0 drops attention weights (always, as torch's functional
    form: pass 0.0 in evaluation); that case is built from softmax, dropout and matmul instead of the one op.

    >>> import numpy as np
    >>> q = Tensor(np.zeros((2, 3, 4), "float32"))
    >>> scaled_dot_product_attention(q, q, Tensor(np.ones((2, 3, 5), "float32"))).shape
    (2, 3, 5)
    """
    if enable_gqa:
        raise NotImplementedError("scaled_dot_product_attention: enable_gqa=True is not supported")
    q, k, v = as_tensor(query), as_tensor(key), as_tensor(value)
    if is_causal and attn_mask is not None:
        raise RuntimeError("scaled_dot_product_attention: explicit attn_mask should not be set when is_causal=True")
    if isinstance(dropout_p, bool) or not isinstance(dropout_p, numbers.Real) or not 0.0 <= dropout_p <= 1.0:
        raise ValueError(f"scaled_dot_product_attention: dropout_p must be in [0, 1], got {dropout_p!r}")
    if q.ndim < 1:
        raise ValueError("scaled_dot_product_attention: query must have at least 2 dimensions (..., L, E), got "
                         "a 0-d tensor")
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    if attn_mask is None:
        mask = place(Tensor(np.zeros((), q.dtype)), tensor_device(q))
    else:
        mask = as_tensor(attn_mask)
        if mask.dtype not in ("bool", q.dtype):  # torch adds a float mask of another float dtype after casting
            mask = mask.astype(q.dtype)
    if dropout_p == 0.0:
        return apply("nn.scaled_dot_product_attention", [q, k, v, mask], scale=scale, is_causal=bool(is_causal))
    from .nn_functions import dropout, softmax
    from .shape import matmul
    s = matmul(q, k.transpose(-2, -1)) * scale
    low = -6e4 if q.dtype == "float16" else -1e9
    if is_causal:
        s = where(Tensor(np.tril(np.ones((q.shape[-2], k.shape[-2]), bool))), s, low)
    s = where(mask, s, low) if mask.dtype == "bool" else s + mask
    return matmul(dropout(softmax(s, -1), float(dropout_p)), v)
