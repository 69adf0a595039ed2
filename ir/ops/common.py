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


def norm_axis(op: Op, axis: int, ndim: int, arg: str = "axis") -> int:
    if not -ndim <= axis < max(ndim, 1) or (ndim == 0 and axis not in (0, -1)):
        raise op.error(f"{arg} {axis} out of range for a tensor of {ndim} dimension(s)")
    return axis % ndim if ndim else 0


def norm_axes(op: Op, axes, ndim: int) -> tuple[int, ...]:
    """None -> all axes; ints normalized, sorted, duplicates rejected."""
    if axes is None:
        return tuple(range(ndim))
    out = tuple(sorted(norm_axis(op, a, ndim) for a in axes))
    if len(set(out)) != len(out):
        raise op.error(f"repeated axis in {axes}")
    return out
