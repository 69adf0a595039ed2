"""Resampling as torch's: F.interpolate / nn.Upsample, adaptive average pooling, PixelShuffle / PixelUnshuffle,
F.unfold / F.fold (nn.Unfold / nn.Fold).

Every one is composed from IR ops that already have VJPs, so values and gradients need no new kernel:
- interpolate and adaptive average pooling act on each spatial axis separately, each output position a fixed
  combination of input positions: nearest modes gather (take along the axis, exact, its gradient a
  scatter-add), linear modes and the adaptive average multiply by a constant (out, in) matrix along the axis
  (torch's source-index rules, align_corners and given scale factors included, build the matrix);
- unfold is a grouped conv2d with a one-hot (identity) weight, fold its adjoint (conv2d_input_backward), so
  overlapping blocks are summed as torch's col2im sums them.
"""
from __future__ import annotations

import math

import numpy as np

import tracer
from tracer.tensor import Tensor, apply

from .conv import ntuple
from .module import Module

_LINEAR = {"linear": 1, "bilinear": 2, "trilinear": 3}
_MODES = ("nearest", "nearest-exact", "linear", "bilinear", "trilinear", "area")


def _tensor(x) -> Tensor:
    return x if isinstance(x, Tensor) else tracer.tensor(x)


def constant(array: np.ndarray, like: Tensor) -> Tensor:
    """A constant tensor on `like`'s device (eagerly; inside a trace constants are placed by the executor)."""
    return tracer.tensor(array, device=like.device if like._var is None else None)


def _along(x: Tensor, axis: int, matrix: np.ndarray) -> Tensor:
    """x with axis `axis` replaced by matrix (out, in) @ that axis."""
    last = x.ndim - 1
    order = list(range(x.ndim))
    order[axis], order[last] = last, axis
    moved = x if axis == last else tracer.permute_dims(x, order)
    y = tracer.matmul(moved, constant(np.ascontiguousarray(matrix.T).astype(x.dtype), x))
    return y if axis == last else tracer.permute_dims(y, order)


def adaptive_bounds(size: int, out: int) -> tuple[np.ndarray, np.ndarray]:
    """torch's adaptive pooling windows: start floor(i * size / out), end ceil((i + 1) * size / out)."""
    i = np.arange(out)
    return (i * size) // out, -((-(i + 1) * size) // out)


def _adaptive_matrix(size: int, out: int) -> np.ndarray:
    start, end = adaptive_bounds(size, out)
    m = np.zeros((out, size))
    for o in range(out):
        m[o, start[o]:end[o]] = 1.0 / (end[o] - start[o])
    return m


def adaptive_sizes(fn: str, x: Tensor, output_size, nd: int) -> tuple[int, ...]:
    """output_size as nd ints, None entries keeping the input's size, as torch."""
    sizes = tuple(output_size) if isinstance(output_size, (tuple, list)) else (output_size,) * nd
    if len(sizes) != nd:
        raise ValueError(f"{fn}: output_size must be an int or {nd} ints (None keeps a size), got {output_size!r}")
    if x.ndim not in (nd + 1, nd + 2):
        raise RuntimeError(f"{fn}: expected a {nd + 1}-d or {nd + 2}-d input, got shape {x.shape}")
    spatial = x.shape[-nd:]
    out = tuple(int(spatial[i]) if s is None else int(s) for i, s in enumerate(sizes))
    if min(out) < 0 or (min(out) == 0 and min(spatial) > 0):
        raise RuntimeError(f"{fn}: output_size {out} must be positive, for input of shape {x.shape}")
    return out


def _adaptive_avg(fn: str, x, output_size, nd: int) -> Tensor:
    x = _tensor(x)
    out = adaptive_sizes(fn, x, output_size, nd)
    for i in range(nd):
        axis = x.ndim - nd + i
        if out[i] != x.shape[axis]:
            x = _along(x, axis, _adaptive_matrix(x.shape[axis], out[i]))
    return x


def adaptive_avg_pool1d(input, output_size) -> Tensor:
    """torch.nn.functional.adaptive_avg_pool1d: (N, C, L) or (C, L) to length output_size."""
    return _adaptive_avg("adaptive_avg_pool1d", input, output_size, 1)


def adaptive_avg_pool2d(input, output_size) -> Tensor:
    """torch.nn.functional.adaptive_avg_pool2d: any output size, windows by torch's start/end rule."""
    return _adaptive_avg("adaptive_avg_pool2d", input, output_size, 2)


