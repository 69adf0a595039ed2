"""torch's gathers, scatters and index ops (gather, scatter, scatter_add, scatter_reduce, index_select, index_add,
index_copy, index_fill, masked_scatter, take_along_dim) and its flips (flip, fliplr, flipud, roll, rot90), with
torch's argument names and defaults.

gather and the scatters are Relax's gather_elements / scatter_elements (ir/ops/index.py); the rest are built on
take, index_update, grad.take_backward, strided_slice and concat, whose VJP rules give the gradients.

Those IR ops keep Relax's meaning (a negative index counts from the end), so that IR text read from TVM computes
as there; torch's gather, scatters, index_select, index_add and index_copy refuse negative indices instead. The
check is made here, as a check_index op before the gather or scatter (one pass over the index), rather than as
an attribute of the IR ops that TVM would not read: a compiled step raises the eager error, of torch's types
(IndexRangeError is an IndexError and a RuntimeError).
"""
from __future__ import annotations

import math

import numpy as np

from . import shape as _shape
from .math import as_tensor, astype, where
from .placement import place, tensor_device
from .tensor import Tensor, apply
from .torch_methods import _dim


def _index(fn: str, index, name: str = "index") -> Tensor:
    index = _shape._index_tensor(index)
    if index.dtype not in ("int32", "int64"):
        raise TypeError(f"{fn}: {name} must be an int64 (or int32) tensor, got dtype {index.dtype}")
    return index


def _on(x: Tensor, t: Tensor) -> Tensor:
    """t (made here, on the host) on x's device, as torch makes such helpers where its input lives."""
    return place(t, tensor_device(x), "scatter")


def _in_range(fn: str, index: Tensor, x: Tensor, dim: int) -> Tensor:
    """index, checked (an op: eagerly and in a compiled step alike) to lie in [0, size of x along dim), as torch
    checks; a 0-d x has size 1."""
    n = x.shape[dim % x.ndim] if x.ndim else 1
    return apply("check_index", [index], lower=0, upper=n, what=f"{fn}: index for dimension {dim} of size {n}")


def _value_like(x: Tensor, value) -> Tensor:
    """A tensor `value` in x's dtype; a Python number as a 0-d constant of it."""
    if isinstance(value, Tensor):
        return astype(value, x.dtype) if value.dtype != x.dtype else value
    return Tensor(np.asarray(value, dtype=x.dtype))


# ---------------------------------------------------------------- gather, scatter


def gather(input, dim: int, index, *, sparse_grad: bool = False) -> Tensor:  # noqa: A002 (torch's names)
    """out[i][j] = input[i][index[i][j]] for dim=1 (torch.gather): index has input's number of dimensions and
    is no larger than input outside `dim`.

    >>> import tracer
    >>> tracer.tensor([[1.0, 2.0], [3.0, 4.0]]).gather(1, tracer.tensor([[1, 1], [0, 1]])).tolist()
    [[2.0, 2.0], [3.0, 4.0]]
    """
    x = as_tensor(input)
    d = _dim("gather", dim, max(x.ndim, 1))
    return apply("gather_elements", [x, _in_range("gather", _index("gather", index), x, d)], axis=d)


def _src(fn: str, x: Tensor, index: Tensor, src) -> Tensor:
    """src cut to index's shape (torch reads only that corner of a larger src), in x's dtype; a number fills it."""
    if not isinstance(src, Tensor) and np.ndim(src) == 0:
        return _on(x, _shape.full(index.shape, src, x.dtype)) if index.ndim else _value_like(x, src)
    src = _value_like(x, as_tensor(src))
    if src.ndim != index.ndim or any(s < i for s, i in zip(src.shape, index.shape, strict=True)):
        raise ValueError(f"{fn}: src of shape {src.shape} must have index's {index.ndim} dimensions and be at least "
                         f"as large as index (shape {index.shape})")
    if src.shape != index.shape:
        src = src[tuple(slice(0, n) for n in index.shape)]
    return src


