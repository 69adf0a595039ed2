"""torch.linalg.cholesky and torch.linalg.solve_triangular on the ops of ir/ops/decomp.py (differentiable)."""
from __future__ import annotations

import numpy as np

from .math import as_tensor
from .tensor import Tensor, active_trace, apply


class LinAlgError(RuntimeError):
    """torch.linalg.LinAlgError: a factorization that cannot be completed (a RuntimeError, as torch's)."""


def _mT(x: Tensor) -> Tensor:
    n = x.ndim
    return apply("permute_dims", [x], axes=tuple(range(n - 2)) + (n - 1, n - 2))


def cholesky(A, *, upper: bool = False) -> Tensor:  # noqa: N803 (torch's name)
    """The Cholesky factor of a symmetric positive-definite A (lower, or upper = L^T), reading A's lower
    triangle. Eagerly a matrix that is not positive-definite raises torch's LinAlgError; inside a trace
    its factor is NaN.

    >>> import tracer
    >>> from tracer.decomp import cholesky
    >>> cholesky(tracer.tensor([[4.0, 2.0], [2.0, 5.0]])).tolist()
    [[2.0, 0.0], [1.0, 2.0]]
    """
    a = as_tensor(A)
    out = apply("linalg.cholesky", [a])
    if active_trace() is None:
        diag = np.diagonal(np.asarray(out.numpy()), axis1=-2, axis2=-1)
        bad = (~np.isfinite(diag) | (diag <= 0)).reshape(-1, diag.shape[-1])
        if bad.any():
            batch = int(np.argmax(bad.any(1)))
            where = f"(Batch element {batch}): " if diag.ndim > 1 else ""
            raise LinAlgError(f"linalg.cholesky: {where}The factorization could not be completed because the input "
                              f"is not positive-definite (the leading minor of order {int(np.argmax(bad[batch])) + 1} "
                              "is not positive-definite).")
    return _mT(out) if upper else out


def solve_triangular(A, B, *, upper: bool, left: bool = True, unitriangular: bool = False) -> Tensor:  # noqa: N803
    """X with A X = B (left) or X A = B (left=False), A triangular, as torch.linalg.solve_triangular;
    `unitriangular` takes A's diagonal as ones."""
    a, b = as_tensor(A), as_tensor(B)
    if unitriangular:
        n = a.shape[-1]
        eye = as_tensor(np.eye(n, dtype=a.dtype))
        a = a * (1 - eye) + eye
    if not left:  # X A = B  <=>  A^T X^T = B^T
        return _mT(apply("linalg.solve_triangular", [_mT(a), _mT(b)], upper=not upper))
    return apply("linalg.solve_triangular", [a, b], upper=upper)


__all__ = ["LinAlgError", "cholesky", "solve_triangular"]
