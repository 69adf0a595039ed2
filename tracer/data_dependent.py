"""Ops whose output shape depends on the input's values (nonzero, masked_select, unique, unique_consecutive,
bincount, argwhere, histc without a range), as torch's, and the searches whose output shape does not
(searchsorted, bucketize, histc with a range).

The first group is exact eagerly. A trace records shapes, not values, so inside one these raise a TraceError
naming the op and saying what to do: compute it outside the traced step, or keep the shape fixed with a
mask. searchsorted and bucketize are the IR op `searchsorted`, so they trace (without a gradient, as torch).
"""
from __future__ import annotations

import numpy as np

from . import shape as _shape
from .math import as_tensor, astype, minimum, promote, where
from .tensor import Tensor, TraceError, active_trace, apply, array_module_of


def _concrete(op: str, x: Tensor, why: str):
    """x's array, or a TraceError inside a trace: op's output shape depends on values a trace does not know."""
    if active_trace() is not None or x._var is not None:
        raise TraceError(
            f"{op} inside a trace: its output shape depends on the values of its input ({why}), which a trace does "
            "not know. Compute it outside the traced step (eagerly, before calling it) and pass the result in, or "
            "keep the shape fixed with a mask (tracer.where(mask, x, 0), x * mask)")
    return x._data


def _wrap(array) -> Tensor:
    return Tensor.wrap(array)


def nonzero(input, *, as_tuple: bool = False):  # noqa: A002 (torch's names)
    """Indices (int64) of the nonzero elements: shape (count, ndim), or one 1-D tensor per axis (as_tuple=True).

    >>> import tracer
    >>> tracer.nonzero(tracer.tensor([[0, 1], [2, 0]])).tolist()
    [[0, 1], [1, 0]]
    """
    x = as_tensor(input)
    data = _concrete("nonzero", x, "how many elements are nonzero")
    xp = array_module_of(data)
    if as_tuple:
        return tuple(_wrap(i.astype("int64")) for i in xp.nonzero(data.reshape(-1) if data.ndim == 0 else data))
    if data.ndim == 0:  # torch: shape (1, 0) for a nonzero scalar, (0, 0) for a zero one
        return _wrap(xp.zeros((int(bool(data)), 0), "int64"))
    return _wrap(xp.argwhere(data).astype("int64"))


def argwhere(input) -> Tensor:  # noqa: A002
    """nonzero(input): shape (count, ndim), int64."""
    x = as_tensor(input)
    _concrete("argwhere", x, "how many elements are nonzero")
    return nonzero(x)


def masked_select(input, mask) -> Tensor:  # noqa: A002
    """The elements of input where the bool mask (input and mask broadcast together) holds, as a 1-D tensor.
    Its gradient scatters back into input, as torch's (it is a take of the selected positions)."""
    x, m = as_tensor(input), as_tensor(mask)
    if m.dtype != "bool":
        raise RuntimeError(f"masked_select: expected mask to have dtype bool, got {m.dtype}")
    mdata = _concrete("masked_select", m, "how many mask elements are True")
    _concrete("masked_select", x, "how many mask elements are True")
    shape = tuple(np.broadcast_shapes(x.shape, m.shape))
    xp = array_module_of(mdata)
    idx = xp.flatnonzero(xp.broadcast_to(mdata, shape)).astype("int64")
    flat = _shape.reshape(x if x.shape == shape else _shape.broadcast_to(x, shape), (-1,))
    return _shape.take(flat, _wrap(idx))


def _dim_of(op: str, dim, ndim: int) -> int:
    if not -max(ndim, 1) <= dim < max(ndim, 1):
        raise IndexError(f"{op}: dim {dim} out of range for a tensor of {ndim} dimension(s)")
    return dim % max(ndim, 1)


def _results(out, inverse, counts, return_inverse, return_counts):
    res = [_wrap(out)]
    if return_inverse:
        res.append(_wrap(inverse.astype("int64")))
    if return_counts:
        res.append(_wrap(counts.astype("int64")))
    return res[0] if len(res) == 1 else tuple(res)


