"""PyTorch's conversion methods (detach, to, clone, float, tolist, numel, mT, ...) and torch's names for
tracegrad's functions (add, sub, mul, div, eq, t, mm, any, all, new_zeros, ...), installed as Tensor methods."""
from __future__ import annotations

import math

import numpy as np

import ir

from . import math as _m
from . import shape as _shape
from .device import CPU, device, device_of, is_device, move, parse
from .grad_mode import is_grad_enabled
from .math import as_tensor, astype, greater, not_equal, stop_gradient
from .placement import place, tensor_device
from .special_math import div, square
from .tensor import Tensor, active_trace, apply, array_module_of, dtype_name, to_expr

_device = device  # `to` and `cuda` take an argument named device, as torch's
_MISSING_DTYPES = ("bfloat16", "complex", "float8", "uint16", "uint32", "uint64", "qint", "quint")  # torch's, not ours

# ---------------------------------------------------------------- conversion methods


def detach(self) -> Tensor:
    """The same values, cut from the gradient: eagerly a tensor that does not require grad sharing self's buffer
    (as torch's), inside a trace a `grad.stop_gradient`."""
    if self._var is None and active_trace() is None:
        return Tensor.wrap(self._data)
    return stop_gradient(self)


def _dtype_of(value) -> str | None:
    """The dtype name `value` stands for ("float32", np.float32, np.dtype("f4")), or None."""
    try:
        name = dtype_name(np.dtype(value))
    except (TypeError, ValueError):
        return None
    return name if name in ir.DTYPES and (not isinstance(value, str) or value == name) else None


def to(self, *args, dtype=None, device=None, copy: bool = False, non_blocking: bool = False) -> Tensor:
    """Convert: `to(dtype)`, `to("cpu" | "cuda" | "cuda:1" | tracer.device)`, `to(device, dtype)`,
    `to(other_tensor)` (its dtype and device). A tensor already there is returned as it is (copy=True copies).
    non_blocking is accepted as torch's and ignored: a copy here is finished when `to` returns.

    Inside a trace the device is the executor's business: only the dtype changes.

    >>> import tracer
    >>> tracer.ones((2,)).to("float64").dtype, tracer.ones((2,)).to("cpu").dtype
    ('float64', 'float32')
    """
    for a in args:
        if isinstance(a, Tensor):
            dtype = dtype or a.dtype
            device = device or (None if a._data is None else device_of(a._data))
        elif _dtype_of(a) is not None:
            dtype = _dtype_of(a)
        elif isinstance(a, str) and a.replace("torch.", "").startswith(_MISSING_DTYPES):
            raise TypeError(f"to: tracegrad has no {a} dtype; it supports {', '.join(ir.DTYPES)}")
        elif is_device(a):
            device = a
        else:
            raise TypeError(f"to: expected a dtype, a device ('cpu', 'cuda') or a tensor, got {a!r}")
    if dtype is not None and _dtype_of(dtype) is None:
        raise TypeError(f"to: unsupported dtype {dtype!r}; tracegrad supports {', '.join(ir.DTYPES)}")
    y = self if dtype is None else astype(self, _dtype_of(dtype))
    if device is not None:
        y = _to_device(y, parse(device, "to"))
    if copy and y is self and self._var is None:
        y = clone(self)
    return y


def _to_device(x: Tensor, dev: device) -> Tensor:
    if x._var is not None or active_trace() is not None:
        return x
    data = move(x._data, dev)  # an ImportError for "cuda" says CuPy is missing
    if data is not x._data and x._ag is not None and is_grad_enabled():
        raise NotImplementedError(f"moving a tensor that requires grad to {dev} is not recorded for backward(); move "
                                  "the model and the leaves first (model.to(device), tensor(..., device=...)), or "
                                  "detach() it")
    return x if data is x._data else Tensor.wrap(data)


def _device_property(self) -> device:
    """Where the values live: `device(type='cpu')` or `device(type='cuda', index=0)` (prints "cpu", "cuda:0"
    and equals those strings). A traced value reads as the CPU: inside a trace the executor places values."""
    return CPU if self._data is None else device_of(self._data)


def _is_cuda(self) -> bool:
    """True when the values live on a GPU (torch's x.is_cuda)."""
    return self._data is not None and array_module_of(self._data) is not np


def cpu(self) -> Tensor:
    """The tensor on the CPU: `self` when it is there already, else a copy (torch's x.cpu()); `.numpy()`
    then shares its memory.

    >>> import tracer
    >>> x = tracer.ones((2,))
    >>> x.cpu() is x, x.cpu().numpy().tolist()
    (True, [1.0, 1.0])
    """
    return _to_device(self, CPU)


def cuda(self, device=None) -> Tensor:
    """The tensor on a GPU (`device`: an index, "cuda:1" or a device; the current GPU by default), copied
    there with CuPy; `self` when it is there already."""
    dev = _device("cuda", device) if isinstance(device, int) else parse(device or "cuda", "cuda")
    if dev.type != "cuda":
        raise ValueError(f"cuda: expected a CUDA device, got {dev}")
    return _to_device(self, dev)