def adaptive_avg_pool3d(input, output_size) -> Tensor:
    """torch.nn.functional.adaptive_avg_pool3d."""
    return _adaptive_avg("adaptive_avg_pool3d", input, output_size, 3)


# ---------------------------------------------------------------- interpolate


def _scale(size: int, out: int, align_corners: bool, scale) -> float:
    """torch's area_pixel_compute_scale."""
    if align_corners:
        return (size - 1) / (out - 1) if out > 1 else 0.0
    return 1.0 / scale if scale is not None and scale > 0 else size / out


def _nearest_index(size: int, out: int, scale, exact: bool) -> np.ndarray:
    """torch's nearest (floor(dst * scale)) and nearest-exact (floor((dst + 0.5) * scale)) source indices,
    computed in float32 as torch's kernels do."""
    s = np.float32(1.0 / scale if scale is not None and scale > 0 else size / out)
    dst = np.arange(out, dtype=np.float32) + (np.float32(0.5) if exact else np.float32(0.0))
    return np.minimum(np.floor(dst * s).astype(np.int64), size - 1)


def _linear_matrix(size: int, out: int, align_corners: bool, scale) -> np.ndarray:
    s = _scale(size, out, align_corners, scale)
    dst = np.arange(out, dtype=np.float64)
    src = dst * s if align_corners else np.maximum(s * (dst + 0.5) - 0.5, 0.0)
    i0 = np.minimum(np.floor(src).astype(np.int64), size - 1)
    i1 = np.where(i0 < size - 1, i0 + 1, i0)
    lam1 = src - i0
    m = np.zeros((out, size))
    np.add.at(m, (np.arange(out), i0), 1.0 - lam1)
    np.add.at(m, (np.arange(out), i1), lam1)
    return m


def _output_size(x: Tensor, nd: int, size, scale_factor, recompute_scale_factor):
    if (size is None) == (scale_factor is None):
        raise ValueError("interpolate: exactly one of size or scale_factor must be defined")
    if size is not None:
        out = tuple(size) if isinstance(size, (tuple, list)) else (size,) * nd
        if len(out) != nd:
            raise ValueError(f"interpolate: input of shape {x.shape} has {nd} spatial axes, size {size!r} has "
                             f"{len(out)}")
        return tuple(int(s) for s in out), (None,) * nd
    scales = tuple(scale_factor) if isinstance(scale_factor, (tuple, list)) else (scale_factor,) * nd
    if len(scales) != nd:
        raise ValueError(f"interpolate: input of shape {x.shape} has {nd} spatial axes, scale_factor "
                         f"{scale_factor!r} has {len(scales)}")
    out = tuple(math.floor(float(x.shape[2 + i]) * float(scales[i])) for i in range(nd))
    return out, (None,) * nd if recompute_scale_factor else tuple(float(s) for s in scales)


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False) -> Tensor:
    """torch.nn.functional.interpolate for modes nearest, nearest-exact, linear, bilinear, trilinear and area, on
    (N, C, *spatial) input with 1-3 spatial axes.

    >>> import numpy as np
    >>> interpolate(np.array([[[0.0, 1.0]]], "float32"), scale_factor=2, mode="linear").numpy().tolist()
    [[[0.0, 0.25, 0.75, 1.0]]]
    """
    x = _tensor(input)
    if mode not in _MODES:
        raise NotImplementedError(f"interpolate: mode {mode!r} is not supported; use one of {_MODES}")
    if antialias:
        raise NotImplementedError("interpolate: antialias=True is not supported")
    nd = x.ndim - 2
    if nd not in (1, 2, 3):
        raise NotImplementedError(f"interpolate: input must be 3-d, 4-d or 5-d (N, C, *spatial), got shape {x.shape}")
    if mode in _LINEAR and _LINEAR[mode] != nd:
        raise NotImplementedError(f"interpolate: got {x.ndim}D input, but {mode} mode needs {_LINEAR[mode] + 2}D input")
    if align_corners is not None and mode not in _LINEAR:
        raise ValueError("interpolate: align_corners option can only be set with the interpolating modes: "
                         "linear | bilinear | bicubic | trilinear")
    out, scales = _output_size(x, nd, size, scale_factor, recompute_scale_factor)
    if min(out) < 1:
        raise ValueError(f"interpolate: output size {out} must be positive (input of shape {x.shape})")
    if mode == "area":
        return _adaptive_avg("interpolate", x, out, nd)
    for i in range(nd):
        axis, n = 2 + i, x.shape[2 + i]
        if mode in _LINEAR:
            if out[i] != n or scales[i] not in (None, 1.0) and not align_corners:
                x = _along(x, axis, _linear_matrix(n, out[i], bool(align_corners), scales[i]))
        else:
            index = _nearest_index(n, out[i], scales[i], mode == "nearest-exact")
            if not np.array_equal(index, np.arange(n)):
                x = tracer.take(x, constant(index, x), axis=axis)
    return x