_REDUCE = {"sum": "add", "prod": "mul", "amax": "max", "amin": "min"}
_IDENTITY = {"sum": 0, "prod": 1, "mean": 0}


def scatter(input, dim: int, index, src=None, *, value=None, reduce: str | None = None) -> Tensor:  # noqa: A002
    """input with src (a tensor, or a number: `value`) written at index along dim: out[i][index[i][j]] = src[i][j]
    for dim=1 (torch.scatter; where index repeats, one of the writes wins). reduce="add" / "multiply" combine
    instead, as torch's deprecated form.

    >>> import tracer
    >>> tracer.zeros(3).scatter(0, tracer.tensor([2, 0]), tracer.tensor([5.0, 7.0])).tolist()
    [7.0, 0.0, 5.0]
    """
    x = as_tensor(input)
    if (src is None) == (value is None):
        raise TypeError("scatter: pass exactly one of src (a tensor or a number) and value")
    index = _in_range("scatter", _index("scatter", index), x, _dim("scatter", dim, max(x.ndim, 1)))
    updates = _src("scatter", x, index, value if src is None else src)
    reduction = {None: "update", "add": "add", "multiply": "mul"}.get(reduce)
    if reduction is None:
        raise ValueError(f"scatter: reduce must be None, 'add' or 'multiply', got {reduce!r}")
    return apply("scatter_elements", [x, index, updates], axis=dim, reduction=reduction)


def scatter_add(input, dim: int, index, src) -> Tensor:  # noqa: A002
    """input with src added at index along dim; repeated indices accumulate (torch.scatter_add)."""
    x = as_tensor(input)
    index = _in_range("scatter_add", _index("scatter_add", index), x, _dim("scatter_add", dim, max(x.ndim, 1)))
    return apply("scatter_elements", [x, index, _src("scatter_add", x, index, src)], axis=dim, reduction="add")


def scatter_reduce(input, dim: int, index, src, reduce: str, *, include_self: bool = True) -> Tensor:  # noqa: A002
    """input with src combined at index along dim by `reduce` ("sum", "prod", "mean", "amax", "amin"); with
    include_self=False the entries of input that are scattered to take no part (torch.scatter_reduce). "mean"
    divides by the number of values combined (floor division for integers, as torch).

    >>> import tracer
    >>> x = tracer.tensor([1.0, 2.0, 3.0])
    >>> x.scatter_reduce(0, tracer.tensor([0, 0, 2]), tracer.tensor([4.0, 6.0, 8.0]), "mean").tolist()
    [3.6666667461395264, 2.0, 5.5]
    """
    x = as_tensor(input)
    if reduce not in ("sum", "prod", "mean", "amax", "amin"):
        raise ValueError(f"scatter_reduce: reduce must be one of 'sum', 'prod', 'mean', 'amax', 'amin', got "
                         f"{reduce!r}")
    index = _in_range("scatter_reduce", _index("scatter_reduce", index), x,
                      _dim("scatter_reduce", dim, max(x.ndim, 1)))
    src = _src("scatter_reduce", x, index, src)
    base = x
    if not include_self:  # the scattered-to entries start from the reduction's identity
        fill = _IDENTITY.get(reduce)
        if fill is None:  # amax / amin: the lowest / highest value of the dtype
            low = reduce == "amax"
            info = np.iinfo(x.dtype) if x.dtype != "bool" and not x.dtype.startswith("float") else None
            fill = (-np.inf if low else np.inf) if info is None else (info.min if low else info.max)
        base = apply("scatter_elements", [x, index, _on(x, _shape.full(index.shape, fill, x.dtype))], axis=dim,
                     reduction="update")
    if reduce != "mean":
        return apply("scatter_elements", [base, index, src], axis=dim, reduction=_REDUCE[reduce])
    total = apply("scatter_elements", [base, index, src], axis=dim, reduction="add")
    ones = _on(x, _shape.ones(index.shape, dtype=x.dtype))
    start = _shape.ones_like(x)
    if not include_self:
        start = apply("scatter_elements", [start, index, _on(x, _shape.zeros(index.shape, dtype=x.dtype))], axis=dim,
                      reduction="update")
    count = apply("scatter_elements", [start, index, ones], axis=dim, reduction="add")
    count = where(count == 0, _value_like(x, 1), count)  # include_self=False, never scattered: input kept
    return total // count if not x.dtype.startswith("float") else total / count


