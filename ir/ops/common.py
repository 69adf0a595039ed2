"""Inference helpers shared by the op families."""
from __future__ import annotations

from ..types import TensorType, Type
from .registry import Op, tensor_arg


def broadcast_shape(op: Op, types: list[Type]) -> tuple[int, ...]:
    """NumPy broadcasting of every argument's shape; the error names both arguments that clash."""
    shape: list[int] = []
    owner: list[int] = []
    for i, t in enumerate(types):
        s = tensor_arg(op, types, i).shape
        pad = len(s) - len(shape)
        if pad > 0:
            shape = list(s[:pad]) + shape
            owner = [i] * pad + owner
        for k, d in enumerate(s):
            j = len(shape) - len(s) + k
            if shape[j] == d or d == 1:
                continue
            if shape[j] == 1:
                shape[j], owner[j] = d, i
                continue
            a, b = op.inputs[owner[j]], op.inputs[i]
            raise op.error(
                f"cannot broadcast argument {a} of shape {types[owner[j]].shape} with argument {b} of shape "
                f"{t.shape} (dimension {j - len(shape)}: {shape[j]} vs {d})")
    return tuple(shape)


def same_dtype(op: Op, types: list[Type]) -> str:
    dtypes = [t.dtype for t in types]
    if len(set(dtypes)) > 1:
        named = ", ".join(f"{n}: {d}" for n, d in zip(op.inputs, dtypes, strict=False))
        raise op.error(f"arguments must share one dtype ({named}); insert astype to convert")
    return dtypes[0]


def require_float(op: Op, t: TensorType, arg: str = "x") -> None:
    if not t.is_float:
        raise op.error(f"argument {arg} must be a floating tensor, got dtype {t.dtype}")


def require_numeric(op: Op, t: TensorType, arg: str = "x") -> None:
    if t.dtype == "bool":
        raise op.error(f"argument {arg} must be numeric, got dtype bool; insert astype to convert")


def norm_axis(op: Op, axis: int, ndim: int, arg: str = "axis", scalar_ok: bool = False) -> int:
    """axis in 0..ndim-1. `scalar_ok` also accepts axis 0 / -1 of a 0-d tensor (as PyTorch's reductions
    do; the caller must then treat it as no axis at all, since a 0-d tensor has no dimension to index)."""
    if not -ndim <= axis < ndim and not (scalar_ok and ndim == 0 and axis in (0, -1)):
        raise op.error(f"{arg} {axis} out of range for a tensor of {ndim} dimension(s)")
    return axis % ndim if ndim else 0


def norm_axes(op: Op, axes, ndim: int, scalar_ok: bool = False) -> tuple[int, ...]:
    """None -> all axes; ints normalized, sorted, duplicates rejected."""
    if axes is None:
        return tuple(range(ndim))
    out = tuple(sorted(norm_axis(op, a, ndim, scalar_ok=scalar_ok) for a in axes))
    if len(set(out)) != len(out):
        raise op.error(f"repeated axis in {axes}")
    return out
