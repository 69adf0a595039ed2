"""Op cases of the attention family: nn.scaled_dot_product_attention (forward, round trip, float64 finite
differences of query, key, value and a float mask). The reference loops over rows in float64."""
import math

import numpy as np

import tracer as T
from tests.cases import OpCase, rand


def sdpa_ref(q, k, v, mask=None, is_causal=False, scale=None):
    """Row by row: weights exp(s_j - max) / sum, s_j = q . k_j * scale (+ mask, or masked out)."""
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    L, S = q.shape[-2], k.shape[-2]
    full = np.zeros((L, S)) if mask is None else np.broadcast_to(mask, q.shape[:-2] + (L, S))
    out = np.zeros(q.shape[:-1] + (v.shape[-1],))
    for idx in np.ndindex(q.shape[:-2]):
        m = full if mask is None else full[idx]
        for i in range(L):
            s = []
            for j in range(S):
                value = math.fsum(float(a) * float(b) for a, b in zip(q[idx][i], k[idx][j], strict=True)) * scale
                allowed = not (is_causal and j > i) and not (m.dtype == bool and not m[i, j])
                s.append((value + (float(m[i, j]) if m.dtype != bool else 0.0)) if allowed else -1e9)
            top = max(s)
            e = [math.exp(x - top) for x in s]
            w = [x / math.fsum(e) for x in e]
            out[idx][i] = [math.fsum(w[j] * float(v[idx][j][c]) for j in range(S)) for c in range(v.shape[-1])]
    return out.astype(q.dtype)


_OP = ("nn.scaled_dot_product_attention",)
_bool_mask = rand(2, 3, 5, dtype="bool", seed=4)
_bool_mask[..., 0] = True  # every row attends somewhere
_all_masked = np.ones((3, 4), bool)
_all_masked[1] = False  # a row with no key: uniform weights (torch gives NaN)

CASES = [
    OpCase("sdpa_plain", T.scaled_dot_product_attention, sdpa_ref,
           [rand(2, 3, 4), rand(2, 5, 4, seed=1), rand(2, 5, 6, seed=2)], _OP),
    OpCase("sdpa_heads_float_mask", lambda q, k, v, m: T.scaled_dot_product_attention(q, k, v, attn_mask=m),
           sdpa_ref, [rand(2, 2, 3, 4), rand(2, 2, 5, 4, seed=1), rand(2, 2, 5, 3, seed=2), rand(3, 5, seed=3)], _OP),
    OpCase("sdpa_bool_mask_scale", lambda q, k, v: T.scaled_dot_product_attention(q, k, v, _bool_mask, scale=0.7),
           lambda q, k, v: sdpa_ref(q, k, v, _bool_mask, scale=0.7),
           [rand(2, 3, 4), rand(2, 5, 4, seed=1), rand(2, 5, 2, seed=2)], _OP),
    OpCase("sdpa_causal", lambda q, k, v: T.scaled_dot_product_attention(q, k, v, is_causal=True),
           lambda q, k, v: sdpa_ref(q, k, v, is_causal=True),
           [rand(2, 4, 3), rand(2, 4, 3, seed=1), rand(2, 4, 3, seed=2)], _OP),
    OpCase("sdpa_causal_rectangular", lambda q, k, v: T.scaled_dot_product_attention(q, k, v, is_causal=True),
           lambda q, k, v: sdpa_ref(q, k, v, is_causal=True),
           [rand(1, 3, 2), rand(1, 5, 2, seed=1), rand(1, 5, 2, seed=2)], _OP),
    OpCase("sdpa_row_fully_masked", lambda q, k, v: T.scaled_dot_product_attention(q, k, v, _all_masked),
           lambda q, k, v: sdpa_ref(q, k, v, _all_masked),
           [rand(3, 2), rand(4, 2, seed=1), rand(4, 2, seed=2)], _OP),
]
