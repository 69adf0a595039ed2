"""Rows of tracer/nan_quantiles.py (nanmedian, nanquantile on argsort / gather_elements) and of index_put
(tracer/inplace_scatter.py, on grad.take_backward), with NaN entries in the inputs; no slice is all NaN, so
the finite differences stay finite (a NaN entry's own gradient is 0 both ways)."""
import numpy as np

import tracer as T
from tests.cases import OpCase, rand

holes = rand(3, 5, dtype="float64")
holes[0, 1] = holes[1, 3] = holes[1, 4] = holes[2, 0] = np.nan


def _index_put_ref(a, i, j, v):
    out = a.copy()
    np.add.at(out, (i, j), v)
    return out


def _replace(a, i, v):
    out = a.copy()
    out[i] = v
    return out


CASES = [
    OpCase("nanmedian_dim", lambda x: T.nanmedian(x, 1).values,
           lambda a: np.array([np.sort(r[~np.isnan(r)])[(np.sum(~np.isnan(r)) - 1) // 2] for r in a]),
           [holes], ("argsort", "gather_elements")),
    OpCase("nanmedian_all", lambda x: T.nanmedian(x), lambda a: np.sort(a[~np.isnan(a)])[(np.sum(~np.isnan(a)) - 1) // 2],
           [holes], ("argsort", "gather_elements", "where")),
    OpCase("nanquantile_linear", lambda x: T.nanquantile(x, [0.2, 0.75], dim=1),
           lambda a: np.nanquantile(a, [0.2, 0.75], axis=1), [holes], ("argsort", "gather_elements", "floor")),
    OpCase("nanquantile_midpoint_keepdim", lambda x: T.nanquantile(x, 0.4, dim=0, keepdim=True,
                                                                   interpolation="midpoint"),
           lambda a: np.nanquantile(a, 0.4, axis=0, keepdims=True, method="midpoint"), [holes],
           ("argsort", "gather_elements", "ceil")),
    OpCase("nanquantile_nearest_all", lambda x: T.nanquantile(x, 0.3, interpolation="nearest"),
           lambda a: np.nanquantile(a, 0.3, method="nearest"), [holes], ("argsort", "gather_elements", "round")),
    OpCase("index_put_accumulate", lambda x, i, j, v: x.index_put((i, j), v, accumulate=True), _index_put_ref,
           [rand(3, 4), np.array([0, 2, 0, -1]), np.array([1, 1, 1, 3]), rand(4, seed=1)],
           ("grad.take_backward", "add")),
    OpCase("index_put_replace", lambda x, i, v: x.index_put((i,), v),
           lambda a, i, v: _replace(a, i, v),
           [rand(3, 4), np.array([2, 0]), rand(4, seed=1)], ("index_update",)),
]
