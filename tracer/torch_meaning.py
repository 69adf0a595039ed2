"""torch's meaning for the Tensor methods whose names tracegrad's NumPy-spelled functions share: `x.max(dim)` and
`x.min(dim)` give (values, indices), `x.var()` / `x.std()` are unbiased, `x.squeeze(d)` leaves a non-unit axis
alone, `x.split(2)` cuts pieces of size 2, `x.take(i)` reads the flattened tensor, `x.tril(diagonal=1)`, and
`x.sum(dtype=...)`.

The functions `tracer.max(x, axis)`, `tracer.var(x, axis)`, `tracer.split(x, sections)`, `tracer.squeeze`,
`tracer.take(x, i, axis)` keep NumPy's meaning; nn.torch's functions of these names are the ones below
(docs/from-pytorch.md has the table).
"""
from __future__ import annotations

import builtins
import collections

import numpy as np

from . import shape as _shape
from .math import as_tensor, astype, maximum, minimum
from .tensor import Tensor, apply

MaxResult = collections.namedtuple("max", ["values", "indices"])
MinResult = collections.namedtuple("min", ["values", "indices"])


def _dim(fn: str, dim, ndim: int) -> int:
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)):
        if isinstance(dim, (tuple, list)):
            raise TypeError(f"{fn}: dim must be one int (torch's {fn}(dim) returns (values, indices) along one axis), "
                            f"got {dim!r}; for the {fn} over several axes use a{fn}(dim={tuple(dim)})")
        raise TypeError(f"{fn}: dim must be an int, got {dim!r}")
    n = builtins.max(ndim, 1)  # a 0-d tensor takes dim 0 or -1, as torch
    if not -n <= dim < n:
        raise IndexError(f"{fn}: dim {dim} out of range for a tensor of {ndim} dimension(s) (expected to be in "
                         f"range of [{-n}, {n - 1}])")
    return int(dim) % n


def _extremum(name: str, result, elementwise, argext, self, axis, keepdims: bool):
    x = as_tensor(self)
    if isinstance(axis, (Tensor, np.ndarray)):  # torch.max(a, b): elementwise
        return elementwise(x, axis)
    if axis is None:
        if keepdims:
            raise TypeError(f"{name}: keepdim needs a dim ({name}() with no dim reduces every axis)")
        return getattr(_shape, name)(x)
    d = _dim(name, axis, x.ndim)
    flat = x.reshape((1,)) if x.ndim == 0 else x
    if flat.shape[d] == 0:
        raise IndexError(f"{name}(): Expected reduction dim {d} to have non-zero size (shape {x.shape})")
    idx = argext(flat, axis=d, keepdims=True)
    # the values are read at the indices, so the gradient goes to the element picked (torch's rule for
    # max(dim) / min(dim); tracer.max splits it among ties, as torch's max() without a dim)
    values = apply("gather_elements", [flat, idx], axis=d)
    if x.ndim == 0:
        return result(values.reshape(()), idx.reshape(()))
    if not keepdims:
        values, idx = _shape.squeeze(values, d), _shape.squeeze(idx, d)
    return result(values, idx)


def _argmin(x, axis=None, keepdims=False):
    from .torch_methods import argmin  # torch_methods imports this module

    return argmin(x, axis=axis, keepdims=keepdims)


def _argmax(x, axis=None, keepdims=False):
    if x.dtype == "bool":
        x = astype(x, "int32")
    return _shape.argmax(x, axis=axis, keepdims=keepdims)


def max(self, axis=None, keepdims: bool = False):
    """torch's max: with no dim, the maximum of all elements (a tensor); with a dim, a named tuple (values,
    indices) along it (the first maximum's index; keepdim=True keeps the axis); with a tensor, the elementwise
    maximum.

    >>> import tracer
    >>> x = tracer.tensor([[1.0, 5.0], [7.0, 2.0]])
    >>> x.max(dim=1).indices.tolist(), x.max(1).values.tolist(), x.max().item()
    ([1, 0], [5.0, 7.0], 7.0)
    """
    return _extremum("max", MaxResult, maximum, _argmax, self, axis, keepdims)


def min(self, axis=None, keepdims: bool = False):
    """torch's min: the minimum of all elements, (values, indices) along a dim, or the elementwise minimum (as
    max).

    >>> import tracer
    >>> values, indices = tracer.tensor([[1.0, 5.0], [7.0, 2.0]]).min(dim=1)
    >>> values.tolist(), indices.tolist()
    ([1.0, 2.0], [0, 1])
    """
    return _extremum("min", MinResult, minimum, _argmin, self, axis, keepdims)


def _correction(fn: str, axis, unbiased, correction):
    """(axis, correction) from torch's forms: var(), var(dim), var(unbiased), var(dim, unbiased), correction=."""
    if isinstance(axis, bool):  # x.var(False): the old var(unbiased) form
        axis, unbiased = None, axis if unbiased is None else unbiased
    if unbiased is not None and correction is not None:
        raise TypeError(f"{fn}: pass unbiased= or correction=, not both")
    if correction is None:
        correction = 1 if unbiased is None else int(bool(unbiased))
    return axis, correction


def var(self, axis=None, unbiased: bool | None = None, keepdims: bool = False, *, correction=None) -> Tensor:
    """torch's var: the unbiased estimate (divided by n - 1) by default; `correction=0` (or `unbiased=False`) is
    the population variance. Positional arguments read as torch's: `x.var(1, False)` is (dim=1, unbiased=False).

    >>> import tracer
    >>> x = tracer.tensor([1.0, 2.0, 3.0, 4.0])
    >>> round(x.var().item(), 4), x.var(unbiased=False).item(), x.var(correction=0).item()
    (1.6667, 1.25, 1.25)
    """
    axis, correction = _correction("var", axis, unbiased, correction)
    return _shape.var(self, axis=axis, keepdims=keepdims, correction=correction)