def unique(input, sorted: bool = True, return_inverse: bool = False, return_counts: bool = False,  # noqa: A002
           dim: int | None = None):
    """The distinct elements (or slices along dim), ascending (torch sorts on the CPU whatever `sorted` says);
    with return_inverse each element's position in them, with return_counts how often each occurs.

    >>> import tracer
    >>> [t.tolist() for t in tracer.unique(tracer.tensor([3, 1, 3]), return_inverse=True, return_counts=True)]
    [[1, 3], [1, 0, 1], [1, 2]]
    """
    x = as_tensor(input)
    data = _concrete("unique", x, "how many distinct elements it holds")
    xp = array_module_of(data)
    if dim is None:
        out, inverse, counts = xp.unique(data.reshape(-1), return_inverse=True, return_counts=True)
        return _results(out, inverse.reshape(data.shape), counts, return_inverse, return_counts)
    d = _dim_of("unique", dim, data.ndim)
    out, inverse, counts = xp.unique(data, return_inverse=True, return_counts=True, axis=d)
    return _results(out, inverse.reshape(-1), counts, return_inverse, return_counts)


def unique_consecutive(input, return_inverse: bool = False, return_counts: bool = False,  # noqa: A002
                       dim: int | None = None):
    """Each run of equal consecutive elements (or slices along dim) collapsed to one, as torch.

    >>> import tracer
    >>> tracer.unique_consecutive(tracer.tensor([1, 1, 2, 1])).tolist()
    [1, 2, 1]
    """
    x = as_tensor(input)
    data = _concrete("unique_consecutive", x, "how many runs of equal elements it holds")
    xp = array_module_of(data)
    if dim is None:
        flat, d = data.reshape(-1), 0
    else:
        d = _dim_of("unique_consecutive", dim, data.ndim)
        flat = xp.moveaxis(data, d, 0) if data.ndim else data.reshape(1)
    n = flat.shape[0]
    if n == 0:
        change = xp.zeros(0, bool)
    else:
        differs = (flat[1:] != flat[:-1]).reshape(n - 1, -1).any(axis=1)
        change = xp.concatenate([xp.ones(1, bool), differs])
    starts = xp.flatnonzero(change)
    out = flat[starts]
    if dim is not None and data.ndim:
        out = xp.moveaxis(out, 0, d)
    inverse = xp.cumsum(change) - 1
    counts = xp.diff(xp.concatenate([starts, xp.asarray([n])]))
    return _results(out, inverse.reshape(data.shape) if dim is None else inverse, counts, return_inverse,
                    return_counts)


def bincount(input, weights=None, minlength: int = 0) -> Tensor:  # noqa: A002
    """How often each value 0..max(input) occurs in the 1-D non-negative integer input (the sums of `weights`
    there when given), at least `minlength` bins.

    >>> import tracer
    >>> tracer.bincount(tracer.tensor([0, 1, 1, 3])).tolist()
    [1, 2, 0, 1]
    """
    x = as_tensor(input)
    data = _concrete("bincount", x, "its length is the largest element plus one")
    if x.ndim != 1 or x.dtype not in ("int8", "uint8", "int16", "int32", "int64") or (data.size and data.min() < 0):
        raise RuntimeError(f"bincount only supports 1-d non-negative integral inputs; got a {x.dtype} tensor of shape "
                           f"{x.shape}" + (" holding a negative value" if x.ndim == 1 and data.size else ""))
    if isinstance(minlength, bool) or not isinstance(minlength, (int, np.integer)) or minlength < 0:
        raise RuntimeError(f"bincount: minlength should be >= 0, got {minlength!r}")
    xp = array_module_of(data)
    if weights is None:
        return _wrap(xp.bincount(data, minlength=int(minlength)).astype("int64"))
    w = as_tensor(weights)
    wdata = _concrete("bincount", w, "its length is the largest element plus one")
    if w.shape != x.shape:
        raise RuntimeError(f"bincount: weights should be 1-d and have the same length as input, got {w.shape} for "
                           f"input {x.shape}")
    dtype = w.dtype if w.dtype in ("float16", "float32", "float64") else "float64"
    return _wrap(xp.bincount(data, weights=wdata.astype("float64"), minlength=int(minlength)).astype(dtype))


