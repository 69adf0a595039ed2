"""Reductions over axes: sum, prod, mean, max, min, variance, argmax."""
from __future__ import annotations

from ..types import IRError, TensorType
from .common import norm_axes, norm_axis, require_float, require_numeric
from .registry import Attr, declare, tensor_arg

AXIS_ATTRS = (Attr("axis", "axes", None), Attr("keepdims", "bool", False))


class EmptyReductionError(IRError, IndexError):
    """max / min / argmax over an axis of size 0, which has no value: torch raises IndexError ("Expected reduction
    dim 0 to have non-zero size"), RuntimeError when no dim is given; this is both (and an IRError)."""


def reduced_shape(shape: tuple[int, ...], axes: tuple[int, ...], keepdims: bool) -> tuple[int, ...]:
    """The shape left after reducing `axes` (normalized) of `shape`."""
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def kernel_axes(axis, ndim: int) -> tuple[int, ...]:
    """Normalized axes for a kernel; a 0-d tensor has no axis to reduce (axis 0 / -1 is accepted on it,
    as PyTorch does, and reduces nothing)."""
    if ndim == 0:
        return ()
    return tuple(range(ndim)) if axis is None else tuple(a % ndim for a in axis)


def _infer(kind):
    def infer(op, types, axis, keepdims):
        x = tensor_arg(op, types, 0)
        if kind == "float":
            require_float(op, x)
        elif kind == "number":
            require_numeric(op, x)
        axes = norm_axes(op, axis, x.ndim, scalar_ok=True)  # on a 0-d tensor axis 0 / -1 reduces nothing
        axes = axes if x.ndim else ()
        if kind == "order" and any(x.shape[a] == 0 for a in axes):
            raise EmptyReductionError(f"{op.name}: cannot reduce x of shape {x.shape} over an empty axis "
                                      f"(axis={axis}): it has no {op.name}")
        return TensorType(reduced_shape(x.shape, axes, keepdims), x.dtype)
    return infer


def _reduce(fn):
    def kernel(xp, x, axis, keepdims):
        out = getattr(xp, fn)(x, axis=kernel_axes(axis, x.ndim), keepdims=keepdims)
        # NumPy sums small integers into int64; inference promises the input dtype.
        return xp.asarray(out).astype(x.dtype, copy=False)
    return kernel


declare("sum", attrs=AXIS_ATTRS, infer=_infer("number"), kernel=_reduce("sum"))
declare("prod", attrs=AXIS_ATTRS, infer=_infer("number"), kernel=_reduce("prod"))
declare("mean", attrs=AXIS_ATTRS, infer=_infer("float"), kernel=_reduce("mean"))
declare("max", attrs=AXIS_ATTRS, infer=_infer("order"), kernel=_reduce("max"))
declare("min", attrs=AXIS_ATTRS, infer=_infer("order"), kernel=_reduce("min"))
# The population variance (ddof=0), as Relax's `variance`.
def _variance(xp, x, axis, keepdims):
    # float16 statistics in float32, returned as float16 (as PyTorch): squares of values above 256
    # overflow float16, and a float16 sum of many small squares loses them.
    wide = x.astype(xp.float32) if x.dtype == xp.float16 else x
    return xp.asarray(wide.var(axis=kernel_axes(axis, x.ndim), keepdims=keepdims)).astype(x.dtype, copy=False)


declare("variance", attrs=AXIS_ATTRS, infer=_infer("float"), kernel=_variance)


def _infer_argmax(op, types, axis, keepdims):
    x = tensor_arg(op, types, 0)
    if axis is None:
        axes = tuple(range(x.ndim))
    else:
        axes = (norm_axis(op, axis, x.ndim, scalar_ok=True),) if x.ndim else ()
    if any(x.shape[a] == 0 for a in axes) or (axis is None and x.size == 0):
        raise EmptyReductionError(f"{op.name}: cannot take argmax of x of shape {x.shape} over an empty axis "
                                  f"(axis={axis})")
    return TensorType(reduced_shape(x.shape, axes, keepdims), "int64")


def _argmax(xp, x, axis, keepdims):
    if x.ndim == 0:
        return xp.zeros((), "int64")
    if axis is None:
        flat = xp.argmax(x.reshape(-1))
        return xp.asarray(flat).astype("int64").reshape((1,) * x.ndim if keepdims else ())
    out = xp.argmax(x, axis=axis % x.ndim)
    out = xp.expand_dims(out, axis % x.ndim) if keepdims else out
    return xp.asarray(out).astype("int64", copy=False)


declare("argmax", attrs=(Attr("axis", "opt_int", None), Attr("keepdims", "bool", False)),
        infer=_infer_argmax, kernel=_argmax, differentiable=False)
