"""2-D convolution and pooling (NCHW data, OIHW weights), with the backward helpers the VJPs emit.

Every kernel works on a strided window view of the padded input, shape (N, C, Ho, Wo, kh, kw),
made by as_strided without copying: convolution is then one (batched) matmul over im2col columns,
pooling one reduction over the last two axes. Scattering back (the input gradients) loops over the
kh * kw kernel offsets, each a vectorized strided slice-add, never over pixels.
Padding is (top, left, bottom, right), as Relax writes it.
"""
from __future__ import annotations

import numpy as np

from ..types import TensorType
from .common import require_float, same_dtype
from .registry import Attr, declare, tensor_arg

_WINDOW_ATTRS = (Attr("strides", "ints", (1, 1)), Attr("padding", "ints", (0, 0, 0, 0)),
                 Attr("dilation", "ints", (1, 1)))
_CONV_ATTRS = _WINDOW_ATTRS + (Attr("groups", "int", 1),)
_POOL_ATTRS = (Attr("pool_size", "ints"),) + _WINDOW_ATTRS + (Attr("ceil_mode", "bool", False),)

# ---------------------------------------------------------------- shapes


def _check_window_attrs(op, strides, padding, dilation):
    for name, value, n, low in (("strides", strides, 2, 1), ("padding", padding, 4, 0), ("dilation", dilation, 2, 1)):
        if len(value) != n or any(v < low for v in value):
            raise op.error(f"{name} must be {n} integers >= {low}, got {list(value)}")


def _out_hw(op, hw, kernel, strides, padding, dilation, what="data"):
    out = []
    for i, (size, k) in enumerate(zip(hw, kernel, strict=True)):
        span = dilation[i] * (k - 1) + 1
        padded = size + padding[i] + padding[i + 2]
        if padded < span:
            raise op.error(f"the {span}-wide (dilated) window does not fit argument {what} of spatial shape "
                           f"{tuple(hw)} padded by {list(padding)}")
        out.append((padded - span) // strides[i] + 1)
    return tuple(out)


def conv2d_shape(op, data_shape, weight_shape, strides, padding, dilation, groups):
    """The output shape of conv2d, or an IRError naming the argument that does not fit."""
    _check_window_attrs(op, strides, padding, dilation)
    if len(data_shape) != 4 or len(weight_shape) != 4:
        raise op.error(f"data must be NCHW and weight OIHW (4-d), got data {tuple(data_shape)} and "
                       f"weight {tuple(weight_shape)}")
    n, c, h, w = data_shape
    o, cg, kh, kw = weight_shape
    if groups < 1 or c % groups or o % groups:
        raise op.error(f"groups={groups} must divide the {c} input and {o} output channels")
    if cg * groups != c:
        raise op.error(f"weight of shape {tuple(weight_shape)} expects {cg * groups} input channels "
                       f"(groups={groups}), data of shape {tuple(data_shape)} has {c}")
    if kh < 1 or kw < 1:
        raise op.error(f"weight of shape {tuple(weight_shape)} has an empty kernel")
    return (n, o) + _out_hw(op, (h, w), (kh, kw), strides, padding, dilation)


def pool2d_shape(op, data_shape, pool_size, strides, padding, dilation, ceil_mode):
    """The pooled shape, as Relax infers it: floor((H + pads - span) / stride) + 1, or ceil with ceil_mode."""
    _check_window_attrs(op, strides, padding, dilation)
    if len(pool_size) != 2 or min(pool_size) < 1:
        raise op.error(f"pool_size must be 2 integers >= 1, got {list(pool_size)}")
    if len(data_shape) != 4:
        raise op.error(f"argument data must be NCHW (4-d), got shape {tuple(data_shape)}")
    out_hw = pool_out_hw(op, data_shape[2:], pool_size, strides, padding, dilation, ceil_mode)
    for i in range(2):
        real = window_taps(data_shape[2 + i], pool_size[i], strides[i], padding[i], dilation[i], out_hw[i], False)
        if real.size and real.min() == 0:
            # Relax would pool padding alone here (PyTorch drops such a window); refuse rather than guess
            raise op.error(f"window {int(real.argmin())} along axis {2 + i} covers only padding (data of shape "
                           f"{tuple(data_shape)}, pool_size {list(pool_size)}, strides {list(strides)}, padding "
                           f"{list(padding)}, ceil_mode={ceil_mode}); lower the padding or the stride")
    return tuple(data_shape[:2]) + out_hw


def pool_out_hw(op, hw, pool_size, strides, padding, dilation, ceil_mode) -> tuple[int, ...]:
    out = []
    for i, (size, k) in enumerate(zip(hw, pool_size, strict=True)):
        span = dilation[i] * (k - 1) + 1
        room = size + padding[i] + padding[i + 2] - span
        if room < 0:
            raise op.error(f"the {span}-wide (dilated) window does not fit argument data of spatial shape "
                           f"{tuple(hw)} padded by {list(padding)}")
        out.append((room + (strides[i] - 1 if ceil_mode else 0)) // strides[i] + 1)
    return tuple(out)


def window_taps(size, k, stride, before, dilation, out, include_pad, after=0):
    """For each of `out` windows along one axis, how many of its k taps read the input (include_pad: the
    input or its explicit padding, never the extra room ceil_mode adds): avg_pool2d's divisors."""
    taps = (np.arange(out) * stride - before)[:, None] + dilation * np.arange(k)[None, :]
    lo, hi = (-before, size + after - 1) if include_pad else (0, size - 1)
    return ((taps >= lo) & (taps <= hi)).sum(axis=1)

# ---------------------------------------------------------------- window helpers


def _pad(xp, x, padding, value=0):
    top, left, bottom, right = padding
    if not any(padding):
        return x
    return xp.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right)), constant_values=value)