# ---------------------------------------------------------------- index_*


def _one_d(fn: str, index) -> Tensor:
    index = _index(fn, index)
    if index.ndim > 1:
        raise IndexError(f"{fn}: index must be 0-d or 1-D, got shape {index.shape}")
    return index


def index_select(input, dim: int, index) -> Tensor:  # noqa: A002
    """The entries of input at the 1-D index along dim (torch.index_select; take's gradient).

    >>> import tracer
    >>> tracer.tensor([[1, 2], [3, 4], [5, 6]]).index_select(0, tracer.tensor([2, 0])).tolist()
    [[5, 6], [1, 2]]
    """
    x = as_tensor(input)
    d = _dim("index_select", dim, max(x.ndim, 1))
    return _shape.take(x, _in_range("index_select", _one_d("index_select", index).reshape(-1), x, d), axis=d)


def _source(fn: str, x: Tensor, dim: int, index: Tensor, source) -> Tensor:
    source = _value_like(x, as_tensor(source))
    want = x.shape[:dim] + (index.shape[0],) + x.shape[dim + 1:]
    if source.shape != want and not (x.ndim == 0 and math.prod(source.shape) == 1):
        raise ValueError(f"{fn}: source of shape {source.shape} must have shape {want} (input of shape {x.shape}, "
                         f"{index.shape[0]} indices along dim {dim})")
    return source.reshape(want)


def _index_args(fn: str, input, dim, index, negative_ok: bool = False):
    """(input as at least 1-D, dim, the 1-D index, input's shape); the index is checked to lie in range (torch's
    index_fill alone reads a negative index from the end)."""
    x = as_tensor(input)
    d = _dim(fn, dim, max(x.ndim, 1))
    index = _one_d(fn, index).reshape(-1)
    if not negative_ok:
        index = _in_range(fn, index, x, d)
    return (x.reshape(1) if x.ndim == 0 else x), d, index, x.shape


def index_add(input, dim: int, index, source, *, alpha=1) -> Tensor:  # noqa: A002
    """input with alpha * source added at the 1-D index along dim; repeated indices accumulate (torch.index_add).

    >>> import tracer
    >>> tracer.zeros(3).index_add(0, tracer.tensor([0, 0, 2]), tracer.tensor([1.0, 2.0, 3.0])).tolist()
    [3.0, 0.0, 3.0]
    """
    x, d, index, shape = _index_args("index_add", input, dim, index)
    src = _source("index_add", x, d, index, source)
    src = src if alpha == 1 else src * _value_like(x, alpha)
    added = apply("grad.take_backward", [src, index], shape=x.shape, axis=d)
    return (x + added).reshape(shape)


def index_copy(input, dim: int, index, source) -> Tensor:  # noqa: A002
    """input with the slices at the 1-D index along dim replaced by source's (torch.index_copy)."""
    x, d, index, shape = _index_args("index_copy", input, dim, index)
    src = _source("index_copy", x, d, index, source)
    return apply("index_update", [x, index, src], axis=d).reshape(shape)


def index_fill(input, dim: int, index, value) -> Tensor:  # noqa: A002
    """input with the slices at the 1-D index along dim set to `value` (a number or a 0-d tensor)."""
    x, d, index, shape = _index_args("index_fill", input, dim, index, negative_ok=True)
    value = _value_like(x, value)
    if value.ndim:
        raise ValueError(f"index_fill: value must be a number or a 0-d tensor, got shape {value.shape}")
    want = x.shape[:d] + (index.shape[0],) + x.shape[d + 1:]
    return apply("index_update", [x, index, _shape.broadcast_to(_on(x, value), want)], axis=d).reshape(shape)


