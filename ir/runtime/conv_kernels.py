"""Faster NumPy kernels for 2-D convolution and max pooling, installed over the reference ones of ir/ops/conv.py
and ir/ops/pool.py with `provide_kernel` (same signatures, same values up to float rounding).

Convolution (groups=1, NCHW, on NumPy; anything else runs the reference kernel) is im2col and BLAS, a few
samples at a time: the columns of a chunk of samples, (B, C*kh*kw, Ho*Wo), are filled by kh*kw strided slice
copies and stay in cache for the matmul that follows (W @ cols gives NCHW directly, no transpose of the
output). On pytorch/examples' mnist CNN (conv 32->64, 3x3, 26x26, batch 64, one thread) this ran the forward
in 18 ms against the reference's 43 (one (N*Ho*Wo, K) im2col and a transpose) and torch's 25; numba direct
loops (the inner loop vectorised) took 59 ms, far from BLAS, so there is no numba path here.

Max pooling takes the maximum of kh*kw strided slices instead of reducing a 6-d window view (44 ms -> 1.8 ms
on (64, 64, 24, 24)); its backward finds each window's first maximum (row-major; its last NaN, as torch) by the
same slices and adds the output gradient back slice by slice; where the windows tile the input (stride =
window, mnist's 2x2), each slice's gradient is written into its place of dx instead (14.8 -> 7 ms on the
(64, 64, 24, 24) pool above).
"""
from __future__ import annotations

import math

import numpy as np

from ..ops import conv as _conv_ops  # noqa: F401  (declares the conv and pool ops: their reference kernels)
from ..ops.pool import _geometry
from ..ops.registry import get_op, provide_kernel
from . import numba_conv

_CHUNK_BYTES = 2 << 20  # the im2col columns of one chunk of samples: about L2-sized

_REFERENCE = {name: get_op(name).kernel for name in (
    "nn.conv2d", "grad.conv2d_input_backward", "grad.conv2d_weight_backward", "nn.max_pool2d",
    "grad.max_pool2d_backward", "grad.relu_max_pool2d_backward", "grad.relu_conv2d_input_backward",
    "nn.conv2d_bias_relu")}


def _pad(x, padding, value=0.0):
    top, left, bottom, right = padding
    if not (top or left or bottom or right):
        return x
    return np.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right)), constant_values=value)


def _tap(i, j, strides, dilation, out_hw):
    """The (rows, columns) slices of the padded input that kernel tap (i, j) reads for every output pixel."""
    (sh, sw), (dh, dw), (ho, wo) = strides, dilation, out_hw
    return slice(i * dh, i * dh + sh * (ho - 1) + 1, sh), slice(j * dw, j * dw + sw * (wo - 1) + 1, sw)


def _fill_columns(cols, xpad, kernel, strides, dilation, out_hw):
    """cols (B, C, kh, kw, Ho, Wo) <- every tap's strided slice of xpad (B, C, Hp, Wp)."""
    if numba_conv.fill(cols, xpad, strides, dilation):  # one loop nest where numba is loaded, the same values
        return
    for i in range(kernel[0]):
        for j in range(kernel[1]):
            rows, columns = _tap(i, j, strides, dilation, out_hw)
            cols[:, :, i, j] = xpad[:, :, rows, columns]


