import numpy as np

import tracer as T
from tests.cases import OpCase, rand

W = rand(2, 3, seed=5)


def _mm(a_shape, b_shape, name):
    return OpCase(name, T.matmul, np.matmul, [rand(*a_shape), rand(*b_shape, seed=1)], ("matmul",))


CASES = [
    _mm((3, 4), (4, 5), "matmul_2d"),
    _mm((2, 3, 4), (2, 4, 5), "matmul_batched"),
    _mm((2, 1, 3, 4), (5, 4, 2), "matmul_broadcast_batch"),
    _mm((3, 4), (2, 4, 5), "matmul_2d_batched"),
    _mm((2, 3, 4), (4, 5), "matmul_batched_2d"),
    _mm((4,), (4,), "matmul_1d_1d"),
    _mm((4,), (4, 3), "matmul_1d_2d"),
    _mm((3, 4), (4,), "matmul_2d_1d"),
    _mm((4,), (2, 4, 3), "matmul_1d_batched"),
    _mm((2, 1, 3, 4), (4,), "matmul_batched_1d"),
    _mm((1, 1), (1, 1), "matmul_size1"),
    OpCase("matmul_operator", lambda a, b: a @ b, np.matmul, [rand(3, 2), rand(2, 4, seed=1)], ("matmul",)),
    OpCase("matmul_rmatmul_array", lambda a: W @ a, lambda a: W @ a, [rand(3, 4)], ("matmul",)),
    OpCase("matmul_method", lambda a, b: a.matmul(b), np.matmul, [rand(2, 3), rand(3, seed=1)], ("matmul",)),
    OpCase("matmul_int64", T.matmul, np.matmul, [rand(2, 3, dtype="int64", low=-4, high=4),
                                                 rand(3, 2, dtype="int64", low=-4, high=4, seed=1)],
           ("matmul",), grad=False),
]
