"""Convolutions as torch's: F.conv1d/2d/3d, F.conv_transpose1d/2d/3d, nn.Conv1d/2d/3d and nn.ConvTranspose1d/2d/3d.

conv1d is conv2d of height 1; conv2d and conv3d are IR ops. A transposed convolution is the adjoint of a
convolution in its input, which the IR already has (grad.conv2d_input_backward / conv3d's): torch's
weight layout (in, out / groups, *k) is exactly the forward conv's (out, in / groups, *k) read the other way,
and output_padding only sets the size of the input the forward conv would have read. padding_mode other than
'zeros' pads with F.pad first (torch's _reversed_padding_repeated_twice) and convolves unpadded.
"""
from __future__ import annotations

import math

import numpy as np

import tracer
from tracer.tensor import Tensor, apply

from . import init, layer_errors
from .module import Module, Parameter, check_input
from .parameter import factory_dtype  # one rule for every layer (np.float64, torch.float64 too)

PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


def _tensor(x) -> Tensor:
    return x if isinstance(x, Tensor) else tracer.tensor(x)


class ConvArgumentError(ValueError, RuntimeError):
    """A window argument out of range (negative padding, stride 0, ...): the RuntimeError torch raises, and a
    ValueError as tracegrad's argument checks are (ir.IRError, which the traced path raises, is both too)."""


def ntuple(fn: str, name: str, v, n: int, low: int) -> tuple[int, ...]:
    """An int (repeated) or n ints, each >= low; a ConvArgumentError naming the function and argument otherwise."""
    items = (v,) * n if isinstance(v, (int, np.integer)) and not isinstance(v, bool) else \
        tuple(v) if isinstance(v, (tuple, list)) else ()
    if len(items) != n or not all(isinstance(i, (int, np.integer)) and not isinstance(i, bool) and i >= low
                                  for i in items):
        raise ConvArgumentError(f"{fn}: {name} must be an int or {n} ints, each >= {low}, got {v!r}")
    return tuple(int(i) for i in items)


def string_padding(fn: str, padding: str, kernel, stride, dilation) -> list[tuple[int, int]]:
    """(before, after) per spatial axis for padding='valid' or 'same' (the odd extra after, as torch)."""
    if padding == "valid":
        return [(0, 0)] * len(kernel)
    if padding != "same":
        raise ValueError(f"{fn}: padding must be an int, a tuple of ints, 'same' or 'valid', got {padding!r}")
    if any(s != 1 for s in stride):
        raise ValueError(f"{fn}: padding='same' is not supported for strided convolutions (stride {tuple(stride)})")
    totals = [d * (k - 1) for k, d in zip(kernel, dilation, strict=True)]
    return [(t // 2, t - t // 2) for t in totals]


def _batched(fn: str, x: Tensor, nd: int) -> tuple[Tensor, bool]:
    """x with a batch axis (torch takes unbatched (C, *spatial) input too) and whether one was added."""
    if x.ndim == nd + 1:
        return tracer.expand_dims(x, 0), True
    if x.ndim != nd + 2:
        raise RuntimeError(f"{fn}: expected a {nd + 1}-d (unbatched) or {nd + 2}-d (batched) input, "
                           f"got shape {x.shape}")
    return x, False


def _conv(nd: int, fn: str, x, weight, bias, stride, padding, dilation, groups) -> Tensor:
    x, squeeze = _batched(fn, _tensor(x), nd)
    weight = _tensor(weight)
    stride, dilation = ntuple(fn, "stride", stride, nd, 1), ntuple(fn, "dilation", dilation, nd, 1)
    if weight.ndim != nd + 2:
        raise RuntimeError(f"{fn}: weight must be {nd + 2}-d (out, in / groups, *kernel), got shape {weight.shape}")
    if isinstance(padding, str):
        pairs = string_padding(fn, padding, weight.shape[2:], stride, dilation)
    else:
        pairs = [(p, p) for p in ntuple(fn, "padding", padding, nd, 0)]
    pads = [b for b, _ in pairs] + [a for _, a in pairs]
    if nd == 1:
        n, c, length = x.shape
        w2 = tracer.reshape(weight, weight.shape[:2] + (1,) + weight.shape[2:])
        y = tracer.conv2d(tracer.reshape(x, (n, c, 1, length)), w2, None, (1, stride[0]),
                          (0, pads[0], 0, pads[1]), (1, dilation[0]), groups)
        y = tracer.reshape(y, (n, y.shape[1], y.shape[3]))
    else:
        y = (tracer.conv2d if nd == 2 else tracer.conv3d)(x, weight, None, stride, tuple(pads), dilation, groups)
    if bias is not None:
        bias = _tensor(bias)
        if bias.shape != (weight.shape[0],):
            raise RuntimeError(f"{fn}: bias must have shape ({weight.shape[0]},) (one per output channel), "
                               f"got {bias.shape}")
        y = y + tracer.reshape(bias, (1, bias.shape[0]) + (1,) * nd)
    return y[0] if squeeze else y


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1) -> Tensor:
    """torch.nn.functional.conv1d: input (N, C, L) or (C, L), weight (O, C / groups, k); padding an int,
    a 1-tuple, 'valid' or 'same'."""
    return _conv(1, "conv1d", input, weight, bias, stride, padding, dilation, groups)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1) -> Tensor:
    """torch.nn.functional.conv2d: input (N, C, H, W) or (C, H, W), weight (O, C / groups, kh, kw); padding an
    int, a pair, 'valid' or 'same'."""
    return _conv(2, "conv2d", input, weight, bias, stride, padding, dilation, groups)


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1) -> Tensor:
    """torch.nn.functional.conv3d: input (N, C, D, H, W) or (C, D, H, W), weight (O, C / groups, kd, kh, kw)."""
    return _conv(3, "conv3d", input, weight, bias, stride, padding, dilation, groups)


