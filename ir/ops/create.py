"""Tensor creation: zeros, ones, full and their *_like forms. None carries a gradient."""
from __future__ import annotations

from ..types import TensorType
from .registry import Attr, declare, tensor_arg


def _infer_new(op, types, shape, dtype, fill_value=None):
    if any(d < 0 for d in shape):
        raise op.error(f"shape {shape} has a negative dimension")
    return TensorType(shape, dtype)


def _infer_like(op, types, fill_value=None):
    return tensor_arg(op, types, 0)


SHAPE, DTYPE, FILL = Attr("shape", "shape"), Attr("dtype", "dtype", "float32"), Attr("fill_value", "float")

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
