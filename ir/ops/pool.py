"""Pooling ops of the conv family: max_pool2d (and its argmax indices), avg_pool2d and their backward helpers.

Shapes follow Relax (TVM 0.27, which agrees with PyTorch): ceil_mode=True rounds the window count up,
less a last window that would start in the bottom/right padding; the windows it adds read past the
padded input (as extra padding that no average counts). avg_pool2d divides by the taps that read the
input and its padding (count_include_pad=True, PyTorch's default) or the input alone (False). max_pool2d
pads with -inf, and its gradient goes to the tap PyTorch's picks (see _argmax): the first maximum of each
window (row-major), its last NaN if it holds one.
A window that would read padding alone is refused when the op is built (see pool2d_shape).
"""
from __future__ import annotations

from ..types import TensorType
from .common import require_float, same_dtype
from .conv import _POOL_ATTRS, _pad, _scatter_windows, _windows, pool2d_shape, pool_out_hw, window_taps
from .registry import Attr, declare, tensor_arg


def _infer_pool(op, types, pool_size, strides, padding, dilation, ceil_mode, count_include_pad=True):
    data = tensor_arg(op, types, 0)
    require_float(op, data, "data")
    return TensorType(pool2d_shape(op, data.shape, pool_size, strides, padding, dilation, ceil_mode), data.dtype)


def _geometry(in_hw, pool_size, strides, padding, dilation, ceil_mode):
    """(out_hw, padding) with the room ceil_mode needs added to the bottom and right padding."""
    out_hw = pool_out_hw(None, in_hw, pool_size, strides, padding, dilation, ceil_mode)  # validated already
    extra = [max(0, (o - 1) * s + d * (k - 1) + 1 - (n + padding[i] + padding[i + 2]))
             for i, (o, s, d, k, n) in enumerate(zip(out_hw, strides, dilation, pool_size, in_hw, strict=True))]
    top, left, bottom, right = padding
    return out_hw, (top, left, bottom + extra[0], right + extra[1])


def _data_windows(xp, data, pool_size, strides, padding, dilation, ceil_mode, value=0):
    out_hw, pad = _geometry(data.shape[2:], pool_size, strides, padding, dilation, ceil_mode)
    return _windows(xp, _pad(xp, data, pad, value), pool_size, strides, dilation, out_hw)


def _divisor(xp, in_hw, pool_size, strides, padding, dilation, ceil_mode, count_include_pad, dtype):
    """(Ho, Wo): how many taps of each window avg_pool2d averages."""
    out_hw = pool_out_hw(None, in_hw, pool_size, strides, padding, dilation, ceil_mode)
    h, w = (window_taps(in_hw[i], pool_size[i], strides[i], padding[i], dilation[i], out_hw[i], count_include_pad,
                        padding[i + 2]) for i in range(2))
    return xp.asarray((h[:, None] * w[None, :]).astype(dtype))


def _max_pool2d(xp, data, pool_size, strides, padding, dilation, ceil_mode):
    return _data_windows(xp, data, pool_size, strides, padding, dilation, ceil_mode, -xp.inf).max(axis=(4, 5))


def _avg_pool2d(xp, data, pool_size, strides, padding, dilation, ceil_mode, count_include_pad):
    win = _data_windows(xp, data, pool_size, strides, padding, dilation, ceil_mode)
    div = _divisor(xp, data.shape[2:], pool_size, strides, padding, dilation, ceil_mode, count_include_pad,
                   data.dtype)
    return win.sum(axis=(4, 5)) / div


def _argmax(xp, data, pool_size, strides, padding, dilation, ceil_mode):
    """Flat index (i * kw + j) of the tap torch's max pooling picks in each window, shape (N, C, Ho, Wo): the first
    maximum (row-major), the last NaN where the window holds one (torch takes a tap when `val > max or
    isnan(val)`), the first tap inside the input where every tap is -inf (torch starts from that tap and never
    reads the padding)."""
    k = pool_size[0] * pool_size[1]
    win = _data_windows(xp, data, pool_size, strides, padding, dilation, ceil_mode, -xp.inf)
    flat = win.reshape(win.shape[:4] + (k,))
    am = flat.argmax(axis=-1)  # never -1: N may be 0
    nan = xp.isnan(flat)
    if nan.any():
        am = xp.where(nan.any(axis=-1), k - 1 - nan[..., ::-1].argmax(axis=-1), am)
    out_hw, pad = _geometry(data.shape[2:], pool_size, strides, padding, dilation, ceil_mode)
    if any(pad):  # an all -inf window: argmax's first tap may be padding
        inside = _windows(xp, _pad(xp, xp.ones((1, 1) + data.shape[2:], bool), pad, False), pool_size, strides,
                          dilation, out_hw).reshape(out_hw + (k,)).argmax(axis=-1)
        picked = xp.take_along_axis(flat, am[..., None], axis=-1)[..., 0]
        am = xp.where(picked == -xp.inf, inside, am)
    return am


def _scatter(xp, cols, in_shape, pool_size, strides, padding, dilation, ceil_mode):
    """Per-window gradients (N, C, kh*kw, Ho, Wo) summed back into the data's shape."""
    n, c, _, ho, wo = cols.shape
    cols = cols.reshape((n, c) + tuple(pool_size) + (ho, wo))
    _, pad = _geometry(in_shape[2:], pool_size, strides, padding, dilation, ceil_mode)
    return _scatter_windows(xp, cols, in_shape, strides, pad, dilation)


# ---------------------------------------------------------------- backward helpers


