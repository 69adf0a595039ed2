"""torch's remaining Tensor methods: the in-place forms (`index_add_`, `scatter_`, `uniform_`, `normal_`, ...),
the `*_as` forms, and the attributes torch code asks about (`is_floating_point()`, `element_size()`, `stride()`,
`is_contiguous()`, `get_device()`, ...). Installed on Tensor through tracer/torch_methods.py's tables."""
from __future__ import annotations

import numpy as np

from . import create as _create
from . import index_ops as _ix
from . import shape as _shape
from . import torch_extra as _extra
from .inplace import _checked_kind, write
from .math import as_tensor, astype, where
from .tensor import Tensor, active_trace
from .torch_methods import expand, view

_FLOATS = ("float16", "float32", "float64")


def _inplace(fn, name: str):
    def method(self, *args, **kwargs):
        return _checked_kind(self, fn(self, *args, **kwargs), name)
    method.__name__ = name
    method.__doc__ = f"In-place {fn.__name__}: self = self.{name[:-1]}(...), keeping self's object and dtype."
    return method


def _float_only(name: str, self: Tensor) -> None:
    if self.dtype not in _FLOATS:
        raise TypeError(f"{name}: expects a floating tensor, got dtype {self.dtype} (as torch's {name})")


# ---------------------------------------------------------------- random fills


def uniform_(self, a: float = 0.0, b: float = 1.0, *, generator=None) -> Tensor:
    """Fill with uniform values in [a, b), in place (from tracer's generator, or `generator=`)."""
    _float_only("uniform_", self)
    u = _create.rand(self.shape, dtype=self.dtype, generator=generator, device=_device(self))
    return write(self, u * (b - a) + a, "uniform_")


def normal_(self, mean: float = 0.0, std: float = 1.0, *, generator=None) -> Tensor:
    """Fill with normal values of the given mean and standard deviation, in place."""
    _float_only("normal_", self)
    z = _create.randn(self.shape, dtype=self.dtype, generator=generator, device=_device(self))
    return write(self, z * std + mean, "normal_")


def bernoulli_(self, p=0.5, *, generator=None) -> Tensor:
    """Fill with 1 (probability p, a number or a tensor) or 0, in place."""
    u = _create.rand(self.shape, dtype="float64", generator=generator, device=_device(self))
    return write(self, astype(u < (astype(p, "float64") if isinstance(p, Tensor) else p), self.dtype), "bernoulli_")


def random_(self, from_: int = 0, to: int | None = None, *, generator=None) -> Tensor:
    """Fill with integers uniform in [from, to) (`random_(to)` is [0, to)), in place."""
    low, high = (0, from_) if to is None else (from_, to)
    if to is None and from_ == 0:
        high = 2 ** 24 if self.dtype in _FLOATS else int(np.iinfo(self.dtype).max) if self.dtype != "bool" else 2
    r = _create.randint(low, high, self.shape, generator=generator, device=_device(self))
    return write(self, astype(r, self.dtype), "random_")


def exponential_(self, lambd: float = 1.0, *, generator=None) -> Tensor:
    """Fill with exponential values of rate lambd, in place."""
    _float_only("exponential_", self)
    u = _create.rand(self.shape, dtype=self.dtype, generator=generator, device=_device(self))
    return write(self, -(1.0 - u).log() / lambd, "exponential_")


def _device(t: Tensor):
    return None if t._data is None else t.device


# ---------------------------------------------------------------- shape changes in place (untracked tensors)


def _reshaped_in_place(name: str, fn):
    def method(self, *args):
        y = fn(self, *args)
        if self._var is not None or active_trace() is not None or self._ag is not None:
            raise RuntimeError(f"{name}: changing a tensor's shape in place is supported only outside a trace, on "
                               f"tensors that do not require grad; write y = x.{name[:-1]}(...) instead")
        self._data = y._data
        return self
    method.__name__ = name
    method.__doc__ = f"self.{name[:-1]}(...), in place (the shape of self changes)."
    return method


