"""torch.linalg.svd, torch.linalg.svdvals and the singular-value matrix norms (ord 'nuc', 2, -2), on
ir/ops/svd.py's linalg.svd / linalg.svdvals (differentiable, with torch's formulas).

The 2-norm is the largest singular value and -2 the smallest, taken with tracer's max / min, whose gradient
splits evenly over ties, as torch's amax / amin over svdvals does; the nuclear norm is their sum.
"""
from __future__ import annotations

import collections

from . import shape as _shape
from .math import as_tensor
from .tensor import Tensor, apply

_FLOATS = ("float16", "float32", "float64")
SvdResult = collections.namedtuple("svd", ["U", "S", "Vh"])


def _checked(fn: str, A) -> Tensor:  # noqa: N803
    x = as_tensor(A)
    if x.dtype not in _FLOATS:
        raise RuntimeError(f"linalg.{fn}: expected a floating point tensor as input, got {x.dtype}")
    if x.ndim < 2:
        raise RuntimeError(f"linalg.{fn}: the input must have at least 2 dimensions, got shape {x.shape}")
    return x


def svd(A, full_matrices: bool = True, *, driver=None) -> SvdResult:  # noqa: N803 (torch's name)
    """(U, S, Vh) with A = U diag(S) Vh for each matrix of A (..., m, n), S descending (torch.linalg.svd). Only
    the reduced factors are computed: full_matrices=True (torch's default) is accepted for square matrices,
    where they are the same; otherwise pass full_matrices=False. The gradient is torch's: finite when the
    loss depends on U and Vh only through gauge-invariant quantities and the singular values are distinct.

    >>> import tracer
    >>> tracer.linalg.svd(tracer.tensor([[0.0, 2.0], [1.0, 0.0]])).S.tolist()
    [2.0, 1.0]
    """
    x = _checked("svd", A)
    if full_matrices and x.shape[-1] != x.shape[-2]:
        raise NotImplementedError(f"linalg.svd: full_matrices=True of a non-square input (shape {x.shape}) is "
                                  "not computed by tracegrad; pass full_matrices=False (the reduced factors)")
    out = apply("linalg.svd", [x])
    return SvdResult(out[0], out[1], out[2])


def svdvals(A, *, driver=None) -> Tensor:  # noqa: N803 (torch's name)
    """The singular values of each matrix of A (..., m, n), descending (torch.linalg.svdvals).

    >>> import tracer
    >>> tracer.linalg.svdvals(tracer.tensor([[3.0, 0.0], [0.0, -4.0]])).tolist()
    [4.0, 3.0]
    """
    return apply("linalg.svdvals", [_checked("svdvals", A)])


def singular_value_norm(x: Tensor, ord, r: int, c: int, keepdim: bool) -> Tensor:  # noqa: A002
    """matrix_norm's 'nuc' (sum), 2 (largest) and -2 (smallest singular value) over dims r, c of x."""
    if 0 in (x.shape[r], x.shape[c]) and ord != "nuc":
        raise RuntimeError(f"linalg.matrix_norm: ord={ord!r} of an empty matrix (shape {x.shape}) is not defined")
    rest = [i for i in range(x.ndim) if i not in (r, c)]
    moved = x if (r, c) == (x.ndim - 2, x.ndim - 1) else _shape.permute_dims(x, rest + [r, c])
    s = svdvals(moved)
    out = _shape.sum(s, axis=-1) if ord == "nuc" else (_shape.max if ord == 2 else _shape.min)(s, axis=-1)
    if keepdim:
        out = _shape.expand_dims(out, tuple(sorted((r, c))))
    return out


__all__ = ["svd", "svdvals"]
