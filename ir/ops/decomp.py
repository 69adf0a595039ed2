"""Matrix decompositions and triangular solves: linalg.cholesky and linalg.solve_triangular.

`linalg.cholesky(A)` is the lower factor L of a symmetric positive-definite A = L L^T over the last two axes
(batched), reading A's lower triangle only, as torch.linalg.cholesky. A matrix that is not positive-definite
gives NaN rather than raising (a compiled step cannot raise from inside a kernel); torch.distributions'
constraint checks and `tracer.linalg.cholesky` check it before and raise torch's error.

`linalg.solve_triangular(A, B, upper)` is X with A X = B, A (..., n, n) triangular (only the triangle named
by `upper` is read), B (..., n, k), batch dimensions broadcast; by substitution, one row at a time, so it is
exact triangular arithmetic on NumPy and CuPy alike.
"""
from __future__ import annotations

import numpy as np

from ..types import TensorType
from .common import require_float
from .registry import Attr, declare, tensor_arg
from .special import quiet


def _square(op, t, arg):
    require_float(op, t, arg)
    if t.ndim < 2 or t.shape[-1] != t.shape[-2]:
        raise op.error(f"argument {arg} must be a batch of square matrices (..., n, n), got shape {t.shape}")


def _infer_cholesky(op, types):
    t = tensor_arg(op, types, 0)
    _square(op, t, "x")
    return t


def _cholesky(xp, a):
    x = xp.tril(a)
    x = x + xp.swapaxes(xp.tril(a, -1), -1, -2)  # symmetric from the lower triangle, as torch reads it
    n = a.shape[-1]
    out = xp.zeros_like(a)
    with quiet(xp):
        for j in range(n):  # column by column (Cholesky-Banachiewicz): the same arithmetic on every backend
            row = out[..., j, :j]
            diag = xp.sqrt(x[..., j, j] - (row * row).sum(-1))
            out[..., j, j] = diag
            if j + 1 < n:
                below = x[..., j + 1:, j] - (out[..., j + 1:, :j] * row[..., None, :]).sum(-1)
                out[..., j + 1:, j] = below / diag[..., None]
    return out


def _infer_solve(op, types, upper):
    a, b = tensor_arg(op, types, 0), tensor_arg(op, types, 1)
    _square(op, a, "a")
    require_float(op, b, "b")
    if b.ndim < 2 or b.shape[-2] != a.shape[-1]:
        raise op.error(f"argument b must be (..., {a.shape[-1]}, k) to match a of shape {a.shape}, got {b.shape}")
    if a.dtype != b.dtype:
        raise op.error(f"a ({a.dtype}) and b ({b.dtype}) must share one dtype; insert astype to convert")
    batch_a, batch_b = a.shape[:-2], b.shape[:-2]
    batch = []
    for i in range(1, max(len(batch_a), len(batch_b)) + 1):
        da = batch_a[-i] if i <= len(batch_a) else 1
        db = batch_b[-i] if i <= len(batch_b) else 1
        if da != db and 1 not in (da, db):
            raise op.error(f"cannot broadcast the batch dimensions of a {a.shape} and b {b.shape}")
        batch.insert(0, max(da, db))
    return TensorType(tuple(batch) + b.shape[-2:], b.dtype)


def _solve_triangular(xp, a, b, upper):
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])  # shapes are host tuples on every backend
    a = xp.broadcast_to(a, tuple(batch) + a.shape[-2:])
    out = xp.array(xp.broadcast_to(b, tuple(batch) + b.shape[-2:]), copy=True)
    n = a.shape[-1]
    order = range(n - 1, -1, -1) if upper else range(n)
    with quiet(xp):
        for i in order:
            done = slice(i + 1, n) if upper else slice(0, i)
            rest = (a[..., i, done, None] * out[..., done, :]).sum(-2)
            out[..., i, :] = (out[..., i, :] - rest) / a[..., i, i, None]
    return out


declare("linalg.cholesky", ("x",), infer=_infer_cholesky, kernel=_cholesky,
        doc="The lower Cholesky factor of a symmetric positive-definite matrix (batched).")
declare("linalg.solve_triangular", ("a", "b"), (Attr("upper", "bool", False),), infer=_infer_solve,
        kernel=_solve_triangular, doc="X with A X = B for a triangular A (lower unless upper=True).")