class Upsample(Module):
    """torch.nn.Upsample: F.interpolate with the module's size or scale_factor, mode and align_corners."""

    def __init__(self, size=None, scale_factor=None, mode="nearest", align_corners=None, recompute_scale_factor=None):
        super().__init__()
        self.size, self.mode, self.align_corners = size, mode, align_corners
        self.scale_factor = (tuple(float(s) for s in scale_factor) if isinstance(scale_factor, (tuple, list))
                             else None if scale_factor is None else float(scale_factor))
        self.recompute_scale_factor = recompute_scale_factor

    def forward(self, input):
        return interpolate(input, self.size, self.scale_factor, self.mode, self.align_corners,
                           recompute_scale_factor=self.recompute_scale_factor)

    def extra_repr(self) -> str:
        what = f"scale_factor={self.scale_factor!r}" if self.scale_factor is not None else f"size={self.size!r}"
        return f"{what}, mode={self.mode!r}"


class UpsamplingNearest2d(Upsample):
    """torch.nn.UpsamplingNearest2d: Upsample(mode='nearest')."""

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    """torch.nn.UpsamplingBilinear2d: Upsample(mode='bilinear', align_corners=True)."""

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)


# ---------------------------------------------------------------- pixel shuffle


def _factor(fn: str, r) -> int:
    if isinstance(r, bool) or not isinstance(r, (int, np.integer)) or r < 1:
        raise ValueError(f"{fn}: the factor must be a positive int, got {r!r}")
    return int(r)