def transposed_size(size, k, s, p, d, op) -> int:
    """torch's transposed-convolution output length along one axis."""
    return (size - 1) * s - 2 * p + d * (k - 1) + op + 1


def _conv_transpose(nd, fn, x, weight, bias, stride, padding, output_padding, groups, dilation) -> Tensor:
    x, squeeze = _batched(fn, _tensor(x), nd)
    weight = _tensor(weight)
    if weight.ndim != nd + 2:
        raise RuntimeError(f"{fn}: weight must be {nd + 2}-d (in, out / groups, *kernel), got shape {weight.shape}")
    if weight.shape[0] != x.shape[1]:
        raise RuntimeError(f"{fn}: weight of shape {weight.shape} expects {weight.shape[0]} input channels, input of "
                           f"shape {x.shape} has {x.shape[1]}")
    if not isinstance(groups, (int, np.integer)) or groups < 1 or x.shape[1] % groups:
        raise RuntimeError(f"{fn}: groups={groups!r} must be a positive int dividing the {x.shape[1]} input channels")
    s, d = ntuple(fn, "stride", stride, nd, 1), ntuple(fn, "dilation", dilation, nd, 1)
    p, op = ntuple(fn, "padding", padding, nd, 0), ntuple(fn, "output_padding", output_padding, nd, 0)
    if any(o >= max(si, di) for o, si, di in zip(op, s, d, strict=True)):
        raise RuntimeError(f"{fn}: output_padding {op} must be smaller than either stride {s} or dilation {d}")
    k = weight.shape[2:]
    out = [transposed_size(x.shape[2 + i], k[i], s[i], p[i], d[i], op[i]) for i in range(nd)]
    if min(out) < 1:
        raise RuntimeError(f"{fn}: input of shape {x.shape} gives a non-positive output size {tuple(out)}")
    xs, ws, ss, ds = x, weight, s, d
    if nd == 1:  # as 2-D of height 1
        xs = tracer.reshape(x, x.shape[:2] + (1,) + x.shape[2:])
        ws = tracer.reshape(weight, weight.shape[:2] + (1,) + weight.shape[2:])
        ss, ds = (1,) + s, (1,) + d
    channels = weight.shape[1] * groups
    op_name = "grad.conv3d_input_backward" if nd == 3 else "grad.conv2d_input_backward"
    if all(o < si for o, si in zip(op, s, strict=True)):  # the forward conv of the output reads exactly x's size
        full, pads, crop = out, p, None
    else:  # output_padding >= stride (allowed below the dilation): the whole adjoint, then torch's window of it
        full = [transposed_size(x.shape[2 + i], k[i], s[i], 0, d[i], 0) for i in range(nd)]
        pads, crop = (0,) * nd, [(-p[i], out[i] - full[i] + p[i]) for i in range(nd)]
    sp = (1,) + tuple(full) if nd == 1 else tuple(full)
    padding_attr = ((0,) + tuple(pads)) * 2 if nd == 1 else tuple(pads) * 2
    y = apply(op_name, [xs, ws], strides=ss, padding=padding_attr, dilation=ds, groups=int(groups),
              input_shape=(x.shape[0], channels) + sp)
    if nd == 1:
        y = tracer.reshape(y, (x.shape[0], channels, full[0]))
    if crop is not None:
        y = tracer.pad(y, [w for pair in reversed(crop) for w in pair])
    if bias is not None:
        bias = _tensor(bias)
        if bias.shape != (channels,):
            raise RuntimeError(f"{fn}: bias must have shape ({channels},) (one per output channel), got {bias.shape}")
        y = y + tracer.reshape(bias, (1, channels) + (1,) * nd)
    return y[0] if squeeze else y


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1) -> Tensor:
    """torch.nn.functional.conv_transpose1d: input (N, C_in, L), weight (C_in, C_out / groups, k)."""
    return _conv_transpose(1, "conv_transpose1d", input, weight, bias, stride, padding, output_padding, groups,
                           dilation)


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1) -> Tensor:
    """torch.nn.functional.conv_transpose2d: input (N, C_in, H, W), weight (C_in, C_out / groups, kh, kw)."""
    return _conv_transpose(2, "conv_transpose2d", input, weight, bias, stride, padding, output_padding, groups,
                           dilation)


