"""Rows of ir/ops/svd.py: linalg.svd (square, tall, wide, batched) and linalg.svdvals, and the matrix norms
built on them, against NumPy's LAPACK SVD (float64 finite differences for the gradients)."""
import numpy as np

import tracer as T
from tests.cases import OpCase, rand


def _svd_ref(a):
    u, s, vh = np.linalg.svd(a, full_matrices=False)
    return u, s, vh


def _svd(a):
    return tuple(T.linalg.svd(a, full_matrices=False))


def _norm_ref(ord):  # noqa: A002
    return lambda a: np.linalg.norm(a, ord, axis=(-2, -1))


CASES = [
    OpCase("svd_square", _svd, _svd_ref, [rand(3, 3, dtype="float64")], ("linalg.svd",), rtol=1e-10, atol=1e-12),
    OpCase("svd_tall_batched", _svd, _svd_ref, [rand(2, 4, 3, dtype="float64")], ("linalg.svd",), rtol=1e-10,
           atol=1e-12),
    OpCase("svd_wide", _svd, _svd_ref, [rand(2, 4, dtype="float64")], ("linalg.svd",), rtol=1e-10, atol=1e-12),
    OpCase("svd_values_only", lambda a: T.linalg.svd(a, full_matrices=False).S, lambda a: _svd_ref(a)[1],
           [rand(3, 2, dtype="float64")], ("linalg.svd",), rtol=1e-10),
    OpCase("svdvals_batched", T.linalg.svdvals, lambda a: np.linalg.svd(a, compute_uv=False),
           [rand(2, 3, 4)], ("linalg.svdvals",), rtol=1e-5),
    OpCase("svdvals_empty", T.linalg.svdvals, lambda a: np.zeros((2, 0), a.dtype), [rand(2, 0, 3)],
           ("linalg.svdvals",), grad=False),
    OpCase("matrix_norm_nuc", lambda a: T.linalg.matrix_norm(a, "nuc"), _norm_ref("nuc"),
           [rand(2, 3, 4, dtype="float64")], ("linalg.svdvals", "sum"), rtol=1e-10),
    OpCase("matrix_norm_2", lambda a: T.linalg.matrix_norm(a, 2), _norm_ref(2), [rand(4, 3, dtype="float64")],
           ("linalg.svdvals", "max"), rtol=1e-10),
    OpCase("matrix_norm_neg2_dims", lambda a: T.linalg.norm(a, -2, dim=(0, 2)),
           lambda a: np.linalg.norm(np.moveaxis(a, 1, 0), -2, axis=(-2, -1)), [rand(3, 2, 4, dtype="float64")],
           ("linalg.svdvals", "min"), rtol=1e-10),
]
