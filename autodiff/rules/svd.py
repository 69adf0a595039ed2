"""VJP rules of the singular value family (ir/ops/svd.py), with torch's formulas (svd_backward in its
FunctionsManual: real matrices, the reduced SVD), written with svd itself so that they differentiate again."""
from __future__ import annotations

import numpy as np

from ir import Call, Tuple, Var, const

from .registry import register_vjp


def _mT(b, x):
    """x with its last two axes swapped."""
    n = x.type.ndim
    return b.call("permute_dims", x, axes=tuple(range(n - 2)) + (n - 1, n - 2))


def _given(b, g) -> list:
    """The fields of a tuple gradient, None for the zeros the Gradient pass puts for an unused output: their
    terms are left out, as torch leaves out an undefined gradient (they divide by S_j^2 - S_i^2, which is 0
    at a repeated singular value, where the terms that remain are finite)."""
    values = {bd.var: bd.value for bd in b.bindings}
    inline = values.get(g) if isinstance(g, Var) else g
    if not isinstance(inline, Tuple):
        return [b.get_item(g, i) for i in range(len(g.type.fields))]
    return [None if isinstance(f, Var) and isinstance(values.get(f), Call) and values[f].op == "zeros" else f
            for f in inline.fields]


def _row(b, s):
    return b.call("expand_dims", s, axis=[-2])  # S[..., None, :]


def _col(b, s):
    return b.call("expand_dims", s, axis=[-1])  # S[..., :, None]


def _skew(b, x):
    return b.call("subtract", x, _mT(b, x))


@register_vjp("linalg.svd")
def svd_vjp(b, call, out, g):
    """Forward: U, S, Vh = svd(A), A = U diag(S) Vh, E_ij = S_j^2 - S_i^2 (1 on the diagonal)
    Backward: R = (skew(U^T gU) S_j + S_i skew(Vh gVh^T)) / E + diag(gS); dA = U R Vh (+ the m != n terms)"""
    a = call.args[0]
    *_, m, n = a.type.shape
    u, s, vh = (b.get_item(out, i) for i in range(3))
    gu, gs, gvh = _given(b, g)
    dtype, k = a.type.dtype, min(m, n)
    eye = const(np.eye(k, dtype=dtype), dtype)
    ret = None
    if gu is not None or gvh is not None:
        s2 = b.call("multiply", s, s)
        e = b.call("add", b.call("subtract", _row(b, s2), _col(b, s2)), eye)
        if gu is not None:
            ret = b.call("multiply", _skew(b, b.call("matmul", _mT(b, u), gu)), _row(b, s))
        if gvh is not None:
            term = b.call("multiply", _col(b, s), _skew(b, b.call("matmul", vh, _mT(b, gvh))))
            ret = term if ret is None else b.call("add", ret, term)
        ret = b.call("divide", ret, e)
    if gs is not None:
        diag = b.call("multiply", _col(b, gs), eye)
        ret = diag if ret is None else b.call("add", ret, diag)
    if ret is None:  # nothing reached the target through this svd
        return [b.call("zeros", shape=a.type.shape, dtype=dtype)]
    if m > n and gu is not None:  # gA = [U R + (I - U U^T) gU S^-1] Vh
        gus = b.call("divide", gu, _row(b, s))
        left = b.call("subtract", b.call("add", b.call("matmul", u, ret), gus),
                      b.call("matmul", u, b.call("matmul", _mT(b, u), gus)))
        return [b.call("matmul", left, vh)]
    if m < n and gvh is not None:  # gA = U [R Vh + S^-1 gVh (I - V Vh)]
        sgv = b.call("divide", gvh, _col(b, s))
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