def _infer_pool_backward(op, types, pool_size, strides, padding, dilation, ceil_mode, count_include_pad=True,
                         input_shape=None):
    g = tensor_arg(op, types, 0)
    require_float(op, g, "output_grad")
    if input_shape is None:  # max_pool2d_backward and max_pool2d_gather read the shape off data
        input_shape = tensor_arg(op, types, 1).shape
        same_dtype(op, types)
    want = pool2d_shape(op, input_shape, pool_size, strides, padding, dilation, ceil_mode)
    if g.shape != want:
        raise op.error(f"argument output_grad of shape {g.shape} must have the pooled shape {want} of an "
                       f"input of shape {tuple(input_shape)}")
    return TensorType(input_shape, g.dtype)


def _max_pool2d_backward(xp, g, data, pool_size, strides, padding, dilation, ceil_mode):
    am = _argmax(xp, data, pool_size, strides, padding, dilation, ceil_mode)
    one_hot = am[:, :, None] == xp.arange(pool_size[0] * pool_size[1])[:, None, None]
    return _scatter(xp, g[:, :, None] * one_hot, data.shape, pool_size, strides, padding, dilation, ceil_mode)


def _relu_max_pool2d_backward(xp, g, data, pool_size, strides, padding, dilation, ceil_mode):
    """where(data <= 0, 0, max_pool2d_backward(g, data)): max_pool2d's gradient through a relu before it (the
    relu's backward reads its own output, which is the pool's input); made by ir.runtime.pool_relu."""
    dx = _max_pool2d_backward(xp, g, data, pool_size, strides, padding, dilation, ceil_mode)
    return xp.where(data <= 0, xp.zeros((), g.dtype), dx)


def _avg_pool2d_backward(xp, g, pool_size, strides, padding, dilation, ceil_mode, count_include_pad, input_shape):
    k = pool_size[0] * pool_size[1]
    share = g[:, :, None] / _divisor(xp, input_shape[2:], pool_size, strides, padding, dilation, ceil_mode,
                                     count_include_pad, g.dtype)
    cols = xp.broadcast_to(share, share.shape[:2] + (k,) + share.shape[3:])  # the same share at every offset
    return _scatter(xp, cols, input_shape, pool_size, strides, padding, dilation, ceil_mode)


def _infer_max_gather(op, types, pool_size, strides, padding, dilation, ceil_mode):
    x, data = tensor_arg(op, types, 0), tensor_arg(op, types, 1)
    same_dtype(op, types)
    if x.shape != data.shape:
        raise op.error(f"argument x of shape {x.shape} must have the shape of data {data.shape}")
    return _infer_pool(op, types[1:], pool_size, strides, padding, dilation, ceil_mode)


def _max_pool2d_gather(xp, x, data, pool_size, strides, padding, dilation, ceil_mode):
    # x at the position where max_pool2d(data) found each window's maximum
    am = _argmax(xp, data, pool_size, strides, padding, dilation, ceil_mode)
    win = _data_windows(xp, x, pool_size, strides, padding, dilation, ceil_mode)
    flat = win.reshape(win.shape[:4] + (pool_size[0] * pool_size[1],))
    return xp.take_along_axis(flat, am[..., None], axis=-1)[..., 0]


def _infer_max_indices(op, types, pool_size, strides, padding, dilation, ceil_mode):
    return TensorType(_infer_pool(op, types, pool_size, strides, padding, dilation, ceil_mode).shape, "int64")


def _max_pool2d_indices(xp, data, pool_size, strides, padding, dilation, ceil_mode):
    """torch's return_indices: the flat index (row * W + column) in its (H, W) plane of the tap _argmax picks in
    each window (its first maximum, its last NaN), int64 of the pooled shape."""
    am = _argmax(xp, data, pool_size, strides, padding, dilation, ceil_mode)
    ho, wo = am.shape[2:]
    a, b = am // pool_size[1], am % pool_size[1]
    rows = (xp.arange(ho) * strides[0] - padding[0])[:, None] + a * dilation[0]
    cols = (xp.arange(wo) * strides[1] - padding[1])[None, :] + b * dilation[1]
    return (rows * data.shape[3] + cols).astype("int64")


_LAYOUT = {"layout": ("NCHW",), "out_layout": ("NCHW", None)}  # None: the same as layout, in Relax
_AVG_ATTRS = _POOL_ATTRS + (Attr("count_include_pad", "bool", True),)
declare("nn.max_pool2d", ("data",), _POOL_ATTRS, infer=_infer_pool, kernel=_max_pool2d,
        fixed={**_LAYOUT, "count_include_pad": (False, True)})  # no padding is ever counted in a max
declare("nn.avg_pool2d", ("data",), _AVG_ATTRS, infer=_infer_pool, kernel=_avg_pool2d, fixed=_LAYOUT)
declare("grad.max_pool2d_backward", ("output_grad", "data"), _POOL_ATTRS, infer=_infer_pool_backward,
        kernel=_max_pool2d_backward)
declare("grad.relu_max_pool2d_backward", ("output_grad", "data"), _POOL_ATTRS, infer=_infer_pool_backward,
        kernel=_relu_max_pool2d_backward, differentiable=False)  # the runtime's rewrite, after differentiation
declare("grad.avg_pool2d_backward", ("output_grad",), _AVG_ATTRS + (Attr("input_shape", "shape"),),
        infer=_infer_pool_backward, kernel=_avg_pool2d_backward)
declare("nn.max_pool2d_indices", ("data",), _POOL_ATTRS, infer=_infer_max_indices, kernel=_max_pool2d_indices,
        differentiable=False)
# The adjoint of max_pool2d_backward in its output_grad: the VJP of the backward op (second order).
declare("grad.max_pool2d_gather", ("x", "data"), _POOL_ATTRS, infer=_infer_max_gather, kernel=_max_pool2d_gather)
