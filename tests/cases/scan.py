import numpy as np

import tracer as T
from tests.cases import OpCase, rand
from tracer.tensor import apply


def _exclusive(a, axis):
    out = np.cumsum(a, axis=axis, dtype=a.dtype)
    return np.concatenate([np.zeros_like(np.take(out, [0], axis=axis)), np.delete(out, -1, axis=axis)], axis=axis)


CASES = [
    OpCase("cumsum_axis1", lambda x: T.cumsum(x, axis=1), lambda a: np.cumsum(a, axis=1), [rand(2, 3, 4)],
           ("cumsum",), rtol=1e-5),
    OpCase("cumsum_flat", T.cumsum, lambda a: np.cumsum(a), [rand(2, 3)], ("cumsum",)),
    OpCase("cumsum_dim_neg", lambda x: T.cumsum(x, dim=-1), lambda a: np.cumsum(a, axis=-1), [rand(3, 4)],
           ("cumsum",)),
    OpCase("cumsum_exclusive_axis0", lambda x: apply("cumsum", [x], axis=0, exclusive=True),
           lambda a: _exclusive(a, 0), [rand(4, 2)], ("cumsum",)),
    OpCase("cumsum_exclusive_flat", lambda x: apply("cumsum", [x], axis=None, exclusive=True),
           lambda a: _exclusive(a.reshape(-1), 0), [rand(2, 2)], ("cumsum",)),
    OpCase("cumsum_int32_widens", T.cumsum, lambda a: np.cumsum(a, dtype="int64"),
           [rand(5, dtype="int32", low=-5, high=5)], ("astype", "cumsum"), grad=False),
    OpCase("cumsum_int64_ir", lambda x: apply("cumsum", [x], axis=0), lambda a: np.cumsum(a, axis=0),
           [rand(3, 2, dtype="int64", low=-5, high=5)], ("cumsum",), grad=False),
]