def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1) -> Tensor:
    """torch.nn.functional.conv_transpose3d: input (N, C_in, D, H, W), weight (C_in, C_out / groups, kd, kh, kw)."""
    return _conv_transpose(3, "conv_transpose3d", input, weight, bias, stride, padding, output_padding, groups,
                           dilation)


# ---------------------------------------------------------------- modules




class _ConvNd(Module):
    """torch's _ConvNd: argument checks, weight layout (transposed: (in, out / groups, *k)), initialisation."""

    _nd = 2
    transposed = False

    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias, padding_mode,
                 device, dtype, output_padding=0):
        super().__init__()
        name, nd = type(self).__name__, self._nd
        for arg, value in (("in_channels", in_channels), ("out_channels", out_channels), ("groups", groups)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"{name}: {arg} must be a positive int, got {value!r}")
        if in_channels % groups or out_channels % groups:
            raise ValueError(f"{name}: in_channels ({in_channels}) and out_channels ({out_channels}) must both be "
                             f"divisible by groups ({groups})")
        if padding_mode not in PADDING_MODES:
            raise ValueError(f"{name}: padding_mode must be one of {PADDING_MODES}, got {padding_mode!r}")
        if self.transposed and padding_mode != "zeros":
            raise ValueError(f'{name}: only "zeros" padding mode is supported, got {padding_mode!r}')
        self.in_channels, self.out_channels, self.groups = int(in_channels), int(out_channels), int(groups)
        self.kernel_size = ntuple(name, "kernel_size", kernel_size, nd, 1)
        self.stride, self.dilation = ntuple(name, "stride", stride, nd, 1), ntuple(name, "dilation", dilation, nd, 1)
        self.padding_mode = padding_mode
        if isinstance(padding, str):
            if self.transposed:
                raise ValueError(f"{name}: padding must be an int or a tuple of ints, got {padding!r}")
            self.padding = padding
            self._pairs = string_padding(name, padding, self.kernel_size, self.stride, self.dilation)
        else:
            self.padding = ntuple(name, "padding", padding, nd, 0)
            self._pairs = [(p, p) for p in self.padding]
        self.output_padding = ntuple(name, "output_padding", output_padding, nd, 0)
        dtype = factory_dtype(dtype)
        shape = ((in_channels, out_channels // groups) if self.transposed else
                 (out_channels, in_channels // groups)) + self.kernel_size
        self.weight = Parameter(np.empty(shape, dtype))
        self.bias = Parameter(np.empty((out_channels,), dtype)) if bias else None
        self.reset_parameters()
        if device is not None:
            self.to(device)

    def reset_parameters(self) -> None:
        """torch's: kaiming_uniform_(a=sqrt(5)) and bias U(+-1/sqrt(fan_in)), fan_in from the weight's layout."""
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in = init.fan_in_and_fan_out(self.weight.shape)[0]
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0.0
            init.uniform_(self.bias, -bound, bound)

    def extra_repr(self) -> str:
        nd = self._nd
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding != (0,) * nd:
            s += f", padding={self.padding}"  # as torch's: padding=same, unquoted
        if self.dilation != (1,) * nd:
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,) * nd:
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s

    def forward(self, input):
        x = check_input(self, input, self.weight.dtype)
        fn = (conv1d, conv2d, conv3d)[self._nd - 1]
        try:
            if self.padding_mode == "zeros":
                return fn(x, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)
            pads = [w for pair in reversed(self._pairs) for w in pair]
            return fn(tracer.pad(x, pads, mode=self.padding_mode), self.weight, self.bias, self.stride, 0,
                      self.dilation, self.groups)
        except (ValueError, RuntimeError) as e:
            layer_errors.check_conv(self, x.shape, e)  # raises the error in the layer's words when it sees why
            raise


class Conv1d(_ConvNd):
    """torch.nn.Conv1d: input (N, C_in, L), weight (out_channels, in_channels // groups, k)."""

    _nd = 1

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 padding_mode="zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                         padding_mode, device, dtype)


class Conv2d(_ConvNd):
    """torch.nn.Conv2d: input (N, C_in, H, W), weight (out_channels, in_channels // groups, kh, kw).

    >>> Conv2d(1, 4, 3, padding="same", padding_mode="reflect")(np.zeros((2, 1, 8, 8), "float32")).shape
    (2, 4, 8, 8)
    """

    _nd = 2

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 padding_mode="zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                         padding_mode, device, dtype)


class Conv3d(_ConvNd):
    """torch.nn.Conv3d: input (N, C_in, D, H, W), weight (out_channels, in_channels // groups, kd, kh, kw)."""

    _nd = 3

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 padding_mode="zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                         padding_mode, device, dtype)


class _ConvTransposeNd(_ConvNd):
    transposed = True

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1,
                 bias=True, dilation=1, padding_mode="zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                         padding_mode, device, dtype, output_padding)

    def _output_padding(self, x: Tensor, output_size) -> tuple[int, ...]:
        """torch's: output_size (the spatial sizes, or with the batch and channel axes too) sets output_padding."""
        nd, name = self._nd, type(self).__name__
        if output_size is None:
            return self.output_padding
        size = [int(v) for v in output_size]
        if len(size) == nd + 2 or len(size) == nd + 1 and x.ndim == nd + 1:
            size = size[-nd:]
        if len(size) != nd:
            raise ValueError(f"{name}: output_size must have {nd} or {nd + 2} elements (got {len(size)})")
        result = []
        for i in range(nd):
            low = transposed_size(x.shape[x.ndim - nd + i], self.kernel_size[i], self.stride[i], self.padding[i],
                                  self.dilation[i], 0)
            if not low <= size[i] < low + self.stride[i]:
                raise ValueError(f"{name}: requested an output size of {tuple(size)}, but valid sizes range from "
                                 f"{low} to {low + self.stride[i] - 1} along spatial axis {i} "
                                 f"(for an input of shape {x.shape})")
            result.append(size[i] - low)
        return tuple(result)

    def forward(self, input, output_size=None):
        x = check_input(self, input, self.weight.dtype)
        fn = (conv_transpose1d, conv_transpose2d, conv_transpose3d)[self._nd - 1]
        try:
            return fn(x, self.weight, self.bias, self.stride, self.padding, self._output_padding(x, output_size),
                      self.groups, self.dilation)
        except (ValueError, RuntimeError) as e:
            layer_errors.check_conv(self, x.shape, e)
            raise


class ConvTranspose1d(_ConvTransposeNd):
    """torch.nn.ConvTranspose1d: input (N, C_in, L), weight (in_channels, out_channels // groups, k)."""

    _nd = 1


class ConvTranspose2d(_ConvTransposeNd):
    """torch.nn.ConvTranspose2d: input (N, C_in, H, W), weight (in_channels, out_channels // groups, kh, kw).

    >>> ConvTranspose2d(4, 2, 4, stride=2, padding=1)(np.zeros((1, 4, 5, 5), "float32")).shape
    (1, 2, 10, 10)
    """

    _nd = 2


class ConvTranspose3d(_ConvTransposeNd):
    """torch.nn.ConvTranspose3d: input (N, C_in, D, H, W), weight (in_channels, out_channels // groups, kd, kh, kw)."""

    _nd = 3


__all__ = ["Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d", "conv1d", "conv2d",
           "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d"]