def masked_scatter(input, mask, source) -> Tensor:  # noqa: A002
    """input with the positions where mask (broadcast to input) is True filled, in order, from source's first
    elements (torch.masked_scatter). source needs at least as many elements as mask has True values (IndexError
    otherwise, eagerly and compiled)."""
    x, mask = as_tensor(input), as_tensor(mask)
    if mask.dtype != "bool":
        raise TypeError(f"masked_scatter: mask must be a bool tensor, got dtype {mask.dtype}")
    source = _value_like(x, as_tensor(source))
    mask = _shape.broadcast_to(mask, x.shape)
    # the k-th True position reads source.flat[k]: k is the running count of Trues, less one
    # (-1 where mask is False; check_index raises when a True position has no source element to read)
    flat = mask.reshape(-1)
    pos = where(flat, _shape.cumsum(flat) - 1, -1)
    pos = apply("check_index", [pos], lower=-1, upper=math.prod(source.shape), what="masked_scatter: source element")
    if not math.prod(x.shape):
        return x
    src = source.reshape(-1) if math.prod(source.shape) else _on(x, _shape.zeros(1, dtype=x.dtype))
    picked = apply("take", [src, pos], axis=0, mode="clip").reshape(x.shape)
    return where(mask, picked, x)


def take_along_dim(input, indices, dim: int | None = None) -> Tensor:  # noqa: A002
    """input's entries at indices along dim, the two broadcast against each other outside dim (NumPy's
    take_along_axis); a negative index counts from the end, as torch's. dim=None reads the flattened input at the
    flattened indices, which must then lie in range (torch's gather on them)."""
    x, idx = as_tensor(input), _index("take_along_dim", indices, "indices")
    if dim is None:
        flat = x.reshape(-1)
        return apply("gather_elements", [flat, _in_range("take_along_dim", idx.reshape(-1), flat, 0)], axis=0)
    if x.ndim != idx.ndim:
        raise ValueError(f"take_along_dim: input of shape {x.shape} and indices of shape {idx.shape} must have "
                         "the same number of dimensions")
    d = _dim("take_along_dim", dim, max(x.ndim, 1))
    if x.ndim == 0:
        return apply("gather_elements", [x, idx], axis=0)
    batch = [max(a, b) for a, b in zip(x.shape, idx.shape, strict=True)]
    for k, (a, b) in enumerate(zip(x.shape, idx.shape, strict=True)):
        if k != d and a != b and 1 not in (a, b):
            raise ValueError(f"take_along_dim: input of shape {x.shape} and indices of shape {idx.shape} do not "
                             f"broadcast in dimension {k}")
    x = _shape.broadcast_to(x, tuple(x.shape[k] if k == d else n for k, n in enumerate(batch)))
    idx = _shape.broadcast_to(idx, tuple(idx.shape[k] if k == d else n for k, n in enumerate(batch)))
    return apply("gather_elements", [x, idx], axis=d)


# ---------------------------------------------------------------- flips


def _dims(fn: str, dims, ndim: int) -> list[int]:
    dims = [dims] if isinstance(dims, (int, np.integer)) else list(dims)
    out = [_dim(fn, d, max(ndim, 1)) for d in dims]
    if len(set(out)) != len(out):
        raise RuntimeError(f"{fn}: dim {dims} appears multiple times in the list of dims")
    return out