def _chunk(c, kernel, out_hw, itemsize):
    return max(1, _CHUNK_BYTES // max(1, c * kernel[0] * kernel[1] * out_hw[0] * out_hw[1] * itemsize))


def _fast(xp, groups, *arrays):
    return xp is np and groups == 1 and all(a.ndim == 4 for a in arrays)


def conv2d(xp, data, weight, strides, padding, dilation, groups, bias=None, out=None, cols=None):
    """nn.conv2d: W (O, C*kh*kw) @ columns, a chunk of samples per batched matmul. `bias` (1, O, 1, 1): the
    chunk's result + bias, then its relu, while it is in cache (nn.conv2d_bias_relu). `out` (the result's shape
    and dtype) and `cols` (conv_columns' shape) may be given (ir.runtime.conv_specialize's planned storage)."""
    if not _fast(xp, groups, data, weight):
        return _REFERENCE["nn.conv2d"](xp, data, weight, strides, padding, dilation, groups)
    n, c = data.shape[:2]
    o, kernel = weight.shape[0], weight.shape[2:]
    xpad = _pad(data, padding)
    out_hw = tuple((xpad.shape[2 + a] - dilation[a] * (kernel[a] - 1) - 1) // strides[a] + 1 for a in range(2))
    dtype = np.result_type(data, weight)
    k, hw = c * kernel[0] * kernel[1], out_hw[0] * out_hw[1]
    wmat = np.ascontiguousarray(weight.reshape(o, k), dtype=dtype)
    result = np.empty((n, o) + out_hw, dtype) if out is None else out
    out = result.reshape(n, o, hw)
    step = _chunk(c, kernel, out_hw, out.itemsize)
    if cols is None:
        cols = np.empty((min(step, n), c) + tuple(kernel) + out_hw, dtype)
    for s in range(0, n, step):
        b = min(step, n - s)
        _fill_columns(cols[:b], xpad[s:s + b], kernel, strides, dilation, out_hw)
        chunk = np.matmul(wmat, cols[:b].reshape(b, k, hw), out=out[s:s + b])
        if bias is not None:  # add(conv, bias) then relu's maximum(x, 0), the ops' own ufuncs in their order
            np.add(chunk, bias.reshape(1, o, 1), out=chunk)
            np.maximum(chunk, chunk.dtype.type(0), out=chunk)
    return result


def conv_columns(data_shape, weight_shape, out_shape, itemsize):
    """The shape of the im2col buffer conv2d fills, one chunk of samples: (B, C, kh, kw, Ho, Wo)."""
    n, c = data_shape[:2]
    kernel, out_hw = tuple(weight_shape[2:]), tuple(out_shape[2:])
    return (min(_chunk(c, kernel, out_hw, itemsize), n), c) + kernel + out_hw


def conv2d_bias_relu(xp, data, weight, bias, strides, padding, dilation, groups, out=None, cols=None):
    """nn.conv2d_bias_relu: relu(conv2d(data, weight) + bias), the bias and relu applied to each chunk of the
    fast kernel's result as it is made (two passes less over the (N, O, Ho, Wo) output)."""
    if not _fast(xp, groups, data, weight) or np.result_type(data, weight) != bias.dtype:
        return _REFERENCE["nn.conv2d_bias_relu"](xp, data, weight, bias, strides, padding, dilation, groups)
    return conv2d(xp, data, weight, strides, padding, dilation, groups, bias=bias, out=out, cols=cols)


def conv2d_weight_backward(xp, g, data, strides, padding, dilation, groups, weight_shape, out=None, cols=None):
    """grad.conv2d_weight_backward: dW = sum over samples of g_n (O, Ho*Wo) @ columns_n^T, computed as its
    transpose columns_n (K, Ho*Wo) @ g_n^T summed in a (K, O) buffer (the wide operand untransposed: mnist's conv2,
    one thread, 15-19% faster than g_n @ columns_n^T, interleaved, and the same bits there); into `out` and with
    `cols` (conv_columns' shape) as the im2col buffer when given."""
    if not _fast(xp, groups, g, data):
        return _REFERENCE["grad.conv2d_weight_backward"](xp, g, data, strides, padding, dilation, groups,
                                                          weight_shape)
    n, o = g.shape[:2]
    c, kernel, out_hw = data.shape[1], tuple(weight_shape[2:]), g.shape[2:]
    k, hw = c * kernel[0] * kernel[1], out_hw[0] * out_hw[1]
    dtype = np.result_type(g, data)
    xpad, gmat = _pad(data, padding), g.reshape(n, o, hw)
    dwt, product = np.zeros((k, o), dtype), np.empty((k, o), dtype)
    step = _chunk(c, kernel, out_hw, dwt.itemsize)
    if cols is None:
        cols = np.empty((min(step, n), c) + kernel + tuple(out_hw), dtype)
    for s in range(0, n, step):
        b = min(step, n - s)
        _fill_columns(cols[:b], xpad[s:s + b], kernel, strides, dilation, out_hw)
        cmat = cols[:b].reshape(b, k, hw)
        for i in range(b):
            dwt += np.matmul(cmat[i], gmat[s + i].T, out=product)
    if out is None:
        return np.ascontiguousarray(dwt.T).reshape(tuple(weight_shape))
    np.copyto(out.reshape(o, k), dwt.T)
    return out


def _zeroed(a):
    a.fill(0)
    return a


def conv2d_input_backward(xp, g, weight, strides, padding, dilation, groups, input_shape, out=None, work=None):
    """grad.conv2d_input_backward (and the transposed convolution): W^T @ g_n, each tap's rows added back. `out`
    (the result's shape and dtype; planned storage): zeroed and added into, where there is no padding. `work`:
    planned flat (widened g, column gradients) buffers of input_backward_work's sizes, else they are allocated."""
    if not _fast(xp, groups, g, weight):
        return _REFERENCE["grad.conv2d_input_backward"](xp, g, weight, strides, padding, dilation, groups,
                                                         input_shape)
    n, o = g.shape[:2]
    c, kernel, out_hw = weight.shape[1], weight.shape[2:], g.shape[2:]
    k, hw = c * kernel[0] * kernel[1], out_hw[0] * out_hw[1]
    dtype = np.result_type(g, weight)
    top, left, bottom, right = padding
    h, w = input_shape[2:]
    if out is not None and not (top or left or bottom or right) and out.dtype == dtype:
        dx = out
        dx.fill(0)
    else:
        dx = np.zeros((n, c, h + top + bottom, w + left + right), dtype)
    wt = np.ascontiguousarray(weight.reshape(o, k).T, dtype=dtype)
    if (tuple(strides) == (1, 1) and tuple(dilation) == (1, 1) and n and c and not numba_conv.usable(dtype)
            and np.isfinite(wt).all()):
        _col2im_wide(dx, wt, g, tuple(kernel), work)
        return dx if dx is out else dx[:, :, top:top + h, left:left + w]
    gmat = g.reshape(n, o, hw)
    step = _chunk(c, kernel, out_hw, dx.itemsize)
    dcols = _work(work, 1, (min(step, n), k, hw), dtype)
    for s in range(0, n, step):
        b = min(step, n - s)
        np.matmul(wt, gmat[s:s + b], out=dcols[:b])
        taps = dcols[:b].reshape((b, c) + tuple(kernel) + tuple(out_hw))
        if numba_conv.add_back(dx[s:s + b], taps, strides, dilation):
            continue
        for i in range(kernel[0]):
            for j in range(kernel[1]):
                rows, columns = _tap(i, j, strides, dilation, out_hw)
                dx[s:s + b, :, rows, columns] += taps[:, :, i, j]
    return dx if dx is out else dx[:, :, top:top + h, left:left + w]


def _work(work, i, shape, dtype):
    """An array of `shape` over the flat planned buffer work[i] (its first elements), or a new one."""
    size = math.prod(shape)
    if work is None or work[i].dtype != dtype or work[i].size < size:
        return np.empty(shape, dtype)
    return work[i][:size].reshape(shape)


def input_backward_work(g_shape, weight_shape, input_shape, padding, strides, dilation, itemsize):
    """The element counts of conv2d_input_backward's two flat work buffers: the widened g of its stride-1 path,
    the column gradients of either path (the larger)."""
    n, o, ho, wo = g_shape
    c, kernel = weight_shape[1], tuple(weight_shape[2:])
    k = c * kernel[0] * kernel[1]
    wide, cols = 0, min(_chunk(c, kernel, (ho, wo), itemsize), n) * k * ho * wo
    if tuple(strides) == (1, 1) and tuple(dilation) == (1, 1):
        wp = input_shape[3] + padding[1] + padding[3]
        step = min(_chunk(c, kernel, (ho, wp), itemsize), n)
        wide, cols = step * o * ho * wp, max(cols, step * k * ho * wp)
    return wide, cols


def _col2im_wide(dx, wt, g, kernel, work=None):
    """dx (N, C, Hp, Wp) += every tap's columns, for stride 1 and no dilation, on the input's row width: g is
    widened with zero columns to (Ho, Wp), so W^T @ g gives each tap's columns as rows of Ho * Wp and tap (i, j)
    lands on the flat plane shifted by i * Wp + j: one add of (B * C, (Ho - 1) * Wp + Wo) per tap, long
    contiguous rows, instead of (B, C, Ho, Wo) strided adds (9 -> about 1.5 ms a batch on mnist's 32x26x26; the
    GEMM grows by Wp / Wo). The widened columns hold W^T @ 0 = 0 for a finite W (the caller's condition: an inf
    weight would make them NaN); NaN or inf in g stay in their own columns, as in the general path."""
    n, o, ho, wo = g.shape
    c, hp, wp = dx.shape[1:]
    (kh, kw), k = kernel, wt.shape[0]
    length = (ho - 1) * wp + wo  # the last row's zero columns would run past the plane
    step = _chunk(c, kernel, (ho, wp), dx.itemsize)
    if work is None:
        wide = np.zeros((min(step, n), o, ho, wp), dx.dtype)
    else:  # planned: other instructions' scratch shares the buffer, so the zero columns are written each call
        wide = _work(work, 0, (min(step, n), o, ho, wp), dx.dtype)
        wide[:, :, :, wo:] = 0
    dcols = _work(work, 1, (min(step, n), k, ho * wp), dx.dtype)
    planes = dx.reshape(n * c, hp * wp)
    for s in range(0, n, step):
        b = min(step, n - s)
        wide[:b, :, :, :wo] = g[s:s + b]
        np.matmul(wt, wide[:b].reshape(b, o, ho * wp), out=dcols[:b])
        taps = dcols[:b].reshape(b, c, kh, kw, ho * wp)
        rows = planes[s * c:(s + b) * c]
        for i in range(kh):
            for j in range(kw):
                at = rows[:, i * wp + j:i * wp + j + length]
                np.add(at, taps[:, :, i, j, :length].reshape(b * c, length), out=at)


def relu_conv2d_input_backward(xp, g, weight, data, strides, padding, dilation, groups, input_shape, out=None,
                               work=None):
    """grad.relu_conv2d_input_backward: the fast input gradient, then 0 written where data <= 0 (in place: the
    fast kernel's result is an array of its own), instead of a where's new array."""
    if not _fast(xp, groups, g, weight):
        return _REFERENCE["grad.relu_conv2d_input_backward"](xp, g, weight, data, strides, padding, dilation,
                                                             groups, input_shape)
    dx = conv2d_input_backward(xp, g, weight, strides, padding, dilation, groups, input_shape, out=out, work=work)
    bits = _SAME_WIDTH_INT.get(dx.dtype.name)
    if bits is None or not (dx.flags.c_contiguous and data.flags.c_contiguous):
        return np.where(data <= 0, np.zeros((), dx.dtype), dx)
    return _zero_where_nonpositive(dx, data, bits)


_SAME_WIDTH_INT = {"float32": np.int32, "float64": np.int64}
_MASK_CHUNK = 1 << 15  # elements: the mask's scratch stays in L2


def _zero_where_nonpositive(dx, data, bits):
    """dx[data <= 0] = +0.0 in place, branchless (a masked copy branches per element, 2x slower on a relu's
    random mask): the bits of dx and'ed with 0 where data <= 0, all ones elsewhere (NaN data keeps dx), a chunk
    at a time."""
    flat, d, ints = dx.reshape(-1), data.reshape(-1), dx.reshape(-1).view(bits)
    step = min(flat.size, _MASK_CHUNK)
    le, mask = np.empty(step, bool), np.empty(step, bits)
    for s in range(0, flat.size, max(step, 1)):
        m = min(step, flat.size - s)
        np.less_equal(d[s:s + m], 0, out=le[:m])
        np.subtract(le[:m].view(np.int8), 1, out=mask[:m], dtype=bits)  # True -> 0, False -> -1 (all bits)
        np.bitwise_and(ints[s:s + m], mask[:m], out=ints[s:s + m])
    return dx


def _pool_taps(data, pool_size, strides, padding, dilation, ceil_mode):
    """(out_hw, padding with ceil_mode's room, the -inf padded data)."""
    out_hw, pad = _geometry(data.shape[2:], pool_size, strides, padding, dilation, ceil_mode)
    return out_hw, pad, _pad(data, pad, -np.inf)


def max_pool2d(xp, data, pool_size, strides, padding, dilation, ceil_mode, out=None):
    """nn.max_pool2d: the maximum of the kh*kw strided slices (NaN propagates, as the window reduction); into
    `out` (planned storage) when given."""
    if xp is not np:
        return _REFERENCE["nn.max_pool2d"](xp, data, pool_size, strides, padding, dilation, ceil_mode)
    out_hw, _, xpad = _pool_taps(data, pool_size, strides, padding, dilation, ceil_mode)
    first = True
    for i in range(pool_size[0]):
        for j in range(pool_size[1]):
            tap = xpad[(slice(None), slice(None)) + _tap(i, j, strides, dilation, out_hw)]
            if first:
                out = tap.copy() if out is None else _copied(out, tap)
                first = False
            else:
                np.maximum(out, tap, out=out)
    return out


def _copied(out, a):
    np.copyto(out, a)
    return out


def max_pool2d_backward(xp, g, data, pool_size, strides, padding, dilation, ceil_mode, out=None, work=None):
    """grad.max_pool2d_backward: g to each window's first maximum (row-major; its last NaN, an all -inf window's
    first tap inside the input: ir.ops.pool._argmax's pick, torch's)."""
    if xp is not np:
        return _REFERENCE["grad.max_pool2d_backward"](xp, g, data, pool_size, strides, padding, dilation,
                                                      ceil_mode)
    out_hw, pad, xpad = _pool_taps(data, pool_size, strides, padding, dilation, ceil_mode)
    if _tiles(pool_size, strides, dilation, pad):
        dx = _numba_pool_backward(g, data, pool_size, False, out)
        return _tiled_max_backward(g, data, pool_size, out_hw, out=out, work=work) if dx is None else dx
    best = max_pool2d(xp, data, pool_size, strides, padding, dilation, ceil_mode)
    taps = [xpad[(slice(None), slice(None)) + _tap(i, j, strides, dilation, out_hw)]
            for i in range(pool_size[0]) for j in range(pool_size[1])]
    nan_hits = _last_nans(taps, best)
    inside = _inside(data.shape[2:], pool_size, strides, dilation, out_hw, pad) if any(pad) else None
    taken, hit = np.zeros(best.shape, bool), np.empty(best.shape, bool)
    dx = np.zeros(xpad.shape, g.dtype)
    for k, tap in enumerate(taps):
        np.equal(tap, best, out=hit)  # never for a NaN maximum
        if inside is not None:  # an all -inf window's first tap inside the input, as torch's (never the padding)
            hit &= inside[k]
        if nan_hits is not None:
            hit |= nan_hits[k]
        hit &= ~taken
        taken |= hit
        dx[(slice(None), slice(None)) + _tap(k // pool_size[1], k % pool_size[1], strides, dilation, out_hw)] += \
            g * hit
    h, w = data.shape[2:]
    return dx[:, :, pad[0]:pad[0] + h, pad[1]:pad[1] + w]


def _last_nans(taps, best):
    """Per tap, where it is its window's last NaN (torch's pick in a window that holds a NaN, ir.ops.pool._argmax),
    or None where no maximum is NaN."""
    nan = np.isnan(best)
    if not nan.any():
        return None
    later, hits = np.zeros(best.shape, bool), [None] * len(taps)
    for k in range(len(taps) - 1, -1, -1):
        isnan = np.isnan(taps[k])
        hits[k] = isnan & ~later
        later |= isnan
    return hits


def _inside(in_hw, pool_size, strides, dilation, out_hw, pad):
    """Per tap, (Ho, Wo): whether it reads the input rather than its padding."""
    rows, columns = (np.arange(out_hw[a])[:, None] * strides[a] + np.arange(pool_size[a])[None, :] * dilation[a]
                     - pad[a] for a in range(2))
    rows, columns = (rows >= 0) & (rows < in_hw[0]), (columns >= 0) & (columns < in_hw[1])
    return [rows[:, i, None] & columns[None, :, j] for i in range(pool_size[0]) for j in range(pool_size[1])]


def relu_max_pool2d_backward(xp, g, data, pool_size, strides, padding, dilation, ceil_mode, out=None,
                             work=None):
    """grad.relu_max_pool2d_backward: where(data <= 0, 0, max_pool2d_backward(g, data)), the mask applied tap
    by tap where the windows tile the input (one pass less over dx than the where, and no mask array)."""
    if xp is not np:
        return _REFERENCE["grad.relu_max_pool2d_backward"](xp, g, data, pool_size, strides, padding, dilation,
                                                           ceil_mode)
    out_hw, pad = _geometry(data.shape[2:], pool_size, strides, padding, dilation, ceil_mode)
    if _tiles(pool_size, strides, dilation, pad):
        dx = _numba_pool_backward(g, data, pool_size, True, out)
        if dx is not None:
            return dx
        if np.isfinite(g, out=np.empty(g.shape, bool) if work is None else work[2]).all():  # work[2]: hit, later
            return _tiled_max_backward(g, data, pool_size, out_hw, nonpositive_to_zero=True, out=out, work=work)
    dx = max_pool2d_backward(xp, g, data, pool_size, strides, padding, dilation, ceil_mode)
    return np.where(data <= 0, np.zeros((), g.dtype), dx)


def _numba_pool_backward(g, data, pool_size, relu, out=None):
    """The tiled max-pool gradient (and relu's mask) as one numba loop nest, into `out` when given, or None where
    NumPy's must run: one pass reading data and g once and writing dx once (mnist's (64, 64, 24, 24), float32,
    one thread: 3-6 ms against 10-15 for NumPy's tap by tap masks)."""
    dx = np.empty(data.shape, g.dtype) if out is None else out
    return dx if numba_conv.pool_backward(dx, g, data, pool_size, relu) else None


def pool_work(g_shape, dtype):
    """(shape, dtype) of the tiled NumPy backward's work arrays: the windows' maxima, then four masks."""
    return [(tuple(g_shape), dtype)] + [(tuple(g_shape), "bool")] * 4


def _tiles(pool_size, strides, dilation, pad):
    return tuple(strides) == tuple(pool_size) and tuple(dilation) == (1, 1) and not any(pad)


def _tiled_max_backward(g, data, pool_size, out_hw, nonpositive_to_zero=False, out=None, work=None):
    """max_pool2d_backward when the windows tile the input (stride = window, no dilation, no padding): every
    input element lies in one window at most, so each tap's gradient g * hit is written into its strided slice
    of dx (no zeroed padded copy, no adds); rows and columns past the last window get 0, as the scatter.
    `nonpositive_to_zero`: 0 where data <= 0 (a relu's backward after it; NaN data keeps its gradient), for a
    finite g only: the mask then joins `hit` (g * False is the same 0 as the where's, after the + 0.0 below),
    where a NaN or inf g would give NaN instead. `work`: planned (best, nan, hit, free, keep) arrays of g's shape
    (pool_work's), else they are allocated."""
    (kh, kw), (ho, wo) = pool_size, out_hw
    h, w = data.shape[2:]
    if out is None:
        dx = np.empty(data.shape, g.dtype) if (h, w) == (ho * kh, wo * kw) else np.zeros(data.shape, g.dtype)
    else:  # planned storage: the rows and columns past the last window still read 0
        dx = out if (h, w) == (ho * kh, wo * kw) else _zeroed(out)
    taps = [(slice(None), slice(None), slice(i, ho * kh, kh), slice(j, wo * kw, kw))
            for i in range(kh) for j in range(kw)]
    best, nan, hit, free, keep = work if work is not None else (None,) * 5
    best = data[taps[0]].copy() if best is None else _copied(best, data[taps[0]])
    for where in taps[1:]:
        np.maximum(best, data[where], out=best)
    nan = np.isnan(best, out=nan)
    nan_hits = _last_nans([data[where] for where in taps], best) if nan.any() else None
    hit = np.empty(best.shape, bool) if hit is None else hit
    first = True  # free: windows whose maximum is not found yet (all of them before the first tap)
    if nonpositive_to_zero and keep is None:
        keep = np.empty(best.shape, bool)
    for k, where in enumerate(taps):
        tap = data[where]
        np.equal(tap, best, out=hit)
        if nan_hits is not None:  # a window's maximum is NaN: its last NaN takes the gradient, as torch's
            hit |= nan_hits[k]
        if not first:
            hit &= free
        if k + 1 < len(taps):  # free and not hit: free > hit, for bools
            free = np.logical_not(hit, out=free) if first else np.greater(free, hit, out=free)
        first = False
        if nonpositive_to_zero:  # not (tap <= 0): tap > 0, or NaN
            np.greater(tap, 0, out=keep)
            if nan_hits is not None:
                keep |= np.isnan(tap)
            hit &= keep
        np.multiply(g, hit, out=dx[where])
    # the reference adds g * hit into zeros: 0.0 + -0.0 is 0.0, so no -0.0 remains (g * False is -0.0 for g < 0)
    return np.add(dx, 0.0, out=dx)


provide_kernel("nn.conv2d", conv2d)
provide_kernel("nn.conv2d_bias_relu", conv2d_bias_relu)
provide_kernel("grad.conv2d_weight_backward", conv2d_weight_backward)
provide_kernel("grad.conv2d_input_backward", conv2d_input_backward)
provide_kernel("grad.relu_conv2d_input_backward", relu_conv2d_input_backward)
provide_kernel("nn.max_pool2d", max_pool2d)
provide_kernel("grad.max_pool2d_backward", max_pool2d_backward)
provide_kernel("grad.relu_max_pool2d_backward", relu_max_pool2d_backward)
