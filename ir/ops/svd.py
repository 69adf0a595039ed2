"""The singular value decomposition: linalg.svd and linalg.svdvals, over the last two axes (batched).

`linalg.svd(A)` is the reduced SVD (U, S, Vh) of each matrix of A (..., m, n), k = min(m, n): U (..., m, k),
S (..., k) descending, Vh (..., k, n), A = U diag(S) Vh, as torch.linalg.svd(A, full_matrices=False).
`linalg.svdvals(A)` is S alone, as torch.linalg.svdvals. The singular vectors are not unique (each pair's
sign, any rotation within a repeated singular value), so U and Vh are whatever LAPACK (NumPy) or cuSOLVER
(CuPy) gives; svdvals' VJP U diag(g) Vh is the same for every choice wherever g is equal across a repeated
singular value (the nuclear norm's, and the 2-norm's, whose max spreads g evenly over ties), as torch's.
"""
from __future__ import annotations

from ..types import TensorType, TupleType
from .common import require_float
from .registry import declare, tensor_arg


def _matrices(op, types) -> TensorType:
    t = tensor_arg(op, types, 0)
    require_float(op, t, "x")
    if t.ndim < 2:
        raise op.error(f"argument x must be a batch of matrices (..., m, n), got shape {t.shape}")
    return t


def _infer_svd(op, types):
    t = _matrices(op, types)
    *batch, m, n = t.shape
    k = min(m, n)
    batch = tuple(batch)
    return TupleType((TensorType(batch + (m, k), t.dtype), TensorType(batch + (k,), t.dtype),
                      TensorType(batch + (k, n), t.dtype)))


def _infer_svdvals(op, types):
    t = _matrices(op, types)
    return TensorType(t.shape[:-2] + (min(t.shape[-2:]),), t.dtype)


def _svd(xp, a):
    *batch, m, n = a.shape
    k = min(m, n)
    if not k:  # LAPACK refuses empty matrices; torch gives empty factors
        return (xp.zeros((*batch, m, 0), a.dtype), xp.zeros((*batch, 0), a.dtype), xp.zeros((*batch, 0, n), a.dtype))
    u, s, vh = xp.linalg.svd(a, full_matrices=False)
    return u.astype(a.dtype, copy=False), s.astype(a.dtype, copy=False), vh.astype(a.dtype, copy=False)


def _svdvals(xp, a):
    if 0 in a.shape[-2:]:
        return xp.zeros(a.shape[:-2] + (0,), a.dtype)
    return xp.linalg.svd(a, compute_uv=False).astype(a.dtype, copy=False)


declare("linalg.svd", ("x",), infer=_infer_svd, kernel=_svd)
declare("linalg.svdvals", ("x",), infer=_infer_svdvals, kernel=_svdvals)