# ---------------------------------------------------------------- *_as, where, fill_diagonal_


def view_as(self, other) -> Tensor:
    """self with other's shape."""
    return view(self, as_tensor(other).shape)


def reshape_as(self, other) -> Tensor:
    """self with other's shape."""
    return _shape.reshape(self, as_tensor(other).shape)


def expand_as(self, other) -> Tensor:
    """self broadcast to other's shape."""
    return expand(self, as_tensor(other).shape)


def _where(self, condition, y) -> Tensor:
    """`x.where(condition, y)`: self where condition, else y (torch.where(condition, self, y))."""
    return where(condition, self, y)


def fill_diagonal_(self, fill_value, wrap: bool = False) -> Tensor:
    """Set the main diagonal (all indices equal) to fill_value, in place; wrap=True restarts it every
    columns + 1 rows of a tall matrix, as torch."""
    if self.ndim < 2 or (self.ndim > 2 and len(set(self.shape)) != 1):
        raise RuntimeError(f"fill_diagonal_: all dimensions of input must be of equal length (or 2-D), got "
                           f"{self.shape}")
    if self.ndim == 2:
        r, c = np.indices(self.shape)
        hit = (r == c) if not wrap else (r % (self.shape[1] + 1) == c)
    else:
        idx = np.indices(self.shape)
        hit = (idx == idx[0]).all(axis=0)
    return write(self, where(Tensor(hit), fill_value, self), "fill_diagonal_")


def new_empty(self, *size, dtype=None) -> Tensor:
    """A new tensor of the given size in self's dtype and device (zeros: nothing reads uninitialized memory)."""
    from .torch_convert import new_zeros

    return new_zeros(self, *size, dtype=dtype)


# ---------------------------------------------------------------- attributes


def is_floating_point(self) -> bool:
    """True for float16, float32 and float64 tensors."""
    return self.dtype in _FLOATS


def _false(self) -> bool:
    return False


def _true(self) -> bool:
    return True


def is_signed(self) -> bool:
    """False for uint8 and bool, True otherwise."""
    return self.dtype not in ("uint8", "bool")


def element_size(self) -> int:
    """Bytes per element."""
    return np.dtype(self.dtype).itemsize


def _nbytes(self) -> int:
    return element_size(self) * int(np.prod(self.shape))


