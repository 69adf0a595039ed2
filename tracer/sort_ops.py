"""torch's sorting, order statistics, scans and extra reductions: sort, argsort, topk, kthvalue, median, mode,
quantile, cummax, cummin, cumprod, logcumsumexp, prod, nansum, nanmean, std_mean, var_mean, aminmax,
count_nonzero, with torch's argument names (dim, keepdim) and defaults.

Every index these return is int64 and carries no gradient; every value is gather_elements of the input at
those indices (or a composition of such), so gradients flow to the entries picked, as torch's.
"""
from __future__ import annotations

import collections
import math

import numpy as np

from ir.types import INT_DTYPES

from . import shape as _shape
from .math import as_tensor, astype, not_equal, where
from .tensor import Tensor, TraceError, apply
from .torch_methods import _dim, _root_at_zero_flat

SortResult = collections.namedtuple("sort", ["values", "indices"])
TopkResult = collections.namedtuple("topk", ["values", "indices"])
KthvalueResult = collections.namedtuple("kthvalue", ["values", "indices"])
MedianResult = collections.namedtuple("median", ["values", "indices"])
ModeResult = collections.namedtuple("mode", ["values", "indices"])
CummaxResult = collections.namedtuple("cummax", ["values", "indices"])
CumminResult = collections.namedtuple("cummin", ["values", "indices"])
AminmaxResult = collections.namedtuple("aminmax", ["min", "max"])


def _gather(x: Tensor, idx: Tensor, d: int) -> Tensor:
    return apply("gather_elements", [x, idx], axis=d)


def _pick(x: Tensor, order: Tensor, d: int, position: int | Tensor, keepdim: bool):
    """(values, indices) at sorted position `position` along d: one index per slice."""
    if isinstance(position, int):
        lead = (slice(None),) * d
        idx = order[lead + (slice(position, position + 1),)]
    else:
        idx = _gather(order, position, d)
    values = _gather(x, idx, d)
    if not keepdim:
        values, idx = _shape.squeeze(values, d), _shape.squeeze(idx, d)
    return values, idx


def _prepared(fn: str, input, dim):
    """x (1-D for a 0-d input), the normalized dim and whether the input was 0-d."""
    x = as_tensor(input)
    if x.dtype == "bool":
        raise TypeError(f"{fn}: bool tensors are not supported (torch refuses them too); convert with .int()")
    scalar = x.ndim == 0
    d = _dim(fn, dim, max(x.ndim, 1))
    return (x.reshape(1) if scalar else x), d, scalar


def _unscalar(t: Tensor, scalar: bool) -> Tensor:
    return t.reshape(()) if scalar else t


# ---------------------------------------------------------------- sort, argsort, topk, kthvalue


def argsort(input, dim: int = -1, descending: bool = False, stable: bool = False) -> Tensor:  # noqa: A002
    """The int64 indices that sort input along dim; always stable (equal values keep their order), NaN last
    ascending and first descending, as torch.

    >>> import tracer
    >>> tracer.tensor([3.0, 1.0, 2.0]).argsort().tolist()
    [1, 2, 0]
    """
    x, d, scalar = _prepared("argsort", input, dim)
    return _unscalar(apply("argsort", [x], axis=d, descending=descending), scalar)


def sort(input, dim: int = -1, descending: bool = False, stable: bool = False):  # noqa: A002
    """(values, indices) of input sorted along dim (torch.sort; stable always). values carry the gradient.

    >>> import tracer
    >>> tracer.tensor([3.0, 1.0, 2.0]).sort(descending=True).values.tolist()
    [3.0, 2.0, 1.0]
    """
    x, d, scalar = _prepared("sort", input, dim)
    order = apply("argsort", [x], axis=d, descending=descending)
    return SortResult(_unscalar(_gather(x, order, d), scalar), _unscalar(order, scalar))


def topk(input, k: int, dim: int = -1, largest: bool = True, sorted: bool = True):  # noqa: A002
    """(values, indices) of the k largest (largest=False: smallest) entries along dim, in order (torch.topk;
    between equal values the earlier index comes first, where torch leaves the order open)."""
    x, d, scalar = _prepared("topk", input, dim)
    n = x.shape[d]
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 0 <= k <= n:
        raise RuntimeError(f"topk: k ({k!r}) must be an int in 0..{n} (the size of dim {dim}, shape {x.shape})")
    order = apply("argsort", [x], axis=d, descending=largest)
    idx = order[(slice(None),) * d + (slice(0, int(k)),)]
    return TopkResult(_unscalar(_gather(x, idx, d), scalar), _unscalar(idx, scalar))