def clone(self) -> Tensor:
    """A copy: writes to it (`y[0] = 1`, `y += 1`) leave `self` alone. Inside a trace values are never
    shared, so it is a new Tensor holding the same value, with no op."""
    ctx = active_trace()
    if ctx is None and self._ag is not None and is_grad_enabled():  # recorded: the copy's gradient flows to self
        return apply("astype", [self], dtype=self.dtype)
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
    """`self` when its memory is its own, packed and writable; else a packed, writable copy (a broadcast view, as
    `expand(...).contiguous()`, copies, so an in-place op on the result works as torch's). Inside a trace, self."""
    d = self._data
    if d is None or active_trace() is not None or (d.flags.writeable and d.flags.c_contiguous):
        return self
    return apply("astype", [self], dtype=self.dtype)  # a copy, recorded for backward() like any op


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


def add(x, other, *, alpha=1) -> Tensor:
    """x + alpha * other (torch's add)."""
    return _m.add(x, other if alpha == 1 else _m.multiply(other, alpha))


def sub(x, other, *, alpha=1) -> Tensor:
    """x - alpha * other (torch's sub)."""
    return _m.subtract(x, other if alpha == 1 else _m.multiply(other, alpha))


def _any(x, axis=None, keepdims: bool = False) -> Tensor:
    """True where any element along `axis` (all axes by default) is nonzero."""
    # a count, not a max: over an empty axis it is 0, so any() is False there, as torch (a max has no value)
    hits = astype(not_equal(as_tensor(x), 0), "int64")
    return greater(_shape.sum(hits, axis=axis, keepdims=keepdims), 0)


def _all(x, axis=None, keepdims: bool = False) -> Tensor:
    """True where every element along `axis` (all axes by default) is nonzero."""
    misses = astype(_m.equal(as_tensor(x), 0), "int64")  # none missing over an empty axis: True, as torch
    return _m.equal(_shape.sum(misses, axis=axis, keepdims=keepdims), 0)


def _torch_extremum(reduce, name: str):
    def fn(x, axis=None, keepdims: bool = False) -> Tensor:
        x = as_tensor(x)
        y = reduce(x, axis=axis, keepdims=keepdims)
        if not x.dtype.startswith("float"):
            return y
        # torch's amax / amin differ from its max / min only at a NaN: no element equals the NaN result, so
        # the gradient of that slice is g * 0 / 0 = NaN (max / min, and tracegrad's, route it to the NaNs).
        # The same values: a spread that is NaN on a NaN slice (whose value is NaN anyway) and is selected
        # nowhere else, so elsewhere it passes a zero gradient (g * 0, the where's 0 times a 0 factor).
        nan_slice = not_equal(y, y)
        factor = _m.where(nan_slice, stop_gradient(y), 0.0)
        spread = _m.multiply(_shape.sum(x, axis=axis, keepdims=keepdims), factor)
        return _m.where(nan_slice, _m.add(y, spread), y)
    fn.__name__ = name
    fn.__doc__ = (f"torch.{name}: the {'maximum' if name == 'amax' else 'minimum'} over `axis`; its gradient splits "
                  "evenly among ties and is NaN over a slice that holds a NaN, as torch's.")
    return fn


_amax, _amin = _torch_extremum(_shape.max, "amax"), _torch_extremum(_shape.min, "amin")


def type_as(self, other) -> Tensor:
    """`self` in other's dtype."""
    return astype(self, as_tensor(other).dtype)


def new_zeros(self, *size, dtype: str | None = None) -> Tensor:
    """Zeros of the given size (varargs or a tuple) in self's dtype (or `dtype`), on self's device."""
    return place(_shape.zeros(*size, dtype=dtype or self.dtype), tensor_device(self), "new_zeros")


def new_ones(self, *size, dtype: str | None = None) -> Tensor:
    """Ones of the given size (varargs or a tuple) in self's dtype (or `dtype`), on self's device."""
    return place(_shape.ones(*size, dtype=dtype or self.dtype), tensor_device(self), "new_ones")


def new_full(self, size, fill_value, *, dtype: str | None = None) -> Tensor:
    """`fill_value` in the given size, in self's dtype (or `dtype`), on self's device."""
    return place(_shape.full(size, fill_value, dtype or self.dtype), tensor_device(self), "new_full")


def new_tensor(self, data, *, dtype: str | None = None) -> Tensor:
    """A new tensor of `data`, in self's dtype (or `dtype`), on self's device."""
    return place(Tensor(data, dtype or self.dtype), tensor_device(self), "new_tensor")


_ALIASES = {
    "add": add, "sub": sub, "subtract": sub, "mul": _m.multiply, "multiply": _m.multiply,
    "div": div, "divide": div, "true_divide": _m.divide, "neg": _m.negative, "negative": _m.negative,
    "eq": _m.equal, "ne": _m.not_equal, "lt": _m.less, "le": _m.less_equal, "gt": _m.greater, "ge": _m.greater_equal,
    "square": square, "t": _t, "mm": _mm("mm", 2), "bmm": _mm("bmm", 3), "any": _any,
    "all": _all, "type_as": type_as, "new_zeros": new_zeros, "new_ones": new_ones, "new_full": new_full,
    "new_tensor": new_tensor, "amax": _amax, "amin": _amin,
}


OPERATORS = {"mT": property(_mT), "device": property(_device_property), "is_cuda": property(_is_cuda)}
METHODS = {
    "detach": detach, "clone": clone, "to": to, "cpu": cpu, "cuda": cuda, "tolist": tolist, "numel": numel, "dim": dim,
    "contiguous": contiguous,
    **{f.__name__: f for f in map(_caster, ("float32", "float64", "float16", "int64", "int32", "bool"))},
    **_ALIASES,
}
