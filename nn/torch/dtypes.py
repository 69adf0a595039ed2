"""torch's dtypes as attributes: `torch.float32`, `torch.long`, `torch.bool`, ... Each is tracegrad's dtype name
(a str: "float32", "int64"), so `x.to(torch.float64)`, `x.dtype == torch.float32` and
`tensor(..., dtype=torch.long)` work as in torch, and it also answers torch's questions about itself
(`torch.float16.is_floating_point`, `.itemsize`). Dtypes tracegrad lacks (bfloat16, the complex ones) exist as
names, so a table that mentions them can be built, and raise a TypeError naming the supported ones when used.

>>> import nn.torch as torch
>>> torch.long == "int64", torch.float.is_floating_point, torch.finfo(torch.float16).bits
(True, True, 16)
"""
from __future__ import annotations

import numpy as np

import ir


class dtype(str):  # noqa: N801 - torch's spelling
    """A dtype: its tracegrad name as a str, with torch.dtype's attributes."""

    __slots__ = ()

    @property
    def is_floating_point(self) -> bool:
        return self in ir.types.FLOAT_DTYPES or self == "bfloat16"

    @property
    def is_complex(self) -> bool:
        return self.startswith("complex")

    @property
    def is_signed(self) -> bool:
        return self not in ("uint8", "bool")

    @property
    def itemsize(self) -> int:
        return 2 if self == "bfloat16" else np.dtype(str(self)).itemsize

    def to_real(self) -> dtype:
        return self

    def __reduce__(self):
        return dtype, (str(self),)


float32 = float = dtype("float32")  # noqa: A001 - torch's names
float64 = double = dtype("float64")
float16 = half = dtype("float16")
int64 = long = dtype("int64")
int32 = int = dtype("int32")  # noqa: A001
int16 = short = dtype("int16")
int8 = dtype("int8")
uint8 = dtype("uint8")
bool = dtype("bool")  # noqa: A001
# names torch has and tracegrad's arrays do not: using one is a TypeError naming the supported dtypes
bfloat16 = dtype("bfloat16")
complex64 = cfloat = dtype("complex64")
complex128 = cdouble = dtype("complex128")
complex32 = chalf = dtype("complex32")
uint16, uint32, uint64 = dtype("uint16"), dtype("uint32"), dtype("uint64")
float8_e4m3fn, float8_e5m2 = dtype("float8_e4m3fn"), dtype("float8_e5m2")

_DEFAULT = float32


def get_default_dtype() -> dtype:
    """float32: tracegrad's constructors make float32 from Python floats, as torch's default."""
    return _DEFAULT


def set_default_dtype(d) -> None:
    """Accepted for float32 (torch's default already); any other default is a TypeError: tracegrad's
    constructors and layers take `dtype=` instead (and `model.to("float64")`)."""
    if d != "float32":
        raise TypeError(f"set_default_dtype({d!r}): tracegrad's default dtype is fixed at float32; pass dtype= to "
                        "the constructors (torch.zeros(..., dtype=torch.float64)) and convert models with "
                        "model.double() / model.to(torch.float64)")


def _numpy_dtype(d) -> np.dtype:
    if d == "bfloat16" or str(d).startswith(("complex", "float8")):
        raise TypeError(f"{d}: tracegrad has no such dtype; it supports {', '.join(ir.DTYPES)}")
    return np.dtype(str(d))


def finfo(type=float32):  # noqa: A002 - torch's argument name
    """Machine limits of a floating dtype (`eps`, `max`, `min`, `tiny`, `resolution`, `bits`), NumPy's."""
    return np.finfo(_numpy_dtype(type))


def iinfo(type):  # noqa: A002
    """Machine limits of an integer dtype (`max`, `min`, `bits`), NumPy's."""
    return np.iinfo(_numpy_dtype(type))


def is_floating_point(input) -> bool:  # noqa: A002
    """Whether a tensor's dtype is a floating one."""
    return dtype(input.dtype).is_floating_point


def is_complex(input) -> bool:  # noqa: A002
    """False: tracegrad has no complex dtypes."""
    return False


def promote_types(type1, type2) -> dtype:
    """The dtype an op on the two would compute in (torch's promotion)."""
    from tracer.math import promote_types as _promote

    return dtype(_promote(str(type1), str(type2)))


def can_cast(from_, to) -> bool:
    """Whether torch's in-place ops may store `from_` in `to` (same kind or wider kind)."""
    return builtin_bool(np.can_cast(_numpy_dtype(from_), _numpy_dtype(to), "same_kind"))


builtin_bool = type(True)

__all__ = ["bfloat16", "bool", "can_cast", "cdouble", "cfloat", "chalf", "complex128", "complex32", "complex64",
           "double", "dtype", "finfo", "float", "float16", "float32", "float64", "float8_e4m3fn", "float8_e5m2",
           "get_default_dtype", "half", "iinfo", "int", "int16", "int32", "int64", "int8", "is_complex",
           "is_floating_point", "long", "promote_types", "set_default_dtype", "short", "uint16", "uint32", "uint64",
           "uint8"]
