import numpy as np

import tracer as T
from tests.cases import OpCase, rand

# Two-way ties only: central differences see half the slope at each of two tied maxima, which is
# exactly the even split the rules promise.
ties = np.array([[1.0, 3.0, 3.0, -1.0], [0.5, 2.0, -4.0, 2.0], [0.0, 0.25, 0.75, 0.5]], "float32")


def _i64_sum(a):  # int32 and bool sums accumulate into int64, as PyTorch's
    return np.sum(a, axis=0, dtype="int64")


CASES = [
    OpCase("sum_all", T.sum, np.sum, [rand(3, 4)], ("sum",)),
    OpCase("sum_axis_neg", lambda x: x.sum(axis=-1), lambda a: a.sum(axis=-1), [rand(2, 3, 4)], ("sum",)),
    OpCase("sum_tuple_keepdims", lambda x: T.sum(x, axis=(0, 2), keepdims=True),
           lambda a: a.sum(axis=(0, 2), keepdims=True), [rand(2, 3, 4)], ("sum",)),
    OpCase("sum_size1_axis", lambda x: x.sum(axis=1), lambda a: a.sum(axis=1), [rand(3, 1)], ("sum",)),
    OpCase("sum_0d", T.sum, np.sum, [rand()], ("sum",)),
    OpCase("sum_0d_axis0", lambda x: x.sum(axis=0), lambda a: a, [rand()], ("sum",)),
    OpCase("sum_empty_axes", lambda x: x.sum(axis=()), lambda a: a.sum(axis=()), [rand(2, 3)], ("sum",)),
    OpCase("sum_int32", lambda x: x.sum(axis=0), _i64_sum, [rand(3, 4, dtype="int32", low=-5, high=5)], ("sum",),
           grad=False),
    OpCase("sum_bool_counts", lambda x: x.sum(axis=0), _i64_sum, [rand(5, 3, dtype="bool")], ("sum", "astype"),
           grad=False),
    OpCase("mean_all", T.mean, np.mean, [rand(3, 4)], ("mean",)),
    OpCase("mean_axis_keepdims", lambda x: x.mean(axis=1, keepdims=True), lambda a: a.mean(axis=1, keepdims=True),
           [rand(2, 3, 4)], ("mean",)),
    OpCase("mean_tuple_neg", lambda x: T.mean(x, axis=(-1, -3)), lambda a: a.mean(axis=(-1, -3)), [rand(2, 3, 4)],
           ("mean",)),
    OpCase("var_all", T.var, np.var, [rand(3, 4)], ("variance",)),
    OpCase("var_axis", lambda x: T.var(x, axis=0), lambda a: a.var(axis=0), [rand(5, 3)], ("variance",)),
    OpCase("var_tuple_keepdims", lambda x: T.var(x, axis=(0, -1), keepdims=True),
           lambda a: a.var(axis=(0, -1), keepdims=True), [rand(2, 3, 4)], ("variance",)),
    OpCase("var_0d", T.var, np.var, [rand()], ("variance",)),
    OpCase("max_all", T.max, np.max, [rand(3, 4)], ("max",)),
    OpCase("max_axis_neg", lambda x: T.max(x, axis=-1), lambda a: a.max(axis=-1), [rand(2, 3, 4)], ("max",)),
    OpCase("max_keepdims_tuple", lambda x: T.max(x, axis=(0, 2), keepdims=True),
           lambda a: a.max(axis=(0, 2), keepdims=True), [rand(2, 3, 4)], ("max",)),
    OpCase("max_ties", lambda x: T.max(x, axis=1), lambda a: a.max(axis=1), [ties], ("max",)),
    OpCase("max_ties_all", T.max, np.max, [ties[:, :3]], ("max",)),
    OpCase("max_0d", T.max, np.max, [rand()], ("max",)),
    OpCase("min_all", T.min, np.min, [rand(3, 4)], ("min",)),
    OpCase("min_axis_keepdims", lambda x: T.min(x, axis=0, keepdims=True), lambda a: a.min(axis=0, keepdims=True),
           [rand(3, 4)], ("min",)),
    OpCase("min_ties", lambda x: T.min(-x, axis=-1), lambda a: (-a).min(axis=-1), [ties], ("min", "negative")),
    OpCase("argmax_all", T.argmax, np.argmax, [rand(3, 4)], ("argmax",), grad=False),
    OpCase("argmax_axis", lambda x: x.argmax(axis=-1), lambda a: a.argmax(axis=-1), [rand(2, 3, 4)], ("argmax",),
           grad=False),
    OpCase("argmax_keepdims", lambda x: T.argmax(x, axis=1, keepdims=True),
           lambda a: np.argmax(a, axis=1, keepdims=True), [rand(2, 3, 4)], ("argmax",), grad=False),
    OpCase("argmax_all_keepdims", lambda x: T.argmax(x, keepdims=True), lambda a: np.argmax(a, keepdims=True),
           [rand(2, 3)], ("argmax",), grad=False),
    OpCase("argmax_ties_first", lambda x: x.argmax(axis=1), lambda a: a.argmax(axis=1), [ties], ("argmax",),
           grad=False),
    OpCase("argmax_0d", T.argmax, lambda a: np.asarray(0, "int64"), [rand()], ("argmax",), grad=False),
]