def histc(input, bins: int = 100, min: float = 0, max: float = 0) -> Tensor:  # noqa: A002
    """A histogram of `bins` equal bins from min to max (both included; the data's own range when min == max);
    elements outside are ignored. Floating input only, as torch. With min < max its shape is fixed, so it
    traces (no gradient); with the data's range it needs the values.

    >>> import tracer
    >>> tracer.histc(tracer.tensor([1.0, 2.0, 1.0]), bins=4, min=0, max=3).tolist()
    [0.0, 2.0, 1.0, 0.0]
    """
    x = as_tensor(input)
    if x.dtype not in ("float16", "float32", "float64"):
        raise NotImplementedError(f'"histogram_cpu" not implemented for {x.dtype} (histc takes a floating tensor)')
    if isinstance(bins, bool) or not isinstance(bins, (int, np.integer)) or bins <= 0:
        raise RuntimeError(f"histc: bins must be > 0, got {bins!r}")
    lo, hi = float(min), float(max)
    if lo > hi:
        raise RuntimeError(f"histc: max must be larger than min, got min={min}, max={max}")
    if lo == hi:
        data = _concrete("histc", x, "with min == max the bins span the data's own range; pass min < max to trace")
        if data.size:
            lo, hi = float(data.min()), float(data.max())
        if lo == hi:
            lo, hi = lo - 1, hi + 1
    if not (np.isfinite(lo) and np.isfinite(hi)):
        raise RuntimeError(f"histc: range of [{lo}, {hi}] is not finite")
    flat = _shape.reshape(x, (-1,))
    inside = (flat >= lo) & (flat <= hi)
    pos = where(inside, (flat - lo) * (bins / (hi - lo)), 0.0)
    idx = minimum(astype(pos, "int64"), bins - 1)  # x == max falls in the last bin, as torch
    hits = _shape.expand_dims(idx, 1) == Tensor(np.arange(bins, dtype="int64"))
    hits = hits & _shape.expand_dims(inside, 1)
    return _shape.sum(astype(hits, x.dtype), axis=0)


def _search_args(seq, values, out_int32: bool):
    """The sequence and the values in one dtype, by torch's promotion (a Python number is a 0-d value)."""
    if not isinstance(values, (Tensor, bool, int, float, np.number)):
        values = as_tensor(values)
    s, v = promote(as_tensor(seq), values)
    return s, v, "int32" if out_int32 else "int64"


def searchsorted(sorted_sequence, input, *, out_int32: bool = False, right: bool = False,  # noqa: A002
                 side: str | None = None, sorter=None) -> Tensor:
    """For each value, the index where inserting it keeps sorted_sequence sorted (its last axis; the leading
    axes of an N-D sequence pair with the values' leading axes): the first such index, or the last with
    right=True / side="right". `sorter` holds the indices that sort an unsorted sequence (argsort's). Its shape
    is the values', so it traces; no gradient.

    >>> import tracer
    >>> tracer.searchsorted(tracer.tensor([1, 3, 5]), tracer.tensor([3, 6]), right=True).tolist()
    [2, 3]
    """
    if side is not None:
        if side not in ("left", "right"):
            raise RuntimeError(f"searchsorted: side can only be 'left' or 'right' but got {side!r}")
        if right and side == "left":
            raise RuntimeError("searchsorted: side and right can't be set to opposites, got side of left while "
                               "right was True")
        right = side == "right"
    s, v, dtype = _search_args(sorted_sequence, input, out_int32)
    if sorter is not None:
        sorter = as_tensor(sorter)
        if sorter.shape != s.shape or sorter.dtype != "int64":
            raise RuntimeError(f"searchsorted: sorter must be an int64 tensor of sorted_sequence's shape {s.shape}, "
                               f"got {sorter.dtype} {sorter.shape}")
        from .index_ops import take_along_dim
        s = take_along_dim(s, sorter, -1)
    return apply("searchsorted", [s, v], right=bool(right), dtype=dtype)


def bucketize(input, boundaries, *, out_int32: bool = False, right: bool = False) -> Tensor:  # noqa: A002
    """For each element, the index of the bucket of the 1-D ascending boundaries it falls in:
    boundaries[i-1] < x <= boundaries[i], or boundaries[i-1] <= x < boundaries[i] with right=True (torch's
    convention; searchsorted(boundaries, x, right=right)). Traces; no gradient.

    >>> import tracer
    >>> tracer.bucketize(tracer.tensor([1, 5, 9]), tracer.tensor([1, 3, 5, 7, 9])).tolist()
    [0, 2, 4]
    """
    b = as_tensor(boundaries)
    if b.ndim != 1:
        raise RuntimeError(f"bucketize: boundaries tensor must be 1 dimension, but got dim({b.ndim})")
    return searchsorted(b, input, out_int32=out_int32, right=right)


__all__ = ["argwhere", "bincount", "bucketize", "histc", "masked_select", "nonzero", "searchsorted", "unique",
           "unique_consecutive"]

METHODS = {"nonzero": nonzero, "argwhere": argwhere, "masked_select": masked_select, "unique": unique,
           "unique_consecutive": unique_consecutive, "bincount": bincount, "histc": histc}
