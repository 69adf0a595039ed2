"""torch's 2-D pooling options (ceil_mode, count_include_pad, divisor_override) on the IR's pooling ops.

torch and Relax (TVM 0.27) both drop a last ceil_mode window that would start in the right padding; the
layer still reaches torch's window count with ceil_mode=False and the extra room added to the bottom/right
padding, which keeps the IR op's divisor rule out of the way;
the max pads with -inf, so the extra room changes nothing. An average divides by torch's divisor: where the
IR op's own divisor (the taps it counts, the extra room included when count_include_pad) differs, or a
divisor_override is given, the result is scaled by the constant ratio of the two.
"""
from __future__ import annotations

import numpy as np

import tracer
from ir.ops.conv import window_taps
from tracer import Tensor
from tracer.tensor import apply

from .resample import adaptive_bounds, adaptive_sizes, constant


def _pair(fn: str, name: str, v, low: int) -> tuple[int, int]:
    items = tuple(v) if isinstance(v, (tuple, list)) else (v, v)
    if len(items) != 2 or not all(isinstance(i, (int, np.integer)) and not isinstance(i, bool) for i in items):
        raise ValueError(f"{fn}: {name} must be an int or a pair of ints, got {v!r}")
    if min(items) < low:
        raise ValueError(f"{fn}: {name} must be >= {low}, got {v!r}")
    return int(items[0]), int(items[1])


