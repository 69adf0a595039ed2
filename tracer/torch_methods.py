"""PyTorch's Tensor methods and spellings: view, flatten, permute, clamp, logsumexp, to, tolist, ... and
`dim=`/`keepdim=` beside `axis=`/`keepdims=`.

Each method is built from the primitive ops, so it works eagerly and inside a trace, and the gradient
comes from the primitives' VJP rules.
"""
from __future__ import annotations

import functools
import inspect
import math

import numpy as np

from ir.types import INT_DTYPES

from . import numpy_interop, torch_convert
from . import shape as _shape
from .math import abs as _abs
from .math import (
    as_tensor,
    astype,
    equal,
    maximum,
    minimum,
    negative,
    not_equal,
    stop_gradient,
    subtract,
    where,
)
from .setitem import setitem
from .special_math import clamp
from .tensor import Tensor, apply

# ---------------------------------------------------------------- spellings

_TORCH_NAMES = (("dim", "axis"), ("keepdim", "keepdims"))


def torch_names(fn):
    """`fn` also taking PyTorch's `dim=`/`keepdim=` for its `axis`/`keepdims` parameters.

    Passing both spellings of one argument is a TypeError. Functions without those parameters are
    returned unchanged.

    >>> import tracer
    >>> tracer.sum(tracer.ones((2, 3)), dim=1, keepdim=True).shape
    (2, 1)
    """
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return fn
    pairs = tuple((t, n) for t, n in _TORCH_NAMES if n in params and t not in params)
    if not pairs or getattr(fn, "_torch_names", False):
        return fn

    torch_spelled = frozenset(t for t, _ in pairs)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if kwargs and not torch_spelled.isdisjoint(kwargs):
            for torch_name, np_name in pairs:
                if torch_name in kwargs:
                    if np_name in kwargs:
                        raise TypeError(f"{fn.__name__}: got both {np_name}= and {torch_name}= (two spellings "
                                        "of one argument); pass one")
                    kwargs[np_name] = kwargs.pop(torch_name)
        return fn(*args, **kwargs)
    wrapper._torch_names = True
    return wrapper


def sizes(fn: str, args) -> tuple:
    """A shape given as varargs (`2, 3`) or as one sequence (`(2, 3)`), as PyTorch takes it."""
    if len(args) == 1 and not isinstance(args[0], (int, np.integer)) and hasattr(args[0], "__iter__"):
        args = tuple(args[0])
    for d in args:
        if isinstance(d, bool) or not isinstance(d, (int, np.integer)):
            raise TypeError(f"{fn}: sizes must be ints, got {d!r} in {args}")
    return tuple(int(d) for d in args)


def _dim(fn: str, dim, ndim: int) -> int:
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)):
        raise TypeError(f"{fn}: dim must be an int, got {dim!r}")
    if not -ndim <= dim < ndim:
        raise IndexError(f"{fn}: dim {dim} out of range for a tensor of {ndim} dimension(s)")
    return int(dim) % ndim


# ---------------------------------------------------------------- shape methods


def view(self, *shape) -> Tensor:
    """`self` with another shape of the same size (-1 inferred); tracegrad's reshape, which never copies
    more than NumPy does."""
    if len(shape) == 1 and isinstance(shape[0], str):
        raise TypeError("view(dtype) reinterprets bits and is not supported; use .to(dtype) to convert values")
    return _shape.reshape(self, sizes("view", shape))


def flatten(x, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    """Axes start_dim..end_dim (inclusive) merged into one; a 0-d tensor becomes shape (1,).

    >>> import tracer
    >>> tracer.zeros((2, 3, 4)).flatten(1).shape
    (2, 12)
    """
    x = as_tensor(x)
    if x.ndim == 0:
        return _shape.reshape(x, (1,))
    lo, hi = _dim("flatten", start_dim, x.ndim), _dim("flatten", end_dim, x.ndim)
    if lo > hi:
        raise ValueError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim} (shape {x.shape})")
    return _shape.reshape(x, x.shape[:lo] + (math.prod(x.shape[lo:hi + 1]),) + x.shape[hi + 1:])


