"""Rows of ir/ops/decomp.py: linalg.cholesky and linalg.solve_triangular against NumPy's general routines
(float64 finite differences for the gradients, batched and broadcast)."""
import numpy as np

import tracer as T
from tests.cases import OpCase, rand
from tracer.decomp import cholesky, solve_triangular


def _spd(m):
    """m m^T + 2 I: symmetric positive-definite for any m, so finite differences stay in the domain."""
    return m @ T.transpose(m, -1, -2) + 2.0 * T.eye(m.shape[-1], dtype=m.dtype)


def _spd_ref(m):
    return m @ np.swapaxes(m, -1, -2) + 2.0 * np.eye(m.shape[-1], dtype=m.dtype)


def _lower(a):
    return T.tril(a) + 3.0 * T.eye(a.shape[-1], dtype=a.dtype)


def _lower_ref(a):
    return np.tril(a) + 3.0 * np.eye(a.shape[-1], dtype=a.dtype)


CASES = [
    OpCase("cholesky", lambda m: cholesky(_spd(m)), lambda m: np.linalg.cholesky(_spd_ref(m)),
           [rand(3, 3, dtype="float64")], ("linalg.cholesky",), rtol=1e-10),
    OpCase("cholesky_batched_upper", lambda m: cholesky(_spd(m), upper=True),
           lambda m: np.swapaxes(np.linalg.cholesky(_spd_ref(m)), -1, -2), [rand(2, 4, 4, dtype="float64")],
           ("linalg.cholesky",), rtol=1e-10),
    OpCase("solve_triangular_lower_broadcast", lambda a, b: solve_triangular(_lower(a), b, upper=False),
           lambda a, b: np.linalg.solve(_lower_ref(a), b), [rand(3, 3, dtype="float64"),
                                                             rand(2, 3, 2, dtype="float64")],
           ("linalg.solve_triangular",), rtol=1e-10),
    OpCase("solve_triangular_upper_right", lambda a, b: solve_triangular(T.transpose(_lower(a), -1, -2), b,
                                                                         upper=True, left=False),
           lambda a, b: b @ np.linalg.inv(_lower_ref(a).T), [rand(4, 4, dtype="float64"), rand(2, 4, dtype="float64")],
           ("linalg.solve_triangular",), rtol=1e-10),
]
