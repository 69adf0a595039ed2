"""2-D and 3-D convolution and 2-D pooling (NCHW / NCDHW data, OIHW / OIDHW weights), with the backward
helpers the VJPs emit (conv*_input_backward is also the transposed convolution: nn.ConvTranspose).

Every kernel works on a strided window view of the padded input, shape (N, C, Ho, Wo, kh, kw),
made by as_strided without copying: convolution is then one (batched) matmul over im2col columns,
pooling one reduction over the last two axes. Scattering back (the input gradients) loops over the
kh * kw kernel offsets, each a vectorized strided slice-add, never over pixels. The helpers take any
number of spatial axes. Padding is every axis's before, then every axis's after: (top, left, bottom,
right) in 2-D, (front, top, left, back, bottom, right) in 3-D, as Relax writes it.
"""
from __future__ import annotations

import numpy as np

from ..types import TensorType
from .common import require_float, same_dtype
from .registry import Attr, declare, tensor_arg

_WINDOW_ATTRS = (Attr("strides", "ints", (1, 1)), Attr("padding", "ints", (0, 0, 0, 0)),
                 Attr("dilation", "ints", (1, 1)))
_CONV_ATTRS = _WINDOW_ATTRS + (Attr("groups", "int", 1),)
_CONV3D_ATTRS = (Attr("strides", "ints", (1, 1, 1)), Attr("padding", "ints", (0,) * 6),
                 Attr("dilation", "ints", (1, 1, 1)), Attr("groups", "int", 1))
_POOL_ATTRS = (Attr("pool_size", "ints"),) + _WINDOW_ATTRS + (Attr("ceil_mode", "bool", False),)

# ---------------------------------------------------------------- shapes


def _check_window_attrs(op, strides, padding, dilation, nd=2):
    for name, value, n, low in (("strides", strides, nd, 1), ("padding", padding, 2 * nd, 0),
                                ("dilation", dilation, nd, 1)):
        if len(value) != n or any(v < low for v in value):
            raise op.error(f"{name} must be {n} integers >= {low}, got {list(value)}")


