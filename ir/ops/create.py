"""Tensor creation: zeros, ones, full and their *_like forms. None carries a gradient."""
from __future__ import annotations

import math

import numpy as np

from ..types import INT_DTYPES, TensorType
from .registry import Attr, declare, tensor_arg


def _check_fill(op, fill_value, dtype):
    """An integer tensor cannot hold nan, inf or a value beyond its range (NumPy would store garbage);
    an int fill value must fit int64 whatever the dtype (NumPy cannot convert it otherwise)."""
    if fill_value is None or dtype not in INT_DTYPES and not isinstance(fill_value, int):
        return
    fits = dtype if dtype in INT_DTYPES else "int64"
    info = np.iinfo(fits)
    if not (math.isfinite(fill_value) and info.min <= fill_value <= info.max):
        raise op.error(f"fill_value {fill_value!r} does not fit dtype {fits} ({info.min}..{info.max})"
                       + ("" if fits == dtype else f"; write it as a float for a {dtype} tensor"))


def _infer_new(op, types, shape, dtype, fill_value=None):
    if any(d < 0 for d in shape):
        raise op.error(f"shape {shape} has a negative dimension")
    _check_fill(op, fill_value, dtype)
    return TensorType(shape, dtype)


def _infer_like(op, types, fill_value=None):
    x = tensor_arg(op, types, 0)
    _check_fill(op, fill_value, x.dtype)
    return x


SHAPE, DTYPE, FILL = Attr("shape", "shape"), Attr("dtype", "dtype", "float32"), Attr("fill_value", "number")

declare("zeros", (), (SHAPE, DTYPE), infer=_infer_new, differentiable=False,
        kernel=lambda xp, shape, dtype: xp.zeros(shape, dtype))
declare("ones", (), (SHAPE, DTYPE), infer=_infer_new, differentiable=False,
        kernel=lambda xp, shape, dtype: xp.ones(shape, dtype))
declare("full", (), (SHAPE, FILL, DTYPE), infer=_infer_new, differentiable=False,
        kernel=lambda xp, shape, fill_value, dtype: xp.full(shape, fill_value, dtype))
# The *_like ops read only x's shape and dtype, so no gradient flows to x.
declare("zeros_like", infer=_infer_like, differentiable=False, kernel=lambda xp, x: xp.zeros(x.shape, x.dtype))
declare("ones_like", infer=_infer_like, differentiable=False, kernel=lambda xp, x: xp.ones(x.shape, x.dtype))
declare("full_like", attrs=(FILL,), infer=_infer_like, differentiable=False,
        kernel=lambda xp, x, fill_value: xp.full(x.shape, fill_value, x.dtype))