def stride(self, dim: int | None = None):
    """Strides in elements (row-major for traced values; the array's own for concrete ones)."""
    if self._data is not None:
        strides = tuple(s // self._data.itemsize for s in self._data.strides)
    else:
        strides = tuple(int(np.prod(self.shape[i + 1:])) for i in range(self.ndim))
    return strides if dim is None else strides[dim]


def is_contiguous(self, memory_format=None) -> bool:
    """Whether the values are laid out row-major; tracegrad's ops never need them to be."""
    return self._data is None or bool(self._data.flags.c_contiguous)


def get_device(self) -> int:
    """-1 on the CPU, else the GPU's index."""
    d = _device(self)
    return -1 if d is None or d.type == "cpu" else int(d.index or 0)


def _is_cpu(self) -> bool:
    d = _device(self)
    return d is None or d.type == "cpu"


def _self(self, *args, **kwargs) -> Tensor:
    return self


def nelement(self) -> int:
    """The number of elements (torch's nelement, numel)."""
    return int(np.prod(self.shape))


def _caster(dtype: str, name: str):
    def fn(self) -> Tensor:
        return astype(self, dtype)
    fn.__name__ = name
    fn.__doc__ = f"`self` as {dtype} (torch's .{name}())."
    return fn


def bfloat16(self):
    """bfloat16 is not a tracegrad dtype: a TypeError naming the ones it has."""
    raise TypeError("bfloat16() : tracegrad has no bfloat16 dtype; use .half() (float16) or .float() (float32)")


def _mT(self) -> Tensor:
    return _shape.transpose(self, -2, -1)


def sum_to_size(self, *size) -> Tensor:
    """self summed over the axes that `size` broadcasts (the gradient of a broadcast)."""
    from .torch_methods import sizes

    shape = sizes("sum_to_size", size)
    lead = self.ndim - len(shape)
    y = _shape.sum(self, axis=tuple(range(lead))) if lead > 0 else self
    axes = tuple(i for i, (s, t) in enumerate(zip(shape, y.shape, strict=True)) if s == 1 and t != 1)
    return _shape.sum(y, axis=axes, keepdims=True) if axes else y


METHODS = {
    "uniform_": uniform_, "normal_": normal_, "bernoulli_": bernoulli_, "random_": random_,
    "exponential_": exponential_, "view_as": view_as, "reshape_as": reshape_as, "expand_as": expand_as,
    "where": _where, "fill_diagonal_": fill_diagonal_, "new_empty": new_empty,
    "is_floating_point": is_floating_point, "is_complex": _false, "is_signed": is_signed,
    "element_size": element_size, "stride": stride, "is_contiguous": is_contiguous, "get_device": get_device,
    "nelement": nelement, "ndimension": lambda self: self.ndim, "bfloat16": bfloat16,
    "pin_memory": _self, "share_memory_": _self, "is_pinned": _false, "is_shared": _false, "positive": _self,
    "adjoint": _mT, "is_nonzero": lambda self: bool(self), "sum_to_size": sum_to_size,
    "byte": _caster("uint8", "byte"), "char": _caster("int8", "char"), "short": _caster("int16", "short"),
    "absolute": lambda self: abs(self), "record_stream": lambda self, stream: None,
    "unsqueeze_": _reshaped_in_place("unsqueeze_", lambda s, d: s.unsqueeze(d)),
    "squeeze_": _reshaped_in_place("squeeze_", lambda s, *d: s.squeeze(*d)),
    "t_": _reshaped_in_place("t_", lambda s: s.t()),
    "transpose_": _reshaped_in_place("transpose_", lambda s, a, b: s.transpose(a, b)),
    "resize_as_": _reshaped_in_place("resize_as_", lambda s, o: s.reshape(as_tensor(o).shape)),
    **{f"{n}_": _inplace(getattr(_ix, n), f"{n}_") for n in ("index_add", "index_copy", "index_fill", "scatter",
                                                            "scatter_add", "scatter_reduce", "masked_scatter")},
    "cumsum_": _inplace(lambda s, dim, **k: s.cumsum(dim, **k), "cumsum_"),
    "absolute_": _inplace(lambda s: abs(s), "absolute_"),
}
for _name in ("isnan", "isinf", "isposinf", "isneginf", "isfinite", "isreal", "signbit", "logical_and", "logical_or",
              "logical_xor", "logical_not", "clamp_min", "clamp_max", "addcmul", "addcdiv", "float_power", "deg2rad",
              "rad2deg", "sinc", "diff", "tile", "ravel", "multinomial", "bernoulli"):
    METHODS[_name] = getattr(_extra, _name)
for _name in ("logical_and", "logical_or", "logical_xor", "logical_not", "clamp_min", "clamp_max", "addcmul",
              "addcdiv", "float_power", "deg2rad", "rad2deg", "sinc"):
    METHODS[f"{_name}_"] = _inplace(getattr(_extra, _name), f"{_name}_")
PROPERTIES = {"is_cpu": property(_is_cpu), "itemsize": property(element_size), "nbytes": property(_nbytes),
              "mH": property(_mT), "H": property(lambda self: self.t()),
              "is_sparse": property(_false), "is_quantized": property(_false), "is_meta": property(_false),
              "is_xpu": property(_false), "is_mps": property(_false),  # no Intel/Apple GPUs here (dcgan reads is_xpu)
              "layout": property(lambda self: "strided")}
