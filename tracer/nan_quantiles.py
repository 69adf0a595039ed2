"""torch.nanmedian and torch.nanquantile: the median and quantiles of the entries that are not NaN.

Sorting puts NaN last, so a slice's k non-NaN entries are its first k sorted ones; the positions picked
depend on k, so they are int64 tensors (computed, not known at trace time) fed to gather_elements, and the
gradient flows to the entries picked (and, for a quantile, is shared between the two it interpolates), as
torch's. A slice of NaN only gives NaN. Without dim, nanmedian's gradient is shared evenly by every entry equal
to the median, as torch's.
"""
from __future__ import annotations

import math

from . import shape as _shape
from .math import as_tensor, astype, equal, maximum, stop_gradient, where
from .sort_ops import _INTERPOLATIONS, MedianResult, _concrete_q, _gather, _pick, _prepared, _unscalar, median
from .special_math import ceil, floor
from .special_math import round as _round
from .tensor import Tensor, apply


def _sorted_and_count(x: Tensor, d: int):
    """x sorted along d (NaN last) and the int64 count of its non-NaN entries (keepdim shape)."""
    s = _gather(x, apply("argsort", [x], axis=d), d)
    return s, _shape.sum(astype(equal(x, x), "int64"), axis=d, keepdims=True)


def nanmedian(input, dim: int | None = None, keepdim: bool = False):  # noqa: A002
    """The lower median of the entries that are not NaN (torch.nanmedian): without dim a 0-d tensor, with dim
    (values, indices) along it. A slice of NaN only gives NaN (the index of its first NaN); integer input is as median.

    >>> import tracer
    >>> tracer.nanmedian(tracer.tensor([1.0, float("nan"), 3.0, 2.0])).item()
    2.0
    """
    x = as_tensor(input)
    if not x.dtype.startswith("float"):
        return median(x, dim, keepdim)
    if dim is None:
        if not math.prod(x.shape):
            raise RuntimeError("nanmedian: cannot compute the median of an empty tensor without dim")
        v = stop_gradient(nanmedian(x.reshape(-1), 0).values)
        hit = equal(x, v)  # the gradient is shared by the entries equal to the median, as torch's
        count = maximum(_shape.sum(astype(hit, x.dtype)), 1.0)
        return v + _shape.sum(where(hit, x - stop_gradient(x), 0.0)) / count
    x, d, scalar = _prepared("nanmedian", x, dim)
    if not x.shape[d]:
        raise IndexError(f"nanmedian: dim {dim} of input of shape {x.shape} is empty")
    order = apply("argsort", [x], axis=d)
    k = _shape.sum(astype(equal(x, x), "int64"), axis=d, keepdims=True)
    position = where(k > 0, (k - 1) // 2, 0)
    values, idx = _pick(x, order, d, position, keepdim or scalar)
    return MedianResult(_unscalar(values, scalar), _unscalar(idx, scalar))


def _quantile_at(s: Tensor, k: Tensor, q: float, d: int, interpolation: str) -> Tensor:
    """The q-th quantile of the first k sorted entries of each slice of s (keepdim shape along d)."""
    pos = astype(k - 1, s.dtype) * q  # in the input's dtype, as torch's ranks
    if interpolation == "nearest":
        pos = _round(pos)  # half to even, as torch's
    lo = pos if interpolation in ("nearest", "lower") else floor(pos)
    hi = lo if interpolation in ("nearest", "lower") else ceil(pos)
    if interpolation == "higher":
        lo = hi
    below = _gather(s, astype(maximum(lo, 0.0), "int64"), d)
    if interpolation not in ("linear", "midpoint"):
        out = below
    else:
        frac = pos - lo if interpolation == "linear" else where(hi > lo, 0.5, 0.0)
        above = _gather(s, astype(maximum(hi, 0.0), "int64"), d)
        out = below + (above - below) * astype(frac, s.dtype)  # torch's lerp
    return where(k > 0, out, float("nan"))


def nanquantile(input, q, dim: int | None = None, keepdim: bool = False, *,  # noqa: A002
                interpolation: str = "linear") -> Tensor:
    """The q-th quantiles of the entries that are not NaN along dim (of all entries when None), as
    torch.nanquantile: q a number (dim reduced) or 1-D (a leading dim of len(q)); interpolation 'linear',
    'lower', 'higher', 'midpoint' or 'nearest'. q must be known when tracing.

    >>> import tracer
    >>> tracer.nanquantile(tracer.tensor([1.0, float("nan"), 3.0]), 0.5).item()
    2.0
    """
    x = as_tensor(input)
    if x.dtype not in ("float32", "float64", "float16"):
        raise RuntimeError(f"nanquantile: input must be a float tensor (float or double), got {x.dtype}")
    if interpolation not in _INTERPOLATIONS:
        raise ValueError(f"nanquantile: interpolation must be one of {list(_INTERPOLATIONS)}, got "
                         f"{interpolation!r}")
    qs = _concrete_q(q)
    if dim is None:
        out = nanquantile(x.reshape(-1), qs if qs.ndim else float(qs), 0, False, interpolation=interpolation)
        return out.reshape(qs.shape + (1,) * x.ndim) if keepdim else out
    x, d, scalar = _prepared("nanquantile", x, dim)
    if not x.shape[d]:
        raise IndexError(f"nanquantile: dim {dim} of input of shape {x.shape} is empty")
    s, k = _sorted_and_count(x, d)
    pieces = [_quantile_at(s, k, float(qv), d, interpolation) for qv in qs.reshape(-1)]
    if qs.ndim:  # q's dim in front
        out = _shape.stack(pieces, axis=0) if pieces else _shape.zeros((0,) + k.shape, dtype=x.dtype)
        return _shape.squeeze(out, d + 1) if scalar or not keepdim else out
    out = pieces[0]
    return out.reshape(()) if scalar else (out if keepdim else _shape.squeeze(out, d))


__all__ = ["nanmedian", "nanquantile"]
METHODS = {name: globals()[name] for name in __all__}