def std(self, axis=None, unbiased: bool | None = None, keepdims: bool = False, *, correction=None) -> Tensor:
    """torch's std: sqrt of the unbiased variance by default (see var).

    >>> import tracer
    >>> round(tracer.tensor([1.0, 2.0, 3.0, 4.0]).std().item(), 4)
    1.291
    """
    from .torch_methods import std as _std  # torch_methods imports this module

    axis, correction = _correction("std", axis, unbiased, correction)
    return _std(self, axis=axis, keepdims=keepdims, correction=correction)


def split(self, split_size_or_sections, axis: int = 0) -> tuple[Tensor, ...]:
    """torch's split: an int cuts pieces of that size along `dim` (the last may be smaller); a list gives each
    piece's size, summing to the axis' length.

    >>> import tracer
    >>> [t.shape for t in tracer.zeros(5, 2).split(2)], [t.shape for t in tracer.zeros(5, 2).split([1, 4])]
    ([(2, 2), (2, 2), (1, 2)], [(1, 2), (4, 2)])
    """
    x = as_tensor(self)
    if x.ndim == 0:
        raise RuntimeError("split: a 0-d tensor cannot be split (split expects at least a 1-dimensional tensor)")
    d = _dim("split", axis, x.ndim)
    n = x.shape[d]
    if isinstance(split_size_or_sections, (int, np.integer)) and not isinstance(split_size_or_sections, bool):
        size = int(split_size_or_sections)
        if size <= 0 and n or size < 0:
            raise RuntimeError(f"split: split_size must be a positive integer, got {size} (axis {axis} of size {n})")
        bounds = list(range(size, n, size)) if size else []
    else:
        sizes = list(split_size_or_sections)
        if any(isinstance(s, bool) or not isinstance(s, (int, np.integer)) or s < 0 for s in sizes):
            raise TypeError(f"split: split sizes must be non-negative ints, got {sizes}")
        if builtins.sum(sizes) != n:
            raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {n} (input tensor's size at "
                               f"dimension {d}), but got split_sizes={sizes}")
        bounds = list(np.cumsum(sizes[:-1], dtype=np.int64).tolist()) if sizes else []
    if not bounds:
        return (x,)
    return apply("split", [x], indices_or_sections=bounds, axis=d)


def squeeze(self, axis=None) -> Tensor:
    """torch's squeeze: without a dim, every size-1 axis removed; with a dim (or a tuple of them), those of size 1
    removed and any other left as it is (NumPy and tracer.squeeze raise there).

    >>> import tracer
    >>> tracer.zeros(2, 1).squeeze(0).shape, tracer.zeros(2, 1).squeeze(1).shape
    ((2, 1), (2,))
    """
    x = as_tensor(self)
    if axis is None:
        return _shape.squeeze(x) if 1 in x.shape else x
    dims = axis if isinstance(axis, (tuple, list)) else (axis,)
    picked = sorted({_dim("squeeze", d, x.ndim) for d in dims})
    unit = tuple(d for d in picked if x.ndim and x.shape[d] == 1)
    return _shape.squeeze(x, unit) if unit else x


def take(self, index) -> Tensor:
    """torch's take: elements of the flattened tensor at `index` (the result has index's shape).

    >>> import tracer
    >>> tracer.tensor([[1, 2], [3, 4]]).take(tracer.tensor([0, 3])).tolist()
    [1, 4]
    """
    x = as_tensor(self)
    return _shape.take(_shape.reshape(x, (-1,)), index, axis=0)


def tril(self, diagonal: int = 0) -> Tensor:
    """torch's tril: the lower triangle of the last two axes, from `diagonal` down."""
    return _shape.tril(self, k=diagonal)


def triu(self, diagonal: int = 0) -> Tensor:
    """torch's triu: the upper triangle of the last two axes, from `diagonal` up."""
    return _shape.triu(self, k=diagonal)


def _cast(x, dtype):
    x = as_tensor(x)
    return x if dtype is None else astype(x, str(dtype))


def sum(self, axis=None, keepdims: bool = False, *, dtype=None) -> Tensor:
    """The sum over `dim` (an int, a tuple, or None for all); `dtype=` casts first, as torch's."""
    return _shape.sum(_cast(self, dtype), axis=axis, keepdims=keepdims)


def mean(self, axis=None, keepdims: bool = False, *, dtype=None) -> Tensor:
    """The mean over `dim` (an int, a tuple, or None for all); `dtype=` casts first, as torch's. Integer tensors
    raise, as torch's (pass dtype=)."""
    x = _cast(self, dtype)
    if not x.dtype.startswith("float"):
        raise RuntimeError(f"mean(): could not infer output dtype. Input dtype must be either a floating point or "
                           f"complex dtype. Got: {x.dtype} (pass dtype=\"float32\", or call .float() first)")
    return _shape.mean(x, axis=axis, keepdims=keepdims)


def cumsum(self, axis: int | None = None, *, dtype=None) -> Tensor:
    """Running sums along `dim`, as torch's (`dtype=` casts first; no dim: of the flattened tensor)."""
    return _shape.cumsum(_cast(self, dtype), axis=axis)


__all__: list[str] = []  # Tensor methods only; nn.torch exports them under torch's names
METHODS = {"max": max, "min": min, "var": var, "std": std, "split": split, "squeeze": squeeze, "take": take,
           "tril": tril, "triu": triu, "sum": sum, "mean": mean, "cumsum": cumsum}