def torch_out(size: int, k: int, s: int, p: int, d: int, ceil_mode: bool) -> int:
    """torch's pooled length along one axis (pooling_output_shape)."""
    room = size + 2 * p - d * (k - 1) - 1
    out = (room + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= size + p:  # the last window would start in the right padding
        out -= 1
    return out


def geometry(fn: str, x: Tensor, kernel_size, stride, padding, dilation, ceil_mode: bool) -> dict:
    """The IR attributes giving torch's windows: pool_size, strides, dilation, padding (extra room at the end)."""
    if x.ndim != 4:
        raise ValueError(f"{fn}: input must be NCHW (4-d), got shape {x.shape}")
    k = _pair(fn, "kernel_size", kernel_size, 1)
    s = k if stride is None or (isinstance(stride, (tuple, list)) and not stride) else _pair(fn, "stride", stride, 1)
    p, d = _pair(fn, "padding", padding, 0), _pair(fn, "dilation", dilation, 1)
    if any(2 * pi > ki for pi, ki in zip(p, k, strict=True)):
        raise ValueError(f"{fn}: padding {padding} must be at most half of kernel_size {kernel_size} (as torch)")
    out, extra = [], []
    for i in range(2):
        o = torch_out(x.shape[2 + i], k[i], s[i], p[i], d[i], ceil_mode)
        if o < 1:
            raise ValueError(f"{fn}: input of shape {x.shape} is too small for kernel_size {kernel_size}, "
                             f"padding {padding}, dilation {dilation} (output size {o} along axis {2 + i})")
        out.append(o)
        extra.append(max(0, (o - 1) * s[i] + d[i] * (k[i] - 1) + 1 - (x.shape[2 + i] + 2 * p[i])))
    return dict(pool_size=k, strides=s, dilation=d, padding=(p[0], p[1], p[0] + extra[0], p[1] + extra[1]),
                ceil_mode=False, out=tuple(out))


def max_pool2d(x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """torch.nn.functional.max_pool2d's windows, ceil_mode included; return_indices adds torch's int64 indices
    (row * W + column in its plane of each window's first maximum, or its last NaN, as torch's)."""
    x = tracer.tensor(x) if not isinstance(x, Tensor) else x
    attrs = geometry("max_pool2d", x, kernel_size, stride, padding, dilation, bool(ceil_mode))
    attrs.pop("out")
    y = apply("nn.max_pool2d", [x], **attrs)
    return (y, apply("nn.max_pool2d_indices", [x], **attrs)) if return_indices else y


def _as_2d(fn: str, x, *ints):
    """(N, C, L) or (C, L) input as (N, C, 1, L), and each int-or-1-tuple argument as its 2-d pair."""
    x = tracer.tensor(x) if not isinstance(x, Tensor) else x
    if x.ndim not in (2, 3):
        raise ValueError(f"{fn}: input must be (N, C, L) or (C, L), got shape {x.shape}")
    pairs = []
    for name, v, first in ints:
        if v is None or isinstance(v, (tuple, list)) and not v:
            pairs.append(None)
            continue
        items = tuple(v) if isinstance(v, (tuple, list)) else (v,)
        if len(items) != 1:
            raise ValueError(f"{fn}: {name} must be an int or a 1-tuple, got {v!r}")
        pairs.append((first, items[0]))
    return x, tracer.reshape(x, x.shape[:-1] + (1, x.shape[-1])) if x.ndim == 3 else \
        tracer.reshape(x, (1, x.shape[0], 1, x.shape[1])), pairs


def _from_2d(x: Tensor, y: Tensor) -> Tensor:
    return tracer.reshape(y, x.shape[:-1] + (y.shape[-1],))


def max_pool1d(x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """torch.nn.functional.max_pool1d, as max_pool2d of height 1 (indices: positions along L)."""
    x, x2, (k, s, p, d) = _as_2d("max_pool1d", x, ("kernel_size", kernel_size, 1), ("stride", stride, 1),
                                 ("padding", padding, 0), ("dilation", dilation, 1))
    out = max_pool2d(x2, k, s, p, d, ceil_mode, return_indices)
    return (_from_2d(x, out[0]), _from_2d(x, out[1])) if return_indices else _from_2d(x, out)


def avg_pool1d(x, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True) -> Tensor:
    """torch.nn.functional.avg_pool1d, as avg_pool2d of height 1."""
    x, x2, (k, s, p) = _as_2d("avg_pool1d", x, ("kernel_size", kernel_size, 1), ("stride", stride, 1),
                              ("padding", padding, 0))
    return _from_2d(x, avg_pool2d(x2, k, s, p, ceil_mode, count_include_pad))


def _torch_divisor(size, k, s, p, out, include_pad) -> np.ndarray:
    start = np.arange(out) * s - p
    end = np.minimum(start + k, size + p)
    if not include_pad:
        start, end = np.maximum(start, 0), np.minimum(end, size)
    return end - start


def avg_pool2d(x, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None) -> Tensor:
    """torch.nn.functional.avg_pool2d: ceil_mode, count_include_pad and divisor_override as torch's."""
    x = tracer.tensor(x) if not isinstance(x, Tensor) else x
    if divisor_override is not None and (isinstance(divisor_override, bool) or
                                         not isinstance(divisor_override, (int, np.integer)) or divisor_override == 0):
        raise ValueError(f"avg_pool2d: divisor_override must be a nonzero int, got {divisor_override!r}")
    g = geometry("avg_pool2d", x, kernel_size, stride, padding, 1, bool(ceil_mode))
    out = g.pop("out")
    include = bool(count_include_pad)
    y = apply("nn.avg_pool2d", [x], count_include_pad=include, **g)
    k, s, pad = g["pool_size"], g["strides"], g["padding"]
    ir_div = [window_taps(x.shape[2 + i], k[i], s[i], pad[i], 1, out[i], include, pad[i + 2]) for i in range(2)]
    ir_div = np.outer(*ir_div).astype("float64")
    if divisor_override is not None:
        want = np.full(out, float(divisor_override))
    else:
        want = np.outer(*[_torch_divisor(x.shape[2 + i], k[i], s[i], pad[i], out[i], include)
                          for i in range(2)]).astype("float64")
    if np.array_equal(ir_div, want):
        return y
    ratio = tracer.tensor((ir_div / want).astype(x.dtype), device=x.device if x._var is None else None)
    return y * ratio  # sum / want, from the IR's sum / ir_div


def _torch_pick(g: Tensor, positions: Tensor) -> Tensor:
    """The tap torch's max pooling takes along g's last axis (`val > max or isnan(val)`): the first maximum, the
    last NaN where there is one; `positions` numbers the taps 1..width (int64, 0 for a tap never to pick)."""
    nan_at = tracer.astype(tracer.isnan(g), "int64") * positions  # the last NaN has the largest
    last_nan = tracer.argmax(nan_at, axis=-1)
    return tracer.where(tracer.max(nan_at, axis=-1) > 0, last_nan, tracer.argmax(g, axis=-1))


def adaptive_max_pool(fn: str, x, output_size, nd: int, return_indices: bool):
    """torch's adaptive max pooling over the last nd axes: each axis's windows (torch's start/end rule, sizes
    differing by one when the output does not divide the input) gathered to the widest window's size, the
    narrower ones repeating their first tap (a repeat after the first cannot be torch's pick), then the tap torch
    picks (its first maximum, its last NaN) read from the gathered taps, so the gradient goes to it alone, as
    torch's (a max reduction's would split between ties). Indices: torch's flat index in the plane."""
    x = tracer.tensor(x) if not isinstance(x, Tensor) else x
    out = adaptive_sizes(fn, x, output_size, nd)
    spatial = x.shape[-nd:]
    lead = x.shape[:-nd]
    taps, real, g = [], np.ones((), bool), x
    for i in range(nd):
        start, end = adaptive_bounds(spatial[i], out[i])
        width = int((end - start).max())
        tap = start[:, None] + np.arange(width)[None, :]
        shape = [1] * (2 * nd)
        shape[i], shape[nd + i] = out[i], width
        real = real & (tap < end[:, None]).reshape(shape)  # (*out, *widths): the taps that are no repeat
        tap = np.where(tap < end[:, None], tap, start[:, None])  # (out, width)
        taps.append(tap)
        g = tracer.take(g, constant(tap.reshape(-1), x), axis=len(lead) + i)
    widths = [t.shape[1] for t in taps]
    g = tracer.reshape(g, lead + tuple(d for i in range(nd) for d in (out[i], widths[i])))
    k = len(lead)
    g = tracer.permute_dims(g, list(range(k)) + [k + 2 * i for i in range(nd)] + [k + 2 * i + 1 for i in range(nd)])
    width = int(np.prod(widths))
    g = tracer.reshape(g, lead + tuple(out) + (width,))
    positions = (np.arange(1, width + 1) * real.reshape(tuple(out) + (width,))).astype(np.int64)  # repeats: 0
    pick = _torch_pick(g, constant(positions, x))
    values = tracer.squeeze(tracer.take_along_dim(g, tracer.expand_dims(pick, -1), dim=-1), -1)
    if not return_indices:
        return values
    flat = np.zeros(tuple(out) + tuple(widths), dtype=np.int64)  # the plane index of every gathered tap
    for i in range(nd):
        stride = int(np.prod(spatial[i + 1:]))
        shape = [1] * (2 * nd)
        shape[i], shape[nd + i] = out[i], widths[i]
        flat = flat + (taps[i].reshape(shape) * stride)
    flat = flat.reshape(tuple(out) + (-1,))
    which = tracer.expand_dims(pick, -1) == constant(np.arange(flat.shape[-1]), x)
    return values, tracer.sum(tracer.astype(which, "int64") * constant(flat, x), axis=-1)


def adaptive_max_pool1d(input, output_size, return_indices=False):
    """torch.nn.functional.adaptive_max_pool1d: (N, C, L) or (C, L)."""
    return adaptive_max_pool("adaptive_max_pool1d", input, output_size, 1, return_indices)


def adaptive_max_pool2d(input, output_size, return_indices=False):
    """torch.nn.functional.adaptive_max_pool2d: any output size (None keeps that axis), torch's windows."""
    return adaptive_max_pool("adaptive_max_pool2d", input, output_size, 2, return_indices)


__all__ = ["adaptive_max_pool1d", "adaptive_max_pool2d", "avg_pool1d", "avg_pool2d", "geometry", "max_pool1d",
           "max_pool2d", "torch_out"]