def _windows(xp, padded, kernel, strides, dilation, out_hw):
    """A read-only view (N, C, Ho, Wo, kh, kw) of every window of an already padded input."""
    n, c = padded.shape[:2]
    s = padded.strides
    return xp.lib.stride_tricks.as_strided(
        padded, shape=(n, c) + tuple(out_hw) + tuple(kernel),
        strides=(s[0], s[1], s[2] * strides[0], s[3] * strides[1], s[2] * dilation[0], s[3] * dilation[1]))


def _scatter_windows(xp, cols, in_shape, strides, padding, dilation):
    """The adjoint of _windows after _pad: sums cols (N, C, kh, kw, Ho, Wo) back into (N, C, H, W)."""
    n, c, kh, kw, ho, wo = cols.shape
    h, w = in_shape[2:]
    top, left, bottom, right = padding
    out = xp.zeros((n, c, h + top + bottom, w + left + right), dtype=cols.dtype)
    sh, sw = strides
    if xp is not np:  # CuPy: one atomic scatter kernel (ufunc.at) instead of kh * kw strided adds
        rows = xp.arange(kh)[:, None, None, None] * dilation[0] + xp.arange(ho)[None, None, :, None] * sh
        columns = xp.arange(kw)[None, :, None, None] * dilation[1] + xp.arange(wo)[None, None, None, :] * sw
        xp.add.at(out, (slice(None), slice(None), rows, columns), cols)
        return out[:, :, top:top + h, left:left + w]
    for i in range(kh):
        r = i * dilation[0]
        for j in range(kw):
            q = j * dilation[1]
            out[:, :, r:r + sh * (ho - 1) + 1:sh, q:q + sw * (wo - 1) + 1:sw] += cols[:, :, i, j]
    return out[:, :, top:top + h, left:left + w]