def flip(input, dims) -> Tensor:  # noqa: A002
    """input reversed along each of dims (torch.flip; a strided_slice with stride -1).

    >>> import tracer
    >>> tracer.tensor([[1, 2], [3, 4]]).flip(1).tolist()
    [[2, 1], [4, 3]]
    """
    x = as_tensor(input)
    dims = _dims("flip", dims, x.ndim)
    if x.ndim == 0 or not dims:
        return x
    key = [slice(None)] * x.ndim
    for d in dims:
        if x.shape[d] > 1:  # reversing an empty or one-long dim changes nothing
            key[d] = slice(None, None, -1)
    return x[tuple(key)] if any(k != slice(None) for k in key) else x


def _flip_method(self, *dims) -> Tensor:
    return flip(self, dims[0] if len(dims) == 1 else dims)


def fliplr(input) -> Tensor:  # noqa: A002
    """input reversed along dim 1 (needs at least 2 dimensions)."""
    x = as_tensor(input)
    if x.ndim < 2:
        raise RuntimeError(f"fliplr: input must be >= 2-d, got shape {x.shape}")
    return flip(x, 1)


def flipud(input) -> Tensor:  # noqa: A002
    """input reversed along dim 0 (needs at least 1 dimension)."""
    x = as_tensor(input)
    if x.ndim < 1:
        raise RuntimeError("flipud: input must be >= 1-d, got a 0-d tensor")
    return flip(x, 0)


def roll(input, shifts, dims=None) -> Tensor:  # noqa: A002
    """input shifted circularly by shifts along dims (ints or tuples of one length); dims=None rolls the
    flattened tensor and restores the shape (torch.roll).

    >>> import tracer
    >>> tracer.tensor([1, 2, 3, 4]).roll(1).tolist()
    [4, 1, 2, 3]
    """
    x = as_tensor(input)
    if dims is None:
        if not isinstance(shifts, (int, np.integer)) and len(shifts) != 1:
            raise RuntimeError(f"roll: shifts {shifts} must be one int when dims is None")
        shift = shifts if isinstance(shifts, (int, np.integer)) else shifts[0]
        return roll(x.reshape(-1), shift, 0).reshape(x.shape)
    shifts = [shifts] if isinstance(shifts, (int, np.integer)) else list(shifts)
    dims = [dims] if isinstance(dims, (int, np.integer)) else list(dims)
    if len(shifts) != len(dims):
        raise RuntimeError(f"roll: shifts {shifts} and dims {dims} must have the same length")
    y = x
    for s, d in zip(shifts, dims, strict=True):
        d = _dim("roll", d, max(x.ndim, 1))
        n = y.shape[d] if y.ndim else 1
        s = int(s) % n if n else 0
        if s and y.ndim:
            lead = (slice(None),) * d
            y = _shape.concat([y[lead + (slice(n - s, None),)], y[lead + (slice(0, n - s),)]], axis=d)
    return y


def rot90(input, k: int = 1, dims=(0, 1)) -> Tensor:  # noqa: A002
    """input rotated by 90 degrees k times in the plane of dims, from dims[0] towards dims[1] (torch.rot90)."""
    x = as_tensor(input)
    if len(dims) != 2:
        raise RuntimeError(f"rot90: expected total rotation dims == 2, got {len(dims)}")
    if x.ndim < 2:
        raise RuntimeError(f"rot90: expected total dims >= 2, got shape {x.shape}")
    a, b = _dim("rot90", dims[0], x.ndim), _dim("rot90", dims[1], x.ndim)
    if a == b:
        raise RuntimeError(f"rot90: rotation dims must differ, got {dims}")
    k %= 4
    if k == 1:
        return _shape.transpose(flip(x, b), a, b)
    if k == 2:
        return flip(x, [a, b])
    if k == 3:
        return _shape.transpose(flip(x, a), a, b)
    return x


__all__ = ["flip", "fliplr", "flipud", "gather", "index_add", "index_copy", "index_fill", "index_select",
           "masked_scatter", "roll", "rot90", "scatter", "scatter_add", "scatter_reduce", "take_along_dim"]

METHODS = {name: globals()[name] for name in __all__}
METHODS["flip"] = _flip_method
