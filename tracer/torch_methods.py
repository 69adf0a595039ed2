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

import ir

from . import math as _m
from . import numpy_interop
from . import shape as _shape
from .math import abs as _abs
from .math import (
    as_tensor,
    astype,
    greater,
    less,
    maximum,
    minimum,
    negative,
    not_equal,
    stop_gradient,
    subtract,
    where,
)
from .setitem import setitem
from .tensor import Tensor, active_trace, apply, array_module_of, dtype_name, to_expr

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

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if kwargs:
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
    step = max(-(-n // int(chunks)), 1)
    return apply("split", [x], indices_or_sections=list(range(step, n, step)), axis=d)


# ---------------------------------------------------------------- value methods


def clamp(x, min=None, max=None) -> Tensor:  # noqa: A002 (torch's names)
    """Values limited to [min, max] (either may be None, or a tensor); the gradient is 1 inside the range,
    bounds included, as torch's. NaN stays NaN.

    >>> import tracer
    >>> tracer.tensor([-2.0, 0.5, 3.0]).clamp(0, 1).numpy().tolist()
    [0.0, 0.5, 1.0]
    """
    if min is None and max is None:
        raise TypeError("clamp: at least one of min and max must not be None")
    y = as_tensor(x)
    if min is not None:
        y = where(less(y, min), min, y)
    if max is not None:
        y = where(greater(y, max), max, y)
    return y


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
    elif x.dtype in ("int32", "int64"):
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
    # the shift is clipped to finite values, so an all -inf slice gives exp(-inf) = 0 and log(0) = -inf, and
    # an inf gives inf, as torch
    info = np.finfo(x.dtype)
    m = stop_gradient(minimum(maximum(_shape.max(x, axis=axis, keepdims=True), float(info.min)), float(info.max)))
    s = _shape.sum((x - m).exp(), axis=axis, keepdims=True).log() + m
    if keepdims:
        return s
    return _shape.reshape(s, ()) if axis is None else _shape.squeeze(s, axis)


def std(x, axis=None, keepdims: bool = False, *, correction: int = 0, unbiased: bool | None = None) -> Tensor:
    """Standard deviation: sqrt(var). Like tracer.var, the default is the population value (correction=0);
    torch's default is correction=1 (unbiased=True): pass it to get torch's number.

    >>> import tracer
    >>> x = tracer.tensor([1.0, 2.0, 3.0, 4.0])
    >>> round(x.std().item(), 4), round(x.std(correction=1).item(), 4)
    (1.118, 1.291)
    """
    return _shape.var(x, axis=axis, keepdims=keepdims, correction=correction, unbiased=unbiased).sqrt()


def norm(x, p=2, axis=None, keepdims: bool = False) -> Tensor:
    """The p-norm over `axis` (all elements by default): p = 2 / "fro", 1, inf, -inf, 0 or any other number."""
    x = as_tensor(x)
    kw = dict(axis=axis, keepdims=keepdims)
    if p in (2, "fro"):
        return _shape.sum(x * x, **kw).sqrt()
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
    return _shape.sum(_abs(x) ** p, **kw) ** (1.0 / p)


def cumsum(x, axis: int) -> Tensor:
    """Running sum along `axis` (torch's cumsum(dim))."""
    from . import cumsum as _cumsum  # tracer.cumsum, the op's own entry point

    return _cumsum(x, axis)


# ---------------------------------------------------------------- conversion methods


def detach(self) -> Tensor:
    """The same values, cut from the gradient (a `grad.stop_gradient` inside a trace)."""
    return stop_gradient(self)


def _dtype_of(value) -> str | None:
    """The dtype name `value` stands for ("float32", np.float32, np.dtype("f4")), or None."""
    try:
        name = dtype_name(np.dtype(value))
    except (TypeError, ValueError):
        return None
    return name if name in ir.DTYPES and (not isinstance(value, str) or value == name) else None


def to(self, *args, dtype=None, device=None, copy: bool = False) -> Tensor:
    """Convert: `to(dtype)`, `to("cpu" | "cuda")`, `to(device, dtype)`, `to(other_tensor)`.

    Inside a trace the device is the executor's business: only the dtype changes.

    >>> import tracer
    >>> tracer.ones((2,)).to("float64").dtype, tracer.ones((2,)).to("cpu").dtype
    ('float64', 'float32')
    """
    for a in args:
        if isinstance(a, Tensor):
            dtype = dtype or a.dtype
        elif _dtype_of(a) is not None:
            dtype = _dtype_of(a)
        elif isinstance(a, str):
            device = a
        else:
            raise TypeError(f"to: expected a dtype, a device ('cpu', 'cuda') or a tensor, got {a!r}")
    if dtype is not None and _dtype_of(dtype) is None:
        raise TypeError(f"to: unsupported dtype {dtype!r}; tracegrad supports {', '.join(ir.DTYPES)}")
    y = self if dtype is None else astype(self, _dtype_of(dtype))
    if device is not None:
        y = _to_device(y, str(device))
    if copy and y is self and self._var is None:
        y = Tensor.wrap(self._data.copy())
    return y


def _to_device(x: Tensor, device: str) -> Tensor:
    kind = device.split(":")[0]
    if kind not in ("cpu", "cuda"):
        raise ValueError(f"to: unknown device {device!r}; use 'cpu' or 'cuda'")
    if x._var is not None or active_trace() is not None:
        return x
    on_gpu = array_module_of(x._data) is not np
    if kind == "cpu" and on_gpu:
        return Tensor.wrap(x._data.get())
    if kind == "cuda" and not on_gpu:
        import cupy  # tracegrad's GPU arrays; an ImportError here says CuPy is missing

        return Tensor.wrap(cupy.asarray(x._data))
    return x


def clone(self) -> Tensor:
    """A copy: writes to it (`y[0] = 1`, `y += 1`) leave `self` alone. Inside a trace values are never
    shared, so it is a new Tensor holding the same value, with no op."""
    ctx = active_trace()
    if self._var is None and (ctx is None or self._in_trace is not None and self._in_trace() is ctx):
        copy = self._data.copy()
        return Tensor.wrap(copy) if ctx is None else Tensor(copy)  # in a trace, a constant of the copy
    if ctx is None:
        self._concrete("clone()")  # a traced value that escaped its trace: the usual error
    expr = to_expr(self, ctx)
    if isinstance(expr, ir.Var):
        return Tensor(_var=expr, _trace=ctx)
    return apply("broadcast_to", [self], shape=self.shape)


def _caster(dtype):
    def fn(self) -> Tensor:
        return astype(self, dtype)
    fn.__name__ = {"float32": "float", "float64": "double", "float16": "half", "int64": "long", "int32": "int",
                   "bool": "bool"}[dtype]
    fn.__doc__ = f"`self` as {dtype} (torch's .{fn.__name__}())."
    return fn


def tolist(self):
    """The values as nested Python lists (a Python number for a 0-d tensor)."""
    return self.numpy().tolist()


def numel(self) -> int:
    """The number of elements."""
    return math.prod(self.shape)


def dim(self) -> int:
    """The number of dimensions (torch's x.dim(), the same as x.ndim)."""
    return self.ndim


def _mT(self) -> Tensor:
    if self.ndim < 2:
        raise ValueError(f"mT: needs a tensor of at least 2 dimensions, got shape {self.shape}")
    return _shape.transpose(self, -2, -1)


def contiguous(self) -> Tensor:
    """`self`: tracegrad's tensors have no strides to make contiguous."""
    return self


# ---------------------------------------------------------------- torch's names for tracegrad's functions


def _t(self) -> Tensor:
    """The transpose of a tensor of at most 2 dimensions (torch's x.t())."""
    if self.ndim > 2:
        raise ValueError(f"t: expects a tensor of at most 2 dimensions, got shape {self.shape}; use transpose "
                         "or permute")
    return _shape.transpose(self, 0, -1) if self.ndim == 2 else self


def _mm(fn: str, ndim: int):
    def mm(self, other) -> Tensor:
        other = as_tensor(other)
        if self.ndim != ndim or other.ndim != ndim:
            raise ValueError(f"{fn}: expects two {ndim}-D tensors, got shapes {self.shape} and {other.shape}")
        return _shape.matmul(self, other)
    mm.__name__ = fn
    mm.__doc__ = f"Matrix product of two {ndim}-D tensors (torch's {fn}; matmul broadcasts)."
    return mm


def div(x, other, *, rounding_mode: str | None = None) -> Tensor:
    """x / other; rounding_mode="floor" is floor division (//). "trunc" is not supported."""
    if rounding_mode is None:
        return _m.divide(x, other)
    if rounding_mode == "floor":
        return _m.floor_divide(x, other)
    raise ValueError(f"div: rounding_mode must be None or 'floor', got {rounding_mode!r}")


def add(x, other, *, alpha=1) -> Tensor:
    """x + alpha * other (torch's add)."""
    return _m.add(x, other if alpha == 1 else _m.multiply(other, alpha))


def sub(x, other, *, alpha=1) -> Tensor:
    """x - alpha * other (torch's sub)."""
    return _m.subtract(x, other if alpha == 1 else _m.multiply(other, alpha))


def _any(x, axis=None, keepdims: bool = False) -> Tensor:
    """True where any element along `axis` (all axes by default) is nonzero."""
    hits = astype(not_equal(as_tensor(x), 0), "int32")
    return greater(_shape.max(hits, axis=axis, keepdims=keepdims), 0)


def _all(x, axis=None, keepdims: bool = False) -> Tensor:
    """True where every element along `axis` (all axes by default) is nonzero."""
    hits = astype(not_equal(as_tensor(x), 0), "int32")
    return greater(_shape.min(hits, axis=axis, keepdims=keepdims), 0)


def type_as(self, other) -> Tensor:
    """`self` in other's dtype."""
    return astype(self, as_tensor(other).dtype)


def new_zeros(self, *size, dtype: str | None = None) -> Tensor:
    """Zeros of the given size in self's dtype (or `dtype`)."""
    return _shape.zeros(sizes("new_zeros", size), dtype=dtype or self.dtype)


def new_ones(self, *size, dtype: str | None = None) -> Tensor:
    """Ones of the given size in self's dtype (or `dtype`)."""
    return _shape.ones(sizes("new_ones", size), dtype=dtype or self.dtype)


def new_full(self, size, fill_value, *, dtype: str | None = None) -> Tensor:
    """`fill_value` in the given size, in self's dtype (or `dtype`)."""
    return _shape.full(sizes("new_full", (size,)), fill_value, dtype or self.dtype)


def new_tensor(self, data, *, dtype: str | None = None) -> Tensor:
    """A new tensor of `data`, in self's dtype (or `dtype`)."""
    return Tensor(data, dtype or self.dtype)


_ALIASES = {
    "add": add, "sub": sub, "subtract": sub, "mul": _m.multiply, "multiply": _m.multiply,
    "div": div, "divide": div, "true_divide": _m.divide, "neg": _m.negative, "negative": _m.negative,
    "eq": _m.equal, "ne": _m.not_equal, "lt": _m.less, "le": _m.less_equal, "gt": _m.greater, "ge": _m.greater_equal,
    "square": lambda x: _m.multiply(x, x), "t": _t, "mm": _mm("mm", 2), "bmm": _mm("bmm", 3), "any": _any,
    "all": _all, "type_as": type_as, "new_zeros": new_zeros, "new_ones": new_ones, "new_full": new_full,
    "new_tensor": new_tensor, "amax": _shape.max, "amin": _shape.min,
}
_ALIASES["square"].__name__ = "square"


__all__ = ["argmin", "chunk", "clamp", "flatten", "logsumexp", "masked_fill", "norm", "std", "unflatten",
           "unsqueeze"]

OPERATORS = {"mT": property(_mT), "__setitem__": setitem, **numpy_interop.OPERATORS}
METHODS = {
    "view": view, "flatten": flatten, "unflatten": unflatten, "unsqueeze": unsqueeze, "permute": permute,
    "expand": expand, "repeat": repeat, "chunk": chunk, "clamp": clamp, "clip": clamp, "masked_fill": masked_fill,
    "argmin": argmin, "cumsum": cumsum, "logsumexp": logsumexp, "std": std, "norm": norm,
    "detach": detach, "clone": clone, "to": to, "tolist": tolist, "numel": numel, "dim": dim, "contiguous": contiguous,
    **{f.__name__: f for f in map(_caster, ("float32", "float64", "float16", "int64", "int32", "bool"))},
    **_ALIASES,
}


def adopt_torch_names(cls, namespace: dict, names) -> None:
    """Give every public function in `names` of `namespace`, and every method of `cls`, PyTorch's
    `dim=`/`keepdim=` spellings beside `axis=`/`keepdims=` (see torch_names)."""
    for name in names:
        if inspect.isfunction(namespace.get(name)):
            namespace[name] = torch_names(namespace[name])
    for name, attr in list(vars(cls).items()):
        if inspect.isfunction(attr):
            setattr(cls, name, torch_names(attr))