def _im2col(xp, data, kernel, groups, strides, padding, dilation, out_hw):
    """Columns (G, N*Ho*Wo, Cg*kh*kw) of the windows of data."""
    n, c = data.shape[:2]
    win = _windows(xp, _pad(xp, data, padding), kernel, strides, dilation, out_hw)
    win = win.reshape((n, groups, c // groups) + tuple(out_hw) + tuple(kernel))
    # explicit sizes, never -1: NumPy cannot infer a -1 when another dimension is 0 (an empty batch)
    k = c // groups * kernel[0] * kernel[1]
    return win.transpose(1, 0, 3, 4, 2, 5, 6).reshape(groups, n * out_hw[0] * out_hw[1], k)


def _group_matmul(xp, a, b):
    """a[i] @ b[i] for each group, as C-contiguous 2-d products: NumPy runs stacked or transposed
    operands through a loop instead of BLAS, 10-1000x slower at these shapes."""
    def mm(i):
        return xp.ascontiguousarray(a[i]) @ xp.ascontiguousarray(b[i])
    if a.shape[0] == 1:
        return mm(0)[None]
    return xp.stack([mm(i) for i in range(a.shape[0])])


def _grad_matrix(g, groups):
    """The output gradient (N, O, Ho, Wo) as (G, N*Ho*Wo, O/G), matching _im2col's rows."""
    n, o, ho, wo = g.shape
    return g.reshape(n, groups, o // groups, ho, wo).transpose(1, 0, 3, 4, 2).reshape(groups, n * ho * wo,
                                                                                    o // groups)

# ---------------------------------------------------------------- conv2d and its backward helpers


def _infer_conv2d(op, types, strides, padding, dilation, groups):
    data, weight = tensor_arg(op, types, 0), tensor_arg(op, types, 1)
    require_float(op, data, "data")
    dtype = same_dtype(op, types)
    return TensorType(conv2d_shape(op, data.shape, weight.shape, strides, padding, dilation, groups), dtype)


def _conv2d(xp, data, weight, strides, padding, dilation, groups):
    n = data.shape[0]
    o, cg, kh, kw = weight.shape
    out_hw = _out_hw(None, data.shape[2:], (kh, kw), strides, padding, dilation)
    cols = _im2col(xp, data, (kh, kw), groups, strides, padding, dilation, out_hw)
    wmat = weight.reshape(groups, o // groups, cg * kh * kw).transpose(0, 2, 1)
    out = _group_matmul(xp, cols, wmat)  # (G, N*Ho*Wo, O/G)
    return out.reshape((groups, n) + out_hw + (o // groups,)).transpose(1, 0, 4, 2, 3).reshape((n, o) + out_hw)


def _infer_conv2d_input_backward(op, types, strides, padding, dilation, groups, input_shape):
    g, weight = tensor_arg(op, types, 0), tensor_arg(op, types, 1)
    dtype = same_dtype(op, types)
    want = conv2d_shape(op, input_shape, weight.shape, strides, padding, dilation, groups)
    if g.shape != want:
        raise op.error(f"argument output_grad of shape {g.shape} must have the conv2d output shape {want}")
    return TensorType(input_shape, dtype)


def _conv2d_input_backward(xp, g, weight, strides, padding, dilation, groups, input_shape):
    n, o, ho, wo = g.shape
    _, cg, kh, kw = weight.shape
    wmat = weight.reshape(groups, o // groups, cg * kh * kw)
    dcols = _group_matmul(xp, _grad_matrix(g, groups), wmat)  # (G, N*Ho*Wo, K)
    dcols = dcols.reshape(groups, n, ho, wo, cg, kh, kw).transpose(1, 0, 4, 5, 6, 2, 3)
    dcols = dcols.reshape(n, groups * cg, kh, kw, ho, wo)
    return _scatter_windows(xp, dcols, input_shape, strides, padding, dilation)


def _infer_conv2d_weight_backward(op, types, strides, padding, dilation, groups, weight_shape):
    g, data = tensor_arg(op, types, 0), tensor_arg(op, types, 1)
    dtype = same_dtype(op, types)
    want = conv2d_shape(op, data.shape, weight_shape, strides, padding, dilation, groups)
    if g.shape != want:
        raise op.error(f"argument output_grad of shape {g.shape} must have the conv2d output shape {want}")
    return TensorType(weight_shape, dtype)


def _conv2d_weight_backward(xp, g, data, strides, padding, dilation, groups, weight_shape):
    cols = _im2col(xp, data, weight_shape[2:], groups, strides, padding, dilation, g.shape[2:])
    dw = _group_matmul(xp, _grad_matrix(g, groups).transpose(0, 2, 1), cols)  # (G, O/G, Cg*kh*kw)
    return dw.reshape(tuple(weight_shape))


declare("nn.conv2d", ("data", "weight"), _CONV_ATTRS, infer=_infer_conv2d, kernel=_conv2d,
        fixed={"data_layout": ("NCHW",), "kernel_layout": ("OIHW",), "out_layout": ("NCHW", None),
               "out_dtype": ("void", "")})
declare("grad.conv2d_input_backward", ("output_grad", "weight"), _CONV_ATTRS + (Attr("input_shape", "shape"),),
        infer=_infer_conv2d_input_backward, kernel=_conv2d_input_backward)
declare("grad.conv2d_weight_backward", ("output_grad", "data"), _CONV_ATTRS + (Attr("weight_shape", "shape"),),
        infer=_infer_conv2d_weight_backward, kernel=_conv2d_weight_backward)

from . import pool  # noqa: E402,F401  (pooling shares these helpers; importing conv registers it)
