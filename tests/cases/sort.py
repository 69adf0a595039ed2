"""argsort and what tracer/sort_ops.py builds on it; the scans cumprod, logcumsumexp, cumargmax/cumargmin; prod.
Gradient rows use tie-free inputs (rand); tie handling is checked against torch in
tests/tracer/test_torch_index_ops.py."""
import numpy as np

import tracer as T
from tests.cases import OpCase, rand
from tracer.tensor import apply

ties = np.array([[2.0, 1.0, 2.0, 1.0, 3.0], [5.0, 5.0, 4.0, 4.0, 1.0]], "float32")
holes = np.array([1.0, 0.0, 1.0, 1.0], "float32")  # one zero per row
nan_holes = np.where(holes == 0, np.nan, 1.0).astype("float32")


def _np_logcumsumexp(a, axis):
    return np.logaddexp.accumulate(a, axis=axis)


def _np_cumarg(a, axis, largest):
    a = np.moveaxis(a, axis, -1)
    out = np.zeros(a.shape, "int64")
    for pos in np.ndindex(a.shape[:-1]):
        best = 0
        for i in range(a.shape[-1]):
            v, b = a[pos + (i,)], a[pos + (best,)]
            if (v >= b if largest else v <= b) or v != v:
                best = i
            out[pos + (i,)] = best
    return np.moveaxis(out, -1, axis)


CASES = [
    OpCase("argsort", lambda x: T.argsort(x), lambda a: np.argsort(a, -1, kind="stable"), [ties], ("argsort",),
           grad=False),
    OpCase("argsort_descending_stable_axis0", lambda x: apply("argsort", [x], axis=0, descending=True),
           lambda a: np.argsort(-a, 0, kind="stable"), [ties.T.copy()], ("argsort",), grad=False),
    OpCase("argsort_0d", T.argsort, lambda a: np.zeros((), "int64"), [rand()], ("argsort", "reshape"), grad=False),
    OpCase("argsort_int32_dtype", lambda x: apply("argsort", [x], axis=-1, dtype="int32"),
           lambda a: np.argsort(a, -1, kind="stable").astype("int32"), [rand(3, 2, dtype="int64", low=-9, high=9)],
           ("argsort",), grad=False),
    OpCase("sort_values", lambda x: T.sort(x, dim=0).values, lambda a: np.sort(a, 0), [rand(4, 3)],
           ("argsort", "gather_elements")),
    OpCase("sort_descending_empty", lambda x: T.sort(x, descending=True).values, lambda a: a.copy(), [rand(2, 0)],
           ("argsort", "gather_elements"), grad=False),
    OpCase("topk_neg_dim", lambda x: T.topk(x, 2, dim=-2).values, lambda a: -np.sort(-a, 0)[:2], [rand(4, 3)],
           ("argsort", "gather_elements")),
    OpCase("kthvalue", lambda x: x.kthvalue(2).values, lambda a: np.sort(a, -1)[..., 1], [rand(3, 5)],
           ("argsort", "gather_elements")),
    OpCase("median_dim", lambda x: x.median(1).values, lambda a: np.sort(a, 1)[:, 1], [rand(3, 4)],
           ("argsort", "gather_elements", "where")),
    OpCase("median_all_0d", lambda x: x.median(), lambda a: a.copy(), [rand()], ("argsort", "gather_elements")),
    OpCase("mode_values", lambda x: T.mode(x, 1).values, lambda a: np.array([1.0, 4.0], a.dtype), [ties],
           ("argsort", "gather_elements", "argmax"), grad=False),
    OpCase("quantile_list", lambda x: T.quantile(x, [0.1, 0.5], dim=1), lambda a: np.quantile(a, [0.1, 0.5], axis=1).astype(a.dtype),
           [rand(2, 5)], ("argsort", "gather_elements", "where")),
    OpCase("nanmean", lambda x: T.nanmean(x, dim=1), lambda a: np.nanmean(a, axis=1), [rand(3, 4) * nan_holes],
           ("where", "sum")),
    OpCase("cumprod_axis1", lambda x: T.cumprod(x, 1), lambda a: np.cumprod(a, 1), [rand(2, 4)], ("cumprod",)),
    OpCase("cumprod_zeros", lambda x: T.cumprod(x, -1), lambda a: np.cumprod(a, -1), [rand(3, 4) * holes],
           ("cumprod",)),
    OpCase("cumprod_exclusive_flat", lambda x: apply("cumprod", [x], axis=None, exclusive=True),
           lambda a: np.concatenate([[1.0], np.cumprod(a.reshape(-1))[:-1]]).astype(a.dtype), [rand(2, 3)],
           ("cumprod",)),
    OpCase("cumprod_0d", lambda x: x.cumprod(0), lambda a: a.copy(), [rand()], ("cumprod",)),
    OpCase("logcumsumexp", lambda x: T.logcumsumexp(x * 40.0, 0), lambda a: _np_logcumsumexp(a * 40, 0),
           [rand(4, 3)], ("logcumsumexp",), rtol=1e-5),
    OpCase("logcumsumexp_0d", lambda x: T.logcumsumexp(x, -1), lambda a: a.copy(), [rand()], ("logcumsumexp",)),
    OpCase("cummax_values", lambda x: T.cummax(x, 1).values, lambda a: np.maximum.accumulate(a, 1), [rand(3, 5)],
           ("cumargmax", "gather_elements")),
    OpCase("cummin_values_dim0", lambda x: T.cummin(x, 0).values, lambda a: np.minimum.accumulate(a, 0),
           [rand(5, 2)], ("cumargmin", "gather_elements")),
    OpCase("cumargmax_ties", lambda x: T.cummax(x, 1).indices, lambda a: _np_cumarg(a, 1, True), [ties],
           ("cumargmax",), grad=False),
    OpCase("cumargmin_ties_int", lambda x: apply("cumargmin", [x], axis=0), lambda a: _np_cumarg(a, 0, False),
           [ties.T.astype("int64")], ("cumargmin",), grad=False),
    OpCase("prod_axis", lambda x: T.prod(x, 1), lambda a: np.prod(a, 1), [rand(3, 4)], ("prod",)),
    OpCase("prod_one_zero_each", lambda x: x.prod(), lambda a: np.prod(a), [rand(2, 4) * holes], ("prod",)),
    OpCase("prod_one_zero", lambda x: x.prod(0), lambda a: np.prod(a, 0), [rand(4, 2) * holes[:, None]], ("prod",)),
    OpCase("prod_axes_keepdims", lambda x: apply("prod", [x], axis=(0, 2), keepdims=True),
           lambda a: np.prod(a, (0, 2), keepdims=True), [rand(2, 3, 2)], ("prod",)),
    OpCase("prod_empty", lambda x: x.prod(1), lambda a: np.ones(2, a.dtype), [rand(2, 0)], ("prod",), grad=False),
    OpCase("prod_int32_widens", T.prod, lambda a: np.prod(a, dtype="int64"), [rand(4, dtype="int32", low=1, high=5)],
           ("astype", "prod"), grad=False),
]
