"""Padding of the conv family: nn.pad (constant, reflect, replicate, circular) and its adjoint.

pad_width lists (before, after) for every axis in order, flattened, as Relax writes it; every entry is
>= 0 (the tracer crops for torch's negative pads first). A non-constant mode reads each padded position
from one input position along each axis (reflect: mirrored without repeating the edge, replicate: the
edge, circular: wrapped), so the op is a gather per axis and its adjoint a scatter-add per axis, in
reverse order. torch's limits hold: reflect needs pad < size, circular pad <= size, replicate size >= 1.
"""
from __future__ import annotations

import numpy as np

from ..types import TensorType
from .common import require_numeric
from .registry import Attr, declare, tensor_arg

PAD_MODES = ("constant", "reflect", "replicate", "circular")
_NUMPY_MODE = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}
_PAD_ATTRS = (Attr("pad_width", "ints"), Attr("pad_mode", "str", "constant"), Attr("pad_value", "float", 0.0))


def _pairs(op, shape, pad_width, pad_mode):
    """[(before, after)] per axis, checked against the shape and the mode's limits."""
    if pad_mode not in PAD_MODES:
        raise op.error(f"pad_mode must be one of {PAD_MODES}, got {pad_mode!r}")
    if len(pad_width) != 2 * len(shape):
        raise op.error(f"pad_width must have 2 entries (before, after) per axis of data of shape {tuple(shape)} "
                       f"({2 * len(shape)}), got {list(pad_width)}")
    pairs = [(pad_width[2 * i], pad_width[2 * i + 1]) for i in range(len(shape))]
    for axis, ((before, after), size) in enumerate(zip(pairs, shape, strict=True)):
        if min(before, after) < 0:
            raise op.error(f"pad_width must be >= 0, got {list(pad_width)}")
        widest = max(before, after)
        if pad_mode == "reflect" and widest and widest >= size:
            raise op.error(f"reflect padding ({before}, {after}) of axis {axis} must be less than its size {size} "
                           f"(data of shape {tuple(shape)})")
        if pad_mode == "circular" and widest > size:
            raise op.error(f"circular padding ({before}, {after}) of axis {axis} must be at most its size {size} "
                           f"(data of shape {tuple(shape)})")
        if pad_mode == "replicate" and widest and size == 0:
            raise op.error(f"replicate padding of axis {axis} needs a nonempty axis (data of shape {tuple(shape)})")
    return pairs


def _source(size, before, after, pad_mode) -> np.ndarray:
    """The input position each output position of one axis reads (non-constant modes)."""
    return np.pad(np.arange(size), (before, after), mode=_NUMPY_MODE[pad_mode])


def _infer_pad(op, types, pad_width, pad_mode, pad_value):
    data = tensor_arg(op, types, 0)
    require_numeric(op, data, "data")
    pairs = _pairs(op, data.shape, pad_width, pad_mode)
    return TensorType(tuple(n + b + a for n, (b, a) in zip(data.shape, pairs, strict=True)), data.dtype)


def _pad(xp, data, pad_width, pad_mode, pad_value):
    pairs = _pairs_unchecked(data.ndim, pad_width)
    if pad_mode == "constant":
        return xp.pad(data, pairs, constant_values=xp.asarray(pad_value).astype(data.dtype))
    out = data
    for axis, (before, after) in enumerate(pairs):
        if before or after:
            out = xp.take(out, xp.asarray(_source(data.shape[axis], before, after, pad_mode)), axis=axis)
    return out


def _pairs_unchecked(ndim, pad_width):
    return [(pad_width[2 * i], pad_width[2 * i + 1]) for i in range(ndim)]


def _infer_pad_backward(op, types, pad_width, pad_mode, input_shape):
    g = tensor_arg(op, types, 0)
    require_numeric(op, g, "output_grad")
    pairs = _pairs(op, input_shape, pad_width, pad_mode)
    want = tuple(n + b + a for n, (b, a) in zip(input_shape, pairs, strict=True))
    if g.shape != want:
        raise op.error(f"argument output_grad of shape {g.shape} must have the padded shape {want} of an input "
                       f"of shape {tuple(input_shape)}")
    return TensorType(tuple(input_shape), g.dtype)


def _pad_backward(xp, g, pad_width, pad_mode, input_shape):
    """The adjoint of _pad: a crop (constant), or each axis's gather summed back, last axis first."""
    pairs = _pairs_unchecked(g.ndim, pad_width)
    if pad_mode == "constant":
        return g[tuple(slice(b, b + n) for (b, _), n in zip(pairs, input_shape, strict=True))]
    out = g
    for axis in reversed(range(g.ndim)):
        before, after = pairs[axis]
        if not (before or after):
            continue
        shape = list(out.shape)
        shape[axis] = input_shape[axis]
        acc = xp.zeros(tuple(shape), dtype=g.dtype)
        index = (slice(None),) * axis + (xp.asarray(_source(input_shape[axis], before, after, pad_mode)),)
        xp.add.at(acc, index, out)
        out = acc
    return out


declare("nn.pad", ("data",), _PAD_ATTRS, infer=_infer_pad, kernel=_pad)
declare("grad.pad_backward", ("output_grad",), _PAD_ATTRS[:2] + (Attr("input_shape", "shape"),),
        infer=_infer_pad_backward, kernel=_pad_backward)
