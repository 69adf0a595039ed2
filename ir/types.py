"""Types of IR values: tensors with static shapes, and tuples of them."""
from __future__ import annotations

import operator
from dataclasses import dataclass

import numpy as np

DTYPES = ("float16", "float32", "float64", "int8", "uint8", "int16", "int32", "int64", "bool")
INT_DTYPES = ("int8", "uint8", "int16", "int32", "int64")
FLOAT_DTYPES = ("float16", "float32", "float64")
_DTYPE_SET = frozenset(DTYPES)


class IRError(ValueError, RuntimeError):
    """Malformed IR, or an op applied to arguments it does not accept. A RuntimeError too, as torch raises for an
    op's bad arguments (a ValueError as DESIGN.md names it; see docs/design.md, "Error types")."""


def check_dtype(dtype: str, where: str = "dtype") -> str:
    dtype = str(np.dtype(dtype)) if not isinstance(dtype, str) else dtype
    if dtype not in DTYPES:
        raise TypeError(f"{where}: unsupported dtype {dtype!r}; tracegrad supports {', '.join(DTYPES)}")
    return dtype


@dataclass(frozen=True)
class TensorType:
    shape: tuple[int, ...]
    dtype: str = "float32"

    def __post_init__(self):
        shape = self.shape
        if type(shape) is not tuple or not all(type(d) is int and d >= 0 for d in shape):  # the common case is done
            shape = _dims(shape)
            if any(d < 0 for d in shape):
                raise IRError(f"TensorType: negative dimension in shape {shape}")
            object.__setattr__(self, "shape", shape)
        if type(self.dtype) is not str or self.dtype not in _DTYPE_SET:
            check_dtype(self.dtype, "TensorType")

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def is_float(self) -> bool:
        return self.dtype in FLOAT_DTYPES

    def __str__(self) -> str:
        return f'R.Tensor({shape_str(self.shape)}, dtype="{self.dtype}")'


@dataclass(frozen=True)
class TupleType:
    fields: tuple[Type, ...]

    def __post_init__(self):
        object.__setattr__(self, "fields", tuple(self.fields))

    def __str__(self) -> str:
        return "R.Tuple(" + ", ".join(str(f) for f in self.fields) + ")"


Type = TensorType | TupleType


def _dims(shape) -> tuple[int, ...]:
    """operator.index, not int(): a float dimension (2.7) must not become 2, nor True become 1."""
    try:
        if any(isinstance(d, bool | np.bool_) for d in shape):
            raise TypeError
        return tuple(operator.index(d) for d in shape)
    except TypeError:
        raise TypeError(f"TensorType: shape {shape!r} must be a sequence of ints") from None


def shape_str(shape: tuple[int, ...]) -> str:
    """Python's own tuple spelling, as TVMScript writes shapes: (), (3,), (3, 4)."""
    return str(tuple(shape))