def _out_hw(op, hw, kernel, strides, padding, dilation, what="data"):
    out, nd = [], len(hw)
    for i, (size, k) in enumerate(zip(hw, kernel, strict=True)):
        span = dilation[i] * (k - 1) + 1
        padded = size + padding[i] + padding[i + nd]
        if padded < span:
            raise op.error(f"the {span}-wide (dilated) window does not fit argument {what} of spatial shape "
                           f"{tuple(hw)} padded by {list(padding)}")
        out.append((padded - span) // strides[i] + 1)
    return tuple(out)


def conv_shape(op, data_shape, weight_shape, strides, padding, dilation, groups, nd=2):
    """The output shape of conv2d (nd=2) or conv3d (nd=3), or an IRError naming the argument that does not fit."""
    _check_window_attrs(op, strides, padding, dilation, nd)
    layout = "NCHW and weight OIHW" if nd == 2 else "NCDHW and weight OIDHW"
    if len(data_shape) != nd + 2 or len(weight_shape) != nd + 2:
        raise op.error(f"data must be {layout} ({nd + 2}-d), got data {tuple(data_shape)} and "
                       f"weight {tuple(weight_shape)}")
    n, c = data_shape[:2]
    o, cg = weight_shape[:2]
    if groups < 1 or c % groups or o % groups:
        raise op.error(f"groups={groups} must divide the {c} input and {o} output channels")
    if cg * groups != c:
        raise op.error(f"weight of shape {tuple(weight_shape)} expects {cg * groups} input channels "
                       f"(groups={groups}), data of shape {tuple(data_shape)} has {c}")
    if min(weight_shape[2:]) < 1:
        raise op.error(f"weight of shape {tuple(weight_shape)} has an empty kernel")
    return (n, o) + _out_hw(op, data_shape[2:], weight_shape[2:], strides, padding, dilation)


def pool2d_shape(op, data_shape, pool_size, strides, padding, dilation, ceil_mode):
    """The pooled shape, as Relax infers it: floor((H + pads - span) / stride) + 1, or ceil with ceil_mode
    less a last window that would start in the bottom/right padding."""
    _check_window_attrs(op, strides, padding, dilation)
    if len(pool_size) != 2 or min(pool_size) < 1:
        raise op.error(f"pool_size must be 2 integers >= 1, got {list(pool_size)}")
    if len(data_shape) != 4:
        raise op.error(f"argument data must be NCHW (4-d), got shape {tuple(data_shape)}")
    out_hw = pool_out_hw(op, data_shape[2:], pool_size, strides, padding, dilation, ceil_mode)
    for i in range(2):
        real = window_taps(data_shape[2 + i], pool_size[i], strides[i], padding[i], dilation[i], out_hw[i], False)
        if real.size and real.min() == 0:
            # padding wider than the window: Relax would pool padding alone; refuse rather than guess
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
        n = (room + (strides[i] - 1 if ceil_mode else 0)) // strides[i] + 1
        if ceil_mode and (n - 1) * strides[i] >= size + padding[i]:
            n -= 1  # the last window would start in the bottom/right padding: Relax (TVM 0.27), as PyTorch, drops it
        out.append(n)
    return tuple(out)


def window_taps(size, k, stride, before, dilation, out, include_pad, after=0):
    """For each of `out` windows along one axis, how many of its k taps read the input (include_pad: the
    input or its explicit padding, never the extra room ceil_mode adds): avg_pool2d's divisors."""
    taps = (np.arange(out) * stride - before)[:, None] + dilation * np.arange(k)[None, :]
    lo, hi = (-before, size + after - 1) if include_pad else (0, size - 1)
    return ((taps >= lo) & (taps <= hi)).sum(axis=1)

# ---------------------------------------------------------------- window helpers


def _pad(xp, x, padding, value=0):
    if not any(padding):
        return x
    nd = len(padding) // 2
    widths = ((0, 0), (0, 0)) + tuple((padding[i], padding[i + nd]) for i in range(nd))
    return xp.pad(x, widths, constant_values=value)


def _windows(xp, padded, kernel, strides, dilation, out_hw):
    """A read-only view (N, C, *out, *kernel) of every window of an already padded input."""
    s = padded.strides
    return xp.lib.stride_tricks.as_strided(
        padded, shape=tuple(padded.shape[:2]) + tuple(out_hw) + tuple(kernel),
        strides=s[:2] + tuple(a * b for a, b in zip(s[2:], strides, strict=True))
        + tuple(a * b for a, b in zip(s[2:], dilation, strict=True)))


def _scatter_windows(xp, cols, in_shape, strides, padding, dilation):
    """The adjoint of _windows after _pad: sums cols (N, C, *kernel, *out) back into in_shape (N, C, *spatial)."""
    nd = len(in_shape) - 2
    n, c = cols.shape[:2]
    kernel, out_sp = cols.shape[2:2 + nd], cols.shape[2 + nd:]
    padded = tuple(in_shape[2 + i] + padding[i] + padding[i + nd] for i in range(nd))
    out = xp.zeros((n, c) + padded, dtype=cols.dtype)
    crop = (slice(None), slice(None)) + tuple(slice(padding[i], padding[i] + in_shape[2 + i]) for i in range(nd))
    if xp is not np:  # CuPy: one atomic scatter kernel (ufunc.at) instead of one strided add per kernel offset
        index = []
        for i in range(nd):  # axis i's coordinate, shaped to broadcast over (*kernel, *out)
            shape_k = [1] * (2 * nd)
            shape_k[i] = kernel[i]
            shape_o = [1] * (2 * nd)
            shape_o[nd + i] = out_sp[i]
            index.append(xp.arange(kernel[i]).reshape(shape_k) * dilation[i]
                         + xp.arange(out_sp[i]).reshape(shape_o) * strides[i])
        xp.add.at(out, (slice(None), slice(None)) + tuple(index), cols)
        return out[crop]
    for offset in np.ndindex(*kernel):
        where = tuple(slice(offset[i] * dilation[i], offset[i] * dilation[i] + strides[i] * (out_sp[i] - 1) + 1,
                            strides[i]) for i in range(nd))
        out[(slice(None), slice(None)) + where] += cols[(slice(None), slice(None)) + offset]
    return out[crop]


def _im2col(xp, data, kernel, groups, strides, padding, dilation, out_hw):
    """Columns (G, N*prod(out), Cg*prod(kernel)) of the windows of data."""
    n, c = data.shape[:2]
    nd = len(kernel)
    win = _windows(xp, _pad(xp, data, padding), kernel, strides, dilation, out_hw)
    win = win.reshape((n, groups, c // groups) + tuple(out_hw) + tuple(kernel))
    # explicit sizes, never -1: NumPy cannot infer a -1 when another dimension is 0 (an empty batch)
    k = c // groups * int(np.prod(kernel))
    axes = (1, 0) + tuple(range(3, 3 + nd)) + (2,) + tuple(range(3 + nd, 3 + 2 * nd))
    return win.transpose(axes).reshape(groups, n * int(np.prod(out_hw)), k)


def _group_matmul(xp, a, b):
    """a[i] @ b[i] for each group, as C-contiguous 2-d products: NumPy runs stacked or transposed
    operands through a loop instead of BLAS, 10-1000x slower at these shapes."""
    def mm(i):
        return xp.ascontiguousarray(a[i]) @ xp.ascontiguousarray(b[i])
    if a.shape[0] == 1:
        return mm(0)[None]
    return xp.stack([mm(i) for i in range(a.shape[0])])


def _grad_matrix(g, groups):
    """The output gradient (N, O, *out) as (G, N*prod(out), O/G), matching _im2col's rows."""
    n, o = g.shape[:2]
    nd = g.ndim - 2
    axes = (1, 0) + tuple(range(3, 3 + nd)) + (2,)
    return g.reshape((n, groups, o // groups) + g.shape[2:]).transpose(axes).reshape(
        groups, n * int(np.prod(g.shape[2:])), o // groups)

# ---------------------------------------------------------------- conv2d and its backward helpers


def _infer_conv2d(op, types, strides, padding, dilation, groups):
    data, weight = tensor_arg(op, types, 0), tensor_arg(op, types, 1)
    require_float(op, data, "data")
    dtype = same_dtype(op, types)
    return TensorType(conv_shape(op, data.shape, weight.shape, strides, padding, dilation, groups, _conv_nd(op)),
                      dtype)


def _conv2d(xp, data, weight, strides, padding, dilation, groups):
    n, nd = data.shape[0], data.ndim - 2
    o, cg = weight.shape[:2]
    kernel = weight.shape[2:]
    out_hw = _out_hw(None, data.shape[2:], kernel, strides, padding, dilation)
    cols = _im2col(xp, data, kernel, groups, strides, padding, dilation, out_hw)
    wmat = weight.reshape(groups, o // groups, cg * int(np.prod(kernel))).transpose(0, 2, 1)
    out = _group_matmul(xp, cols, wmat)  # (G, N*prod(out), O/G)
    axes = (1, 0, 2 + nd) + tuple(range(2, 2 + nd))
    return out.reshape((groups, n) + out_hw + (o // groups,)).transpose(axes).reshape((n, o) + out_hw)


def _conv_nd(op):
    return 3 if op.name.startswith(("nn.conv3d", "grad.conv3d")) else 2


def _infer_conv2d_input_backward(op, types, strides, padding, dilation, groups, input_shape):
    g, weight = tensor_arg(op, types, 0), tensor_arg(op, types, 1)
    dtype = same_dtype(op, types)
    want = conv_shape(op, input_shape, weight.shape, strides, padding, dilation, groups, _conv_nd(op))
    if g.shape != want:
        raise op.error(f"argument output_grad of shape {g.shape} must have the conv{_conv_nd(op)}d output shape {want} "
                       f"(input shape {tuple(input_shape)}, weight {weight.shape})")
    return TensorType(input_shape, dtype)


def _conv2d_input_backward(xp, g, weight, strides, padding, dilation, groups, input_shape):
    n, o = g.shape[:2]
    out_sp, nd = g.shape[2:], g.ndim - 2
    cg, kernel = weight.shape[1], weight.shape[2:]
    wmat = weight.reshape(groups, o // groups, cg * int(np.prod(kernel)))
    dcols = _group_matmul(xp, _grad_matrix(g, groups), wmat)  # (G, N*prod(out), K)
    axes = (1, 0, 2 + nd) + tuple(range(3 + nd, 3 + 2 * nd)) + tuple(range(2, 2 + nd))
    dcols = dcols.reshape((groups, n) + out_sp + (cg,) + kernel).transpose(axes)
    dcols = dcols.reshape((n, groups * cg) + kernel + out_sp)
    return _scatter_windows(xp, dcols, input_shape, strides, padding, dilation)


def _infer_conv2d_bias_relu(op, types, strides, padding, dilation, groups):
    out = _infer_conv2d(op, types[:2], strides, padding, dilation, groups)
    bias = tensor_arg(op, types, 2)
    if bias.shape != (1, out.shape[1], 1, 1) or bias.dtype != out.dtype:
        raise op.error(f"argument bias {bias} must be (1, {out.shape[1]}, 1, 1) of {out.dtype}")
    return out


def _conv2d_bias_relu(xp, data, weight, bias, strides, padding, dilation, groups):
    """relu(conv2d(data, weight) + bias): a conv layer with its bias and relu (maximum(x, 0), as nn.relu); made by
    ir.runtime.pool_relu after differentiation (the relu's output is what the backward reads)."""
    return xp.maximum(_conv2d(xp, data, weight, strides, padding, dilation, groups) + bias, xp.zeros((), bias.dtype))


def _infer_relu_conv2d_input_backward(op, types, strides, padding, dilation, groups, input_shape):
    out = _infer_conv2d_input_backward(op, types[:2], strides, padding, dilation, groups, input_shape)
    mask = tensor_arg(op, types, 2)
    if mask.shape != out.shape or mask.dtype != out.dtype:
        raise op.error(f"argument data {mask} must have the input's shape and dtype {out}")
    return out


def _relu_conv2d_input_backward(xp, g, weight, data, strides, padding, dilation, groups, input_shape):
    """where(data <= 0, 0, conv2d_input_backward(g, weight)): the input gradient through a relu whose output
    `data` the convolution read (relu's backward reads its own output); made by ir.runtime.pool_relu."""
    dx = _conv2d_input_backward(xp, g, weight, strides, padding, dilation, groups, input_shape)
    return xp.where(data <= 0, xp.zeros((), dx.dtype), dx)


def _infer_conv2d_weight_backward(op, types, strides, padding, dilation, groups, weight_shape):
    g, data = tensor_arg(op, types, 0), tensor_arg(op, types, 1)
    dtype = same_dtype(op, types)
    want = conv_shape(op, data.shape, weight_shape, strides, padding, dilation, groups, _conv_nd(op))
    if g.shape != want:
        raise op.error(f"argument output_grad of shape {g.shape} must have the conv{_conv_nd(op)}d output shape {want}")
    return TensorType(weight_shape, dtype)


def _conv2d_weight_backward(xp, g, data, strides, padding, dilation, groups, weight_shape):
    cols = _im2col(xp, data, weight_shape[2:], groups, strides, padding, dilation, g.shape[2:])
    dw = _group_matmul(xp, _grad_matrix(g, groups).transpose(0, 2, 1), cols)  # (G, O/G, Cg*prod(kernel))
    return dw.reshape(tuple(weight_shape))


declare("nn.conv2d", ("data", "weight"), _CONV_ATTRS, infer=_infer_conv2d, kernel=_conv2d,
        fixed={"data_layout": ("NCHW",), "kernel_layout": ("OIHW",), "out_layout": ("NCHW", None),
               "out_dtype": ("void", "")})
declare("grad.conv2d_input_backward", ("output_grad", "weight"), _CONV_ATTRS + (Attr("input_shape", "shape"),),
        infer=_infer_conv2d_input_backward, kernel=_conv2d_input_backward)
declare("nn.conv2d_bias_relu", ("data", "weight", "bias"), _CONV_ATTRS, infer=_infer_conv2d_bias_relu,
        kernel=_conv2d_bias_relu, differentiable=False)  # the runtime's rewrite, after differentiation
declare("grad.relu_conv2d_input_backward", ("output_grad", "weight", "data"),
        _CONV_ATTRS + (Attr("input_shape", "shape"),), infer=_infer_relu_conv2d_input_backward,
        kernel=_relu_conv2d_input_backward, differentiable=False)  # the runtime's rewrite, after differentiation
declare("grad.conv2d_weight_backward", ("output_grad", "data"), _CONV_ATTRS + (Attr("weight_shape", "shape"),),
        infer=_infer_conv2d_weight_backward, kernel=_conv2d_weight_backward)

# 3-D: the same kernels (they take any number of spatial axes), NCDHW data and OIDHW weights
declare("nn.conv3d", ("data", "weight"), _CONV3D_ATTRS, infer=_infer_conv2d, kernel=_conv2d,
        fixed={"data_layout": ("NCDHW",), "kernel_layout": ("OIDHW",), "out_layout": ("NCDHW", None),
               "out_dtype": ("void", "")})
declare("grad.conv3d_input_backward", ("output_grad", "weight"), _CONV3D_ATTRS + (Attr("input_shape", "shape"),),
        infer=_infer_conv2d_input_backward, kernel=_conv2d_input_backward)
declare("grad.conv3d_weight_backward", ("output_grad", "data"), _CONV3D_ATTRS + (Attr("weight_shape", "shape"),),
        infer=_infer_conv2d_weight_backward, kernel=_conv2d_weight_backward)

