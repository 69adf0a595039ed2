"""Bitwise ops (Relax's names): bitwise_and, bitwise_or, bitwise_xor, bitwise_not on integer and bool
tensors (on bool they are the logical ops), left_shift and right_shift on integer tensors. A floating
argument is an error naming the op, as torch's. None has a gradient.

Shifts are defined for every shift count, as torch's and NumPy's on a CPU (C leaves them undefined, so a
GPU's raw shift would not be): a left shift by a negative count or by the bit width or more gives 0, a
right shift by one of those gives the sign fill (0 or -1).
"""
from __future__ import annotations

from ..types import INT_DTYPES, TensorType
from .common import broadcast_shape, same_dtype
from .registry import declare, tensor_arg

_INTEGER = INT_DTYPES


def _check(op, dtype, shifts):
    allowed = _INTEGER if shifts else _INTEGER + ("bool",)
    if dtype not in allowed:
        kinds = "integer" if shifts else "integer or bool"
        raise op.error(f"expects {kinds} tensors, got dtype {dtype} (as torch, bitwise ops are not defined for "
                       f"{'bool or ' if shifts and dtype == 'bool' else ''}floating tensors)")


def _infer_binary(shifts):
    def infer(op, types):
        dtype = same_dtype(op, types)
        _check(op, dtype, shifts)
        return TensorType(broadcast_shape(op, types), dtype)
    return infer


def _infer_not(op, types):
    t = tensor_arg(op, types, 0)
    _check(op, t.dtype, False)
    return t


def _bits(x) -> int:
    return x.dtype.itemsize * 8


def _left_shift(xp, x, s):
    bits = _bits(x)
    outside = (s < 0) | (s >= bits)
    return xp.where(outside, x.dtype.type(0), xp.left_shift(x, xp.clip(s, 0, bits - 1).astype(x.dtype)))


def _right_shift(xp, x, s):
    bits = _bits(x)
    count = xp.where((s < 0) | (s >= bits), bits - 1, s).astype(x.dtype)
    return xp.right_shift(x, count)


for _name in ("bitwise_and", "bitwise_or", "bitwise_xor"):
    declare(_name, ("x1", "x2"), infer=_infer_binary(False), differentiable=False,
            kernel=lambda xp, a, b, _name=_name: getattr(xp, _name)(a, b))
declare("bitwise_not", ("x",), infer=_infer_not, differentiable=False,
        kernel=lambda xp, x: xp.invert(x))
declare("left_shift", ("x1", "x2"), infer=_infer_binary(True), differentiable=False, kernel=_left_shift)
declare("right_shift", ("x1", "x2"), infer=_infer_binary(True), differentiable=False, kernel=_right_shift)
