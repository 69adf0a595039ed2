"""VJP rules of the singular value family (ir/ops/svd.py), with torch's formulas (svd_backward in its
FunctionsManual: real matrices, the reduced SVD), written with svd itself so that they differentiate again."""
from __future__ import annotations

import numpy as np

from ir import Tuple, const

from .registry import register_vjp


def _mT(b, x):
    """x with its last two axes swapped."""
    n = x.type.ndim
    return b.call("permute_dims", x, axes=tuple(range(n - 2)) + (n - 1, n - 2))


def _fields(b, g) -> list:
    """The fields of a tuple-valued gradient (an inline Tuple or a tuple var)."""
    if isinstance(g, Tuple):
        return list(g.fields)
    return [b.get_item(g, i) for i in range(len(g.type.fields))]


def _row(b, s):
    return b.call("expand_dims", s, axis=[-2])  # S[..., None, :]


def _col(b, s):
    return b.call("expand_dims", s, axis=[-1])  # S[..., :, None]


def _skew(b, x):
    return b.call("subtract", x, _mT(b, x))


def _over(b, x, d):
    """x / d, 0 where d is 0 (a zero singular value: the unused-output case, where x is 0 too)."""
    zero = b.call("equal", d, const(0.0, d.type.dtype))
    safe = b.call("where", zero, const(1.0, d.type.dtype), d)
    return b.call("where", zero, const(0.0, d.type.dtype), b.call("divide", x, safe))


@register_vjp("linalg.svd")
def svd_vjp(b, call, out, g):
    """Forward: U, S, Vh = svd(A), A = U diag(S) Vh, E_ij = S_j^2 - S_i^2
    Backward: R = (skew(U^T gU) S_j + S_i skew(Vh gVh^T)) / E (0 at E = 0) + diag(gS); dA = U R Vh (+ m != n)"""
    a = call.args[0]
    *_, m, n = a.type.shape
    # the factors again from A rather than out's fields: loss.backward() feeds a tuple's fields from its
    # recording only where they lie on the loss's path (U unused there, say); CSE merges this with the forward
    usv = b.call("linalg.svd", a)
    u, s, vh = (b.get_item(usv, i) for i in range(3))
    gu, gs, gvh = _fields(b, g)
    dtype, k = a.type.dtype, min(m, n)
    eye = const(np.eye(k, dtype=dtype), dtype)
    s2 = b.call("multiply", s, s)
    e = b.call("subtract", _row(b, s2), _col(b, s2))  # E_ij = S_j^2 - S_i^2, 0 on the diagonal
    ret = b.call("add", b.call("multiply", _skew(b, b.call("matmul", _mT(b, u), gu)), _row(b, s)),
                 b.call("multiply", _col(b, s), _skew(b, b.call("matmul", vh, _mT(b, gvh)))))
    # 0 where S_i = S_j (the diagonal, and a repeated singular value): the limit for a loss that does not
    # depend on the choice of singular vectors, where its skew terms vanish; torch's 0 / 0 gives NaN there
    ret = _over(b, ret, e)
    ret = b.call("add", ret, b.call("multiply", _col(b, gs), eye))
    if m > n:  # gA = [U R + (I - U U^T) gU S^-1] Vh
        gus = _over(b, gu, _row(b, s))
        left = b.call("subtract", b.call("add", b.call("matmul", u, ret), gus),
                      b.call("matmul", u, b.call("matmul", _mT(b, u), gus)))
        return [b.call("matmul", left, vh)]
    if m < n:  # gA = U [R Vh + S^-1 gVh (I - V Vh)]
        sgv = _over(b, gvh, _col(b, s))
        right = b.call("subtract", b.call("add", b.call("matmul", ret, vh), sgv),
                       b.call("matmul", b.call("matmul", sgv, _mT(b, vh)), vh))
        return [b.call("matmul", u, right)]
    return [b.call("matmul", u, b.call("matmul", ret, vh))]


@register_vjp("linalg.svdvals")
def svdvals_vjp(b, call, out, g):
    """Forward: S = svdvals(A), A = U diag(S) Vh
    Backward: dA = U diag(g) Vh"""
    usv = b.call("linalg.svd", call.args[0])
    u, vh = b.get_item(usv, 0), b.get_item(usv, 2)
    return [b.call("matmul", b.call("multiply", u, _row(b, g)), vh)]
