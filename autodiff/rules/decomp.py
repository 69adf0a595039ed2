"""VJP rules of the decomposition family (ir/ops/decomp.py), with torch's formulas (Murray 2016 for
Cholesky), written with solve_triangular itself so that they differentiate again."""
from __future__ import annotations

from ir import const

from .registry import register_vjp


def _mT(b, x):
    """x with its last two axes swapped."""
    n = x.type.ndim
    return b.call("permute_dims", x, axes=tuple(range(n - 2)) + (n - 1, n - 2))


@register_vjp("linalg.cholesky")
def cholesky_vjp(b, call, out, g):
    """Forward: L = cholesky(A), A = L L^T
    Backward: M = tril(L^T gL), P = (M + tril(M, -1)^T) / 2, dA = L^-T P L^-1"""
    L = out
    m = b.call("tril", b.call("matmul", _mT(b, L), g), k=0)
    p = b.call("multiply", b.call("add", m, _mT(b, b.call("tril", m, k=-1))), const(0.5, L.type.dtype))
    lt = _mT(b, L)
    y = b.call("linalg.solve_triangular", lt, p, upper=True)  # L^-T P
    # (L^-T P) L^-1 = (L^-T (L^-T P)^T)^T
    return [_mT(b, b.call("linalg.solve_triangular", lt, _mT(b, y), upper=True))]


@register_vjp("linalg.solve_triangular")
def solve_triangular_vjp(b, call, out, g):
    """Forward: X = A^-1 B, A triangular (lower unless upper)
    Backward: dB = A^-T g, dA = -tril(dB X^T) (triu when upper)"""
    a, _ = call.args
    upper = call.attrs["upper"]
    db = b.call("linalg.solve_triangular", _mT(b, a), g, upper=not upper)
    da = b.call("negative", b.call("matmul", db, _mT(b, out)))
    # the batch dims may be broadcast ones: the Gradient pass sums them back to each input's shape
    return [b.call("triu" if upper else "tril", da, k=0), db]