def kthvalue(input, k: int, dim: int = -1, keepdim: bool = False):  # noqa: A002
    """(values, indices) of the k-th smallest entry along dim, k from 1 (torch.kthvalue)."""
    x, d, scalar = _prepared("kthvalue", input, dim)
    n = x.shape[d]
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= n:
        raise RuntimeError(f"kthvalue: k ({k!r}) must be in 1..{n} (the size of dim {dim}, shape {x.shape})")
    values, idx = _pick(x, apply("argsort", [x], axis=d), d, int(k) - 1, keepdim or scalar)
    return KthvalueResult(_unscalar(values, scalar), _unscalar(idx, scalar))


# ---------------------------------------------------------------- median, mode, quantile


def _nan_count(x: Tensor, d: int) -> Tensor | None:
    if not x.dtype.startswith("float"):
        return None
    return _shape.sum(astype(not_equal(x, x), "int64"), axis=d, keepdims=True)


def median(input, dim: int | None = None, keepdim: bool = False):  # noqa: A002
    """The lower median: without dim, of all elements (a 0-d tensor); with dim, (values, indices) along it.
    A slice holding NaN gives NaN (and the first NaN's index), as torch. Between equal values the index is the
    one a stable sort puts at the median position (torch's may be another of the equal entries)."""
    x = as_tensor(input)
    if dim is None:
        if not math.prod(x.shape):
            raise RuntimeError("median: cannot compute the median of an empty tensor without dim")
        return median(x.reshape(-1), 0).values
    x, d, scalar = _prepared("median", x, dim)
    n = x.shape[d]
    if not n:
        raise IndexError(f"median: dim {dim} of input of shape {x.shape} is empty")
    order = apply("argsort", [x], axis=d)
    nans = _nan_count(x, d)
    if nans is None:
        values, idx = _pick(x, order, d, (n - 1) // 2, keepdim or scalar)
    else:  # NaN sorts last: the first NaN sits at n - count
        position = where(nans > 0, n - nans, (n - 1) // 2)
        values, idx = _pick(x, order, d, position, keepdim or scalar)
    return MedianResult(_unscalar(values, scalar), _unscalar(idx, scalar))


def mode(input, dim: int = -1, keepdim: bool = False):  # noqa: A002
    """(values, indices): the most frequent value along dim (the smallest of equally frequent ones) and the
    index of its last occurrence, as torch.mode. Counts by comparing every pair of a slice (n * n per slice)."""
    x, d, scalar = _prepared("mode", input, dim)
    n = x.shape[d]
    if not n:
        raise IndexError(f"mode: dim {dim} of input of shape {x.shape} is empty")
    moved = _shape.transpose(x, d, -1) if d != x.ndim - 1 else x
    s = _gather(moved, apply("argsort", [moved], axis=-1), -1)  # sorted values, the candidates
    counts = _shape.sum(astype(_shape.expand_dims(s, -1) == _shape.expand_dims(s, -2), "int64"), axis=-1)
    best = _shape.argmax(counts, axis=-1, keepdims=True)  # first maximum: the smallest value
    value = _gather(s, best, -1)
    # the last occurrence in the slice: the first match in the reversed slice
    last = (n - 1) - _shape.argmax(astype(moved == value, "int32")[..., ::-1], axis=-1, keepdims=True)
    idx = last if d == x.ndim - 1 else _shape.transpose(last, d, -1)
    values = _gather(x, idx, d)
    if not (keepdim or scalar):
        values, idx = _shape.squeeze(values, d), _shape.squeeze(idx, d)
    return ModeResult(_unscalar(values, scalar), _unscalar(idx, scalar))


_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _concrete_q(q):
    if isinstance(q, Tensor):
        if q._data is None:
            raise TraceError("quantile: q is a traced value; the positions it selects must be known when tracing: "
                             "pass q as a Python number, a list or a tensor made outside the trace")
        q = q.numpy()
    arr = np.asarray(q, dtype="float64")
    if arr.ndim > 1:
        raise RuntimeError(f"quantile: q must be a scalar or 1-D, got shape {arr.shape}")
    if arr.size and (np.any(arr < 0) or np.any(arr > 1) or np.any(np.isnan(arr))):
        raise RuntimeError(f"quantile: q values must be in the range [0, 1], got {arr.tolist()}")
    return arr


def quantile(input, q, dim: int | None = None, keepdim: bool = False, *,  # noqa: A002
             interpolation: str = "linear") -> Tensor:
    """The q-th quantiles along dim (of all elements when None), interpolating between the two nearest sorted
    entries (torch.quantile); q a number (the dim is reduced) or 1-D (a leading dim of len(q)). NaN in a slice
    gives NaN. q must be known when tracing (a number, a list, or a tensor made outside the trace).

    >>> import tracer
    >>> tracer.tensor([1.0, 2.0, 4.0, 8.0]).quantile(0.5).item()
    3.0
    """
    x = as_tensor(input)
    if not x.dtype.startswith("float"):
        raise RuntimeError(f"quantile: input must be a float tensor, got {x.dtype}")
    if interpolation not in _INTERPOLATIONS:
        raise ValueError(f"quantile: interpolation must be one of {list(_INTERPOLATIONS)}, got {interpolation!r}")
    qs = _concrete_q(q)
    if dim is None:
        out = quantile(x.reshape(-1), qs if qs.ndim else float(qs), 0, False, interpolation=interpolation)
        if keepdim:
            out = out.reshape(qs.shape + (1,) * x.ndim)
        return out
    x, d, scalar = _prepared("quantile", x, dim)
    n = x.shape[d]
    if not n:
        raise IndexError(f"quantile: dim {dim} of input of shape {x.shape} is empty")
    s = _gather(x, apply("argsort", [x], axis=d), d)
    nans = _nan_count(x, d)
    lead = (slice(None),) * d
    pieces = []
    for qv in qs.reshape(-1):
        pos = float(qv) * (n - 1)
        lo, hi = math.floor(pos), math.ceil(pos)
        frac = pos - lo
        if interpolation == "lower" or (interpolation == "nearest" and round(pos) == lo):
            hi, frac = lo, 0.0
        elif interpolation in ("higher", "nearest"):
            lo, frac = hi, 0.0
        elif interpolation == "midpoint" and hi != lo:
            frac = 0.5
        a = s[lead + (slice(lo, lo + 1),)]
        v = a if hi == lo else a + (s[lead + (slice(hi, hi + 1),)] - a) * frac  # torch's lerp
        pieces.append(where(nans > 0, float("nan"), v))  # keepdim shape along d
    if qs.ndim:  # q's dim in front
        out = _shape.stack(pieces, axis=0) if pieces else _shape.zeros((0,) + s.shape[:d] + (1,) + s.shape[d + 1:],
                                                                     dtype=x.dtype)
        return _shape.squeeze(out, d + 1) if scalar or not keepdim else out
    out = pieces[0]
    return out.reshape(()) if scalar else (out if keepdim else _shape.squeeze(out, d))


# ---------------------------------------------------------------- scans


def _cum_extremum(fn: str, op: str, result):
    def cum(input, dim: int):  # noqa: A002
        x, d, scalar = _prepared(fn, input, dim)
        idx = apply(op, [x], axis=d)
        return result(_unscalar(_gather(x, idx, d), scalar), _unscalar(idx, scalar))
    cum.__name__ = fn
    cum.__doc__ = (f"(values, indices) of the running {'maximum' if op == 'cumargmax' else 'minimum'} along dim "
                   f"(torch.{fn}): a tie takes the later index and a NaN, once seen, stays, as torch's.")
    return cum


cummax = _cum_extremum("cummax", "cumargmax", CummaxResult)
cummin = _cum_extremum("cummin", "cumargmin", CumminResult)


def cumprod(input, dim: int, *, dtype: str | None = None) -> Tensor:  # noqa: A002
    """Running products along dim (torch.cumprod); bool and integer input multiply in int64. The gradient is
    exact where the input holds zeros.

    >>> import tracer
    >>> tracer.tensor([1.0, 2.0, 3.0]).cumprod(0).tolist()
    [1.0, 2.0, 6.0]
    """
    x = as_tensor(input)
    x = astype(x, dtype) if dtype else (astype(x, "int64") if x.dtype in ("bool", *INT_DTYPES) else x)
    if x.ndim == 0:
        _dim("cumprod", dim, 1)
        return apply("cumprod", [x.reshape(1)], axis=0).reshape(())
    return apply("cumprod", [x], axis=_dim("cumprod", dim, x.ndim))


def logcumsumexp(input, dim: int) -> Tensor:  # noqa: A002
    """log(cumsum(exp(input))) along dim, exact for any spread of values (torch.logcumsumexp)."""
    x = as_tensor(input)
    if not x.dtype.startswith("float"):
        x = astype(x, "float32")
    return apply("logcumsumexp", [x], axis=_dim("logcumsumexp", dim, max(x.ndim, 1)))


# ---------------------------------------------------------------- reductions


def _axes(dim):
    return None if dim is None else ((dim,) if isinstance(dim, (int, np.integer)) else tuple(dim))


def prod(input, dim: int | None = None, keepdim: bool = False, *, dtype: str | None = None) -> Tensor:  # noqa: A002
    """The product over dim (all elements when None); bool and integer input multiply in int64, as torch. The
    gradient is the product of the other entries, exact where the input holds zeros.

    >>> import tracer
    >>> tracer.tensor([[1.0, 2.0], [3.0, 4.0]]).prod(1).tolist()
    [2.0, 12.0]
    """
    x = as_tensor(input)
    x = astype(x, dtype) if dtype else (astype(x, "int64") if x.dtype in ("bool", *INT_DTYPES) else x)
    return apply("prod", [x], axis=_axes(dim), keepdims=keepdim)


def nansum(input, dim=None, keepdim: bool = False) -> Tensor:  # noqa: A002
    """The sum over dim with NaN counted as 0 (torch.nansum)."""
    x = as_tensor(input)
    if x.dtype.startswith("float"):
        x = where(not_equal(x, x), 0.0, x)
    return _shape.sum(x, axis=_axes(dim), keepdims=keepdim)


def nanmean(input, dim=None, keepdim: bool = False) -> Tensor:  # noqa: A002
    """The mean over dim of the entries that are not NaN (torch.nanmean; NaN where every entry is)."""
    x = as_tensor(input)
    if not x.dtype.startswith("float"):
        raise RuntimeError(f"nanmean: input must be a float tensor, got {x.dtype}")
    keep = astype(not_equal(x, x) == False, x.dtype)  # noqa: E712 (an elementwise comparison)
    return nansum(x, dim, keepdim) / _shape.sum(keep, axis=_axes(dim), keepdims=keepdim)


def var_mean(input, dim=None, *, correction=1, keepdim: bool = False, unbiased: bool | None = None):  # noqa: A002
    """(variance, mean) over dim, the variance divided by n - correction (torch's default correction=1)."""
    x = as_tensor(input)
    v = _shape.var(x, axis=_axes(dim), keepdims=keepdim, correction=correction, unbiased=unbiased)
    return v, _shape.mean(x, axis=_axes(dim), keepdims=keepdim)


def std_mean(input, dim=None, *, correction=1, keepdim: bool = False, unbiased: bool | None = None):  # noqa: A002
    """(standard deviation, mean) over dim (torch's default correction=1); the gradient is 0 at zero spread."""
    v, m = var_mean(input, dim, correction=correction, keepdim=keepdim, unbiased=unbiased)
    return _root_at_zero_flat(v), m


def aminmax(input, *, dim: int | None = None, keepdim: bool = False):  # noqa: A002
    """(min, max) over dim (all elements when None), torch.aminmax."""
    from .torch_convert import _amax, _amin

    x = as_tensor(input)
    if not math.prod(x.shape):
        raise RuntimeError(f"aminmax: cannot reduce the empty input of shape {x.shape}")
    return AminmaxResult(_amin(x, axis=dim, keepdims=keepdim), _amax(x, axis=dim, keepdims=keepdim))


def count_nonzero(input, dim=None) -> Tensor:  # noqa: A002
    """The number (int64) of nonzero entries over dim (all when None)."""
    x = as_tensor(input)
    return _shape.sum(astype(not_equal(x, 0), "int64"), axis=_axes(dim))


__all__ = ["aminmax", "argsort", "count_nonzero", "cummax", "cummin", "cumprod", "kthvalue", "logcumsumexp",
           "median", "mode", "nanmean", "nansum", "prod", "quantile", "sort", "std_mean", "topk", "var_mean"]
METHODS = {name: globals()[name] for name in __all__}
