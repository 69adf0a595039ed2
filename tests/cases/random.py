"""The random ops, through the constructors: ranges, moments and reproducibility from a seed."""
import numpy as np

import tracer as T
from tests.cases import OpCase


def _moments(x):
    return T.stack([x.mean(), T.std(x)])


CASES = [
    OpCase("rand_range", lambda: T.stack([T.rand(4000, seed=0).min() >= 0, T.rand(4000, seed=0).max() < 1]),
           lambda: np.array([True, True]), [], ("random.uniform",), grad=False),
    OpCase("rand_mean", lambda: T.rand(40000, seed=1, dtype="float64").mean(), lambda: np.float64(0.5), [],
           ("random.uniform",), grad=False, atol=0.01),
    OpCase("randn_moments", lambda: _moments(T.randn(200, 200, seed=2, dtype="float64")),
           lambda: np.array([0.0, 1.0]), [], ("random.normal",), grad=False, atol=0.02),
    OpCase("randn_seeded_twice_equal", lambda: T.randn(3, 4, seed=7) - T.randn((3, 4), seed=7),
           lambda: np.zeros((3, 4), "float32"), [], ("random.normal", "subtract"), grad=False),
    OpCase("randn_seeds_differ", lambda: (T.randn(50, seed=1) != T.randn(50, seed=2)).astype("int32").min(),
           lambda: np.int32(1), [], ("random.normal", "not_equal"), grad=False),
    OpCase("randint_bounds", lambda: T.stack([T.randint(3, 7, (2000,), seed=0).min(),
                                             T.randint(3, 7, (2000,), seed=0).max()]),
           lambda: np.array([3, 6], "int64"), [], ("random.randint",), grad=False),
    OpCase("randint_high_only_int32", lambda: T.randint(2, (5, 5), seed=4, dtype="int32").max() <= 1,
           lambda: np.bool_(True), [], ("random.randint",), grad=False),
    OpCase("randn_like_times_x", lambda x: x * T.randn_like(x, seed=3).detach(),
           lambda a: a * _randn_like_ref(a), [np.linspace(-1, 1, 6, dtype="float32").reshape(2, 3)],
           ("random.normal", "multiply")),
]


def _randn_like_ref(a):
    return T.randn(a.shape, seed=3).numpy()  # the values are checked by the rows above; this one is the gradient
