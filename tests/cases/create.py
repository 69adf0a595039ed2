import numpy as np

import tracer as T
from tests.cases import OpCase, rand

CASES = [
    OpCase("zeros", lambda: T.zeros((2, 3)), lambda: np.zeros((2, 3), "float32"), [], ("zeros",), grad=False),
    OpCase("zeros_int_shape_0d", lambda: T.zeros((), "int64"), lambda: np.zeros((), "int64"), [], ("zeros",),
           grad=False),
    OpCase("ones", lambda: T.ones(3, dtype="float64"), lambda: np.ones(3), [], ("ones",), grad=False),
    OpCase("full", lambda: T.full((2, 2), 1.5), lambda: np.full((2, 2), 1.5, "float32"), [], ("full",), grad=False),
    OpCase("full_int", lambda: T.full((3,), 7, "int32"), lambda: np.full(3, 7, "int32"), [], ("full",), grad=False),
    OpCase("zeros_like", T.zeros_like, np.zeros_like, [rand(2, 3)], ("zeros_like",), grad=False),
    OpCase("ones_like_int", T.ones_like, np.ones_like, [rand(4, dtype="int32", low=0, high=9)], ("ones_like",),
           grad=False),
    OpCase("ones_like_dtype", lambda x: T.ones_like(x, "float64"), lambda a: np.ones_like(a, "float64"),
           [rand(2, 2)], ("ones",), grad=False),
    OpCase("full_like", lambda x: T.full_like(x, -2.0), lambda a: np.full_like(a, -2.0), [rand(3, 1)],
           ("full_like",), grad=False),
    # Created values are constants to the Gradient pass: the gradient flows only through x.
    OpCase("full_like_times_x", lambda x: x * T.full_like(x, 3.0), lambda a: a * np.float32(3), [rand(2, 3)],
           ("full_like", "multiply")),
    OpCase("zeros_like_plus_x", lambda x: T.zeros_like(x) + x.exp(), lambda a: np.exp(a), [rand(3)],
           ("zeros_like", "add", "exp")),
]