def pixel_shuffle(input, upscale_factor) -> Tensor:
    """(*, C * r**2, H, W) -> (*, C, H * r, W * r), as torch.nn.functional.pixel_shuffle."""
    x, r = _tensor(input), _factor("pixel_shuffle", upscale_factor)
    if x.ndim < 3 or x.shape[-3] % (r * r):
        raise RuntimeError(f"pixel_shuffle: input of shape {x.shape} must be at least 3-d with channels divisible "
                           f"by upscale_factor ** 2 = {r * r}")
    *lead, c, h, w = x.shape
    k = len(lead)
    y = tracer.reshape(x, (*lead, c // (r * r), r, r, h, w))
    y = tracer.permute_dims(y, list(range(k + 1)) + [k + 3, k + 1, k + 4, k + 2])
    return tracer.reshape(y, (*lead, c // (r * r), h * r, w * r))


def pixel_unshuffle(input, downscale_factor) -> Tensor:
    """(*, C, H * r, W * r) -> (*, C * r**2, H, W), as torch.nn.functional.pixel_unshuffle."""
    x, r = _tensor(input), _factor("pixel_unshuffle", downscale_factor)
    if x.ndim < 3 or x.shape[-2] % r or x.shape[-1] % r:
        raise RuntimeError(f"pixel_unshuffle: input of shape {x.shape} must be at least 3-d with height and width "
                           f"divisible by downscale_factor = {r}")
    *lead, c, h, w = x.shape
    k = len(lead)
    y = tracer.reshape(x, (*lead, c, h // r, r, w // r, r))
    y = tracer.permute_dims(y, list(range(k + 1)) + [k + 2, k + 4, k + 1, k + 3])
    return tracer.reshape(y, (*lead, c * r * r, h // r, w // r))


class PixelShuffle(Module):
    """torch.nn.PixelShuffle(upscale_factor)."""

    def __init__(self, upscale_factor: int):
        super().__init__()
        self.upscale_factor = upscale_factor

    def forward(self, input):
        return pixel_shuffle(input, self.upscale_factor)

    def extra_repr(self) -> str:
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Module):
    """torch.nn.PixelUnshuffle(downscale_factor)."""

    def __init__(self, downscale_factor: int):
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, input):
        return pixel_unshuffle(input, self.downscale_factor)

    def extra_repr(self) -> str:
        return f"downscale_factor={self.downscale_factor}"


# ---------------------------------------------------------------- fold / unfold


def _blocks(fn, channels, kernel_size, dilation, padding, stride, dtype, like):
    k, d = ntuple(fn, "kernel_size", kernel_size, 2, 1), ntuple(fn, "dilation", dilation, 2, 1)
    p, s = ntuple(fn, "padding", padding, 2, 0), ntuple(fn, "stride", stride, 2, 1)
    taps = k[0] * k[1]
    eye = np.tile(np.eye(taps, dtype=dtype).reshape(taps, 1, *k), (channels, 1, 1, 1))  # (C * taps, 1, kh, kw)
    attrs = dict(strides=s, padding=p + p, dilation=d, groups=channels)
    return k, d, p, s, constant(eye, like), attrs


def unfold(input, kernel_size, dilation=1, padding=0, stride=1) -> Tensor:
    """torch.nn.functional.unfold (im2col): (N, C, H, W) -> (N, C * kh * kw, L), channel c * kh * kw + i * kw + j."""
    x = _tensor(input)
    squeeze = x.ndim == 3
    if squeeze:
        x = tracer.expand_dims(x, 0)
    if x.ndim != 4:
        raise RuntimeError(f"unfold: expected a 3-d or 4-d input, got shape {x.shape}")
    *_, eye, attrs = _blocks("unfold", x.shape[1], kernel_size, dilation, padding, stride, x.dtype, x)
    y = apply("nn.conv2d", [x, eye], **attrs)
    y = tracer.reshape(y, (y.shape[0], y.shape[1], y.shape[2] * y.shape[3]))
    return y[0] if squeeze else y


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1) -> Tensor:
    """torch.nn.functional.fold (col2im): (N, C * kh * kw, L) -> (N, C, *output_size), overlaps summed."""
    x = _tensor(input)
    squeeze = x.ndim == 2
    if squeeze:
        x = tracer.expand_dims(x, 0)
    if x.ndim != 3:
        raise RuntimeError(f"fold: expected a 2-d or 3-d input, got shape {x.shape}")
    size = ntuple("fold", "output_size", output_size, 2, 1)
    k, d, p, s = (ntuple("fold", n, v, 2, low) for n, v, low in (("kernel_size", kernel_size, 1),
                                                                  ("dilation", dilation, 1), ("padding", padding, 0),
                                                                  ("stride", stride, 1)))
    taps = k[0] * k[1]
    blocks = [(size[i] + 2 * p[i] - d[i] * (k[i] - 1) - 1) // s[i] + 1 for i in range(2)]
    if x.shape[1] % taps or x.shape[2] != blocks[0] * blocks[1]:
        raise RuntimeError(f"fold: input of shape {x.shape} must have channels divisible by kh * kw = {taps} and "
                           f"{blocks[0]} * {blocks[1]} = {blocks[0] * blocks[1]} blocks for output_size {size}")
    channels = x.shape[1] // taps
    *_, eye, attrs = _blocks("fold", channels, k, d, p, s, x.dtype, x)
    cols = tracer.reshape(x, (x.shape[0], x.shape[1], blocks[0], blocks[1]))
    y = apply("grad.conv2d_input_backward", [cols, eye], input_shape=(x.shape[0], channels) + size, **attrs)
    return y[0] if squeeze else y


class Unfold(Module):
    """torch.nn.Unfold(kernel_size, dilation=1, padding=0, stride=1)."""

    def __init__(self, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.kernel_size, self.dilation, self.padding, self.stride = kernel_size, dilation, padding, stride

    def forward(self, input):
        return unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, dilation={self.dilation}, padding={self.padding}, "
                f"stride={self.stride}")


class Fold(Module):
    """torch.nn.Fold(output_size, kernel_size, dilation=1, padding=0, stride=1)."""

    def __init__(self, output_size, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.output_size = output_size
        self.kernel_size, self.dilation, self.padding, self.stride = kernel_size, dilation, padding, stride

    def forward(self, input):
        return fold(input, self.output_size, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self) -> str:
        return (f"output_size={self.output_size}, kernel_size={self.kernel_size}, dilation={self.dilation}, "
                f"padding={self.padding}, stride={self.stride}")


__all__ = ["Fold", "PixelShuffle", "PixelUnshuffle", "Unfold", "Upsample", "UpsamplingBilinear2d",
           "UpsamplingNearest2d", "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d", "fold",
           "interpolate", "pixel_shuffle", "pixel_unshuffle", "unfold"]