def unflatten(x, dim: int, sizes_) -> Tensor:
    """Axis `dim` split into `sizes_` (one entry may be -1)."""
    x = as_tensor(x)
    d = _dim("unflatten", dim, x.ndim)
    inner = sizes("unflatten", (sizes_,))
    n, known = x.shape[d], math.prod(s for s in inner if s != -1)
    fits = (known != 0 and n % known == 0) if -1 in inner else known == n
    if inner.count(-1) > 1 or not fits:
        raise ValueError(f"unflatten: sizes {inner} do not split axis {dim} of size {n} (shape {x.shape})")
    inner = tuple(n // known if s == -1 else s for s in inner)
    return _shape.reshape(x, x.shape[:d] + inner + x.shape[d + 1:])


def unsqueeze(x, dim: int) -> Tensor:
    """A size-1 axis inserted at `dim` (-ndim-1 <= dim <= ndim)."""
    x = as_tensor(x)
    return _shape.expand_dims(x, _dim("unsqueeze", dim, x.ndim + 1))


def permute(self, *dims) -> Tensor:
    """Axes reordered: `x.permute(2, 0, 1)` or `x.permute((2, 0, 1))`."""
    return _shape.permute_dims(self, sizes("permute", dims))


def expand(self, *shape) -> Tensor:
    """`self` broadcast to `shape`; -1 keeps that axis' size, new axes go in front (a view in torch)."""
    shape = sizes("expand", shape)
    lead = len(shape) - self.ndim
    if lead < 0:
        raise ValueError(f"expand: {len(shape)} sizes for a tensor of {self.ndim} dimensions (shape {self.shape})")
    full = tuple(self.shape[i - lead] if d == -1 and i >= lead else d for i, d in enumerate(shape))
    if -1 in full[:lead]:
        raise ValueError(f"expand: -1 is not allowed for a new leading axis, got {shape}")
    return _shape.broadcast_to(self, full)


def repeat(self, *repeats) -> Tensor:
    """`self` tiled `repeats[i]` times along each axis (torch's repeat, NumPy's tile).

    >>> import tracer
    >>> tracer.tensor([1.0, 2.0]).repeat(2, 2).numpy().tolist()
    [[1.0, 2.0, 1.0, 2.0], [1.0, 2.0, 1.0, 2.0]]
    """
    reps = sizes("repeat", repeats)
    if len(reps) < self.ndim:
        raise ValueError(f"repeat: {len(reps)} repeats for a tensor of {self.ndim} dimensions (shape {self.shape})")
    if any(r < 0 for r in reps):
        raise ValueError(f"repeat: repeats must be >= 0, got {reps}")
    shape = (1,) * (len(reps) - self.ndim) + self.shape
    # (1, s0, 1, s1, ...) broadcast to (r0, s0, r1, s1, ...), then merged pairwise: the broadcast's
    # gradient sums the copies back
    y = _shape.reshape(self, tuple(v for s in shape for v in (1, s)))
    y = _shape.broadcast_to(y, tuple(v for r, s in zip(reps, shape, strict=True) for v in (r, s)))
    return _shape.reshape(y, tuple(r * s for r, s in zip(reps, shape, strict=True)))


def chunk(x, chunks: int, dim: int = 0) -> tuple[Tensor, ...]:
    """Pieces of ceil(n / chunks) along `dim` (the last may be smaller, and there may be fewer), as torch."""
    x = as_tensor(x)
    if isinstance(chunks, bool) or not isinstance(chunks, (int, np.integer)) or chunks <= 0:
        raise ValueError(f"chunk: chunks must be a positive int, got {chunks!r}")
    d = _dim("chunk", dim, x.ndim)
    n = x.shape[d]
    if n == 0:  # as torch: `chunks` empty pieces
        return (x,) * int(chunks)
    step = max(-(-n // int(chunks)), 1)
    return apply("split", [x], indices_or_sections=list(range(step, n, step)), axis=d)


# ---------------------------------------------------------------- value methods


def masked_fill(x, mask, value) -> Tensor:
    """`x` with `value` where the boolean `mask` (broadcast to x) is True; x's dtype is kept."""
    x, mask = as_tensor(x), as_tensor(mask)
    if mask.dtype != "bool":
        raise TypeError(f"masked_fill: mask must be a bool tensor, got dtype {mask.dtype}")
    value = astype(as_tensor(value) if isinstance(value, Tensor) else Tensor(np.asarray(value, x.dtype)), x.dtype)
    return where(mask, value, x)


def argmin(x, axis: int | None = None, keepdims: bool = False) -> Tensor:
    """Index (int64) of the first minimum along `axis`, or into the flattened tensor when axis is None."""
    x = as_tensor(x)
    if x.dtype == "bool":
        flipped = not_equal(x, True)
    elif x.dtype in INT_DTYPES:
        flipped = subtract(-1, x)  # ~x: order-reversing without the overflow of -x at the smallest int
    else:
        flipped = negative(x)
    return _shape.argmax(flipped, axis=axis, keepdims=keepdims)


def logsumexp(x, axis=None, keepdims: bool = False) -> Tensor:
    """log(sum(exp(x))) over `axis`, computed stably: the maximum is subtracted first (it carries no
    gradient of its own: the result's gradient is softmax(x) either way). All -inf gives -inf.

    >>> import tracer
    >>> round(tracer.tensor([1000.0, 1000.0]).logsumexp(0).item(), 3)
    1000.693
    >>> tracer.tensor([-float("inf")] * 2).logsumexp(0).item()
    -inf
    """
    x = as_tensor(x)
    if x.ndim == 0 and axis in (0, -1):  # torch: a 0-d tensor's dim 0 / -1 is the tensor itself
        return _shape.reshape(logsumexp(_shape.reshape(x, (1,)), 0, keepdims), ())
    reduced = range(x.ndim) if axis is None else (axis if isinstance(axis, (tuple, list)) else (axis,))
    if any(x.shape[a] == 0 for a in reduced):  # an empty sum is 0, its log -inf (max has no value to shift by)
        return _shape.sum(x.exp(), axis=axis, keepdims=keepdims).log()
    # the shift is clipped to finite values, so an all -inf slice gives exp(-inf) = 0 and log(0) = -inf, and
    # an inf gives inf, as torch
    info = np.finfo(x.dtype)
    m = stop_gradient(minimum(maximum(_shape.max(x, axis=axis, keepdims=True), float(info.min)), float(info.max)))
    s = _shape.sum((x - m).exp(), axis=axis, keepdims=True).log() + m
    if keepdims:
        return s
    return _shape.reshape(s, ()) if axis is None else _shape.squeeze(s, axis)


def std(x, axis=None, keepdims: bool = False, *, correction: int = 0, unbiased: bool | None = None) -> Tensor:
    """Standard deviation: sqrt(var). Like tracer.var, the default is the population value (correction=0,
    NumPy's); torch's default, correction=1, is the default of the method `x.std()` and of nn.torch's torch.std.

    >>> import tracer
    >>> x = tracer.tensor([1.0, 2.0, 3.0, 4.0])
    >>> round(tracer.std(x).item(), 4), round(tracer.std(x, correction=1).item(), 4), round(x.std().item(), 4)
    (1.118, 1.291, 1.291)
    """
    return _root_at_zero_flat(_shape.var(x, axis=axis, keepdims=keepdims, correction=correction, unbiased=unbiased))


def _root_at_zero_flat(s, p=2) -> Tensor:
    """s ** (1 / p) (sqrt for p = 2) of a spread s >= 0, with gradient 0 where s == 0, as torch's norm and std
    backward (a subgradient: the true slope there is infinite, and the 0 coming from the squares upstream
    makes inf * 0 = NaN).

    Composed with `where` rather than a primitive with its own rule: a select passes the gradient of the
    branch it did not take as an exact 0, never 0 * inf, so the root of a stand-in 1 (finite slope) is taken
    where s == 0 and the 0 selected in its place; every other element is the plain root, bit for bit, and
    its derivatives of every order come from sqrt's and power's own rules. (sqrt itself keeps d sqrt(0) = inf,
    as torch's.)"""
    flat = equal(s, 0)
    safe = where(flat, 1.0, s)
    root = safe.sqrt() if p == 2 else safe ** (1.0 / p)
    return where(flat, 0.0, root)


def norm(x, p=2, axis=None, keepdims: bool = False) -> Tensor:
    """The p-norm over `axis` (all elements by default): p = 2 / "fro", 1, inf, -inf, 0 or any other number.
    At a zero vector (or row) the gradient is 0, as torch's; for 0 < p < 1 each zero element's is."""
    x = as_tensor(x)
    kw = dict(axis=axis, keepdims=keepdims)
    if p in (2, "fro"):
        return _root_at_zero_flat(_shape.sum(x * x, **kw))
    if p == 1:
        return _shape.sum(_abs(x), **kw)
    if p == float("inf"):
        return _shape.max(_abs(x), **kw)
    if p == -float("inf"):
        return _shape.min(_abs(x), **kw)
    if p == 0:
        return _shape.sum(astype(not_equal(x, 0), x.dtype), **kw)
    if isinstance(p, str) or not isinstance(p, (int, float)):
        raise ValueError(f"norm: p must be a number or 'fro', got {p!r}")
    if p < 0:  # a zero element makes the norm 0 through an infinite power: no subgradient to choose
        return _shape.sum(_abs(x) ** p, **kw) ** (1.0 / p)
    powers = _abs(x) ** p
    if p < 1:  # d |x| ** p / dx is infinite at x = 0 for p < 1: torch takes 0 there (the same select)
        zero = equal(x, 0)
        powers = where(zero, 0.0, where(zero, 1.0, _abs(x)) ** p)
    return _root_at_zero_flat(_shape.sum(powers, **kw), p)


__all__ = ["argmin", "chunk", "clamp", "flatten", "logsumexp", "masked_fill", "norm", "std", "unflatten",
           "unsqueeze"]

numpy_interop.METHOD_FUNCTIONS.update(std=std, argmin=argmin, clamp=clamp)  # np.std/argmin/clip on Tensors
OPERATORS = {"__setitem__": setitem, **numpy_interop.OPERATORS, **torch_convert.OPERATORS}
METHODS = {
    "view": view, "flatten": flatten, "unflatten": unflatten, "unsqueeze": unsqueeze, "permute": permute,
    "expand": expand, "repeat": repeat, "chunk": chunk, "clamp": clamp, "clip": clamp, "masked_fill": masked_fill,
    "argmin": argmin, "logsumexp": logsumexp, "norm": norm,
    **torch_convert.METHODS,
}


def _torch_tables() -> None:
    """torch's meaning for the shared method names (max, var, split, ...), torch's other methods, and
    Tensor.__getattr__, which names a torch attribute tracegrad lacks (imported here, at the end: they use
    this module's functions)."""
    from . import torch_hints, torch_meaning, torch_tensor

    METHODS.update(torch_meaning.METHODS)
    METHODS.update(torch_tensor.METHODS)
    OPERATORS.update(torch_tensor.PROPERTIES)
    OPERATORS["__getattr__"] = torch_hints.tensor_getattr


_torch_tables()


def adopt_torch_names(cls, namespace: dict, names) -> None:
    """Give every public function in `names` of `namespace`, and every method of `cls`, PyTorch's
    `dim=`/`keepdim=` spellings beside `axis=`/`keepdims=` (see torch_names)."""
    for name in names:
        if inspect.isfunction(namespace.get(name)):
            namespace[name] = torch_names(namespace[name])
    for name, attr in list(vars(cls).items()):
        if inspect.isfunction(attr):
            setattr(cls, name, torch_names(attr))
