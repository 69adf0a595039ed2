"""Pooling ops of the conv family: max_pool2d, avg_pool2d and their backward helpers.

avg_pool2d counts the padding in its divisor (PyTorch's count_include_pad=True); max_pool2d pads
with -inf, and its gradient goes to the first maximum of each window (row-major), as PyTorch's.
"""
from __future__ import annotations

from ..types import TensorType
from .common import require_float, same_dtype
from .conv import _POOL_ATTRS, _out_hw, _pad, _scatter_windows, _windows, pool2d_shape
from .registry import Attr, declare, tensor_arg


def _infer_pool(op, types, pool_size, strides, padding, dilation, ceil_mode):
    data = tensor_arg(op, types, 0)
    require_float(op, data, "data")
    return TensorType(pool2d_shape(op, data.shape, pool_size, strides, padding, dilation, ceil_mode), data.dtype)


def _data_windows(xp, data, pool_size, strides, padding, dilation, value=0):
    # the shape was validated by inference, so _out_hw needs no op to blame
    out_hw = _out_hw(None, data.shape[2:], pool_size, strides, padding, dilation)
    return _windows(xp, _pad(xp, data, padding, value), pool_size, strides, dilation, out_hw)


def _max_pool2d(xp, data, pool_size, strides, padding, dilation, ceil_mode):
    return _data_windows(xp, data, pool_size, strides, padding, dilation, -xp.inf).max(axis=(4, 5))


def _avg_pool2d(xp, data, pool_size, strides, padding, dilation, ceil_mode):
    win = _data_windows(xp, data, pool_size, strides, padding, dilation)
    return win.sum(axis=(4, 5)) / data.dtype.type(pool_size[0] * pool_size[1])


def _argmax(xp, data, pool_size, strides, padding, dilation):
    """Flat index (i * kw + j) of the first maximum of each window, shape (N, C, Ho, Wo)."""
    win = _data_windows(xp, data, pool_size, strides, padding, dilation, -xp.inf)
    return win.reshape(win.shape[:4] + (pool_size[0] * pool_size[1],)).argmax(axis=-1)  # never -1: N may be 0


def _scatter(xp, cols, in_shape, pool_size, strides, padding, dilation):
    """Per-window gradients (N, C, kh*kw, Ho, Wo) summed back into the data's shape."""
    n, c, _, ho, wo = cols.shape
    cols = cols.reshape((n, c) + tuple(pool_size) + (ho, wo))
    return _scatter_windows(xp, cols, in_shape, strides, padding, dilation)


# ---------------------------------------------------------------- backward helpers


def _infer_pool_backward(op, types, pool_size, strides, padding, dilation, ceil_mode, input_shape=None):
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
    am = _argmax(xp, data, pool_size, strides, padding, dilation)
    one_hot = am[:, :, None] == xp.arange(pool_size[0] * pool_size[1])[:, None, None]
    return _scatter(xp, g[:, :, None] * one_hot, data.shape, pool_size, strides, padding, dilation)


def _avg_pool2d_backward(xp, g, pool_size, strides, padding, dilation, ceil_mode, input_shape):
    k = pool_size[0] * pool_size[1]
    share = g[:, :, None] / g.dtype.type(k)
    cols = xp.broadcast_to(share, share.shape[:2] + (k,) + share.shape[3:])  # the same share at every offset
    return _scatter(xp, cols, input_shape, pool_size, strides, padding, dilation)


def _infer_max_gather(op, types, pool_size, strides, padding, dilation, ceil_mode):
    x, data = tensor_arg(op, types, 0), tensor_arg(op, types, 1)
    same_dtype(op, types)
    if x.shape != data.shape:
        raise op.error(f"argument x of shape {x.shape} must have the shape of data {data.shape}")
    return _infer_pool(op, types[1:], pool_size, strides, padding, dilation, ceil_mode)


def _max_pool2d_gather(xp, x, data, pool_size, strides, padding, dilation, ceil_mode):
    # x at the position where max_pool2d(data) found each window's maximum
    am = _argmax(xp, data, pool_size, strides, padding, dilation)
    win = _data_windows(xp, x, pool_size, strides, padding, dilation)
    flat = win.reshape(win.shape[:4] + (pool_size[0] * pool_size[1],))
    return xp.take_along_axis(flat, am[..., None], axis=-1)[..., 0]


_LAYOUT = {"layout": ("NCHW",), "out_layout": ("NCHW",)}
declare("nn.max_pool2d", ("data",), _POOL_ATTRS, infer=_infer_pool, kernel=_max_pool2d,
        fixed={**_LAYOUT, "count_include_pad": (False, True)})  # no padding is ever counted in a max
# padding is counted in the average, as PyTorch's default count_include_pad=True
declare("nn.avg_pool2d", ("data",), _POOL_ATTRS, infer=_infer_pool, kernel=_avg_pool2d,
        fixed={**_LAYOUT, "count_include_pad": (True,)})
declare("grad.max_pool2d_backward", ("output_grad", "data"), _POOL_ATTRS, infer=_infer_pool_backward,
        kernel=_max_pool2d_backward)
declare("grad.avg_pool2d_backward", ("output_grad",), _POOL_ATTRS + (Attr("input_shape", "shape"),),
        infer=_infer_pool_backward, kernel=_avg_pool2d_backward)
# The adjoint of max_pool2d_backward in its output_grad: the VJP of the backward op (second order).
declare("grad.max_pool2d_gather", ("x", "data"), _POOL_ATTRS, infer=_infer_max_gather, kernel=_max_pool2d_gather)
