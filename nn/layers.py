"""Layers with PyTorch's weight layouts, parameter names and default initialisation (convolutions: nn/conv.py)."""
from __future__ import annotations

import math

import numpy as np

import tracer

from . import functional as F
from . import init, layer_errors
from .containers import ModuleList, Sequential  # noqa: F401  (their home before nn/containers.py)
from .module import Module, Parameter, check_input, factory_dtype, place


def _pair(layer: str, argument: str, v, low: int) -> tuple[int, int]:
    """An int or a pair of ints, each >= low, as a pair; a ValueError naming the layer and argument otherwise."""
    is_int = isinstance(v, (int, np.integer)) and not isinstance(v, bool)
    pair = (v, v) if is_int else tuple(v) if isinstance(v, (tuple, list)) else ()
    if len(pair) != 2 or not all(isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d >= low
                                 for d in pair):
        raise ValueError(f"{layer}: {argument} must be an int or a pair of ints, each >= {low}, got {v!r}")
    return int(pair[0]), int(pair[1])


def _default_init(weight: Parameter, bias: Parameter | None, fan_in: int) -> None:
    """torch.nn.Linear / Conv2d reset_parameters: kaiming_uniform_(a=sqrt(5)), bias U(+-1/sqrt(fan_in))."""
    init.kaiming_uniform_(weight, a=math.sqrt(5))
    if bias is not None:
        bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0.0
        init.uniform_(bias, -bound, bound)


class Linear(Module):
    """y = x @ weight.T + bias, weight (out_features, in_features)."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device=None, dtype=None):
        super().__init__()
        dtype = factory_dtype(dtype, self)
        self.in_features, self.out_features = in_features, out_features
        self.weight = Parameter(np.empty((out_features, in_features), dtype))
        self.bias = Parameter(np.empty((out_features,), dtype)) if bias else None
        _default_init(self.weight, self.bias, in_features)
        place(self, device)

    def forward(self, x):
        x = check_input(self, x, self.weight.dtype)
        try:
            return F.linear(x, self.weight, self.bias)
        except (ValueError, RuntimeError) as e:
            layer_errors.check_linear(self, x.shape, e)  # raises the error in the layer's words when it sees why
            raise

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class AvgPool2d(Module):
    """Average pooling, as torch's: zero padding counts towards the average unless count_include_pad=False,
    ceil_mode=True rounds the window count up, divisor_override replaces the divisor."""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
                 divisor_override=None):
        super().__init__()
        _check_pool(type(self).__name__, kernel_size, stride, padding)
        self.kernel_size, self.padding, self.ceil_mode = kernel_size, padding, ceil_mode
        self.stride = kernel_size if stride is None else stride  # as torch's
        self.count_include_pad, self.divisor_override = count_include_pad, divisor_override

    def forward(self, x):
        return F.avg_pool2d(x, self.kernel_size, self.stride, self.padding, self.ceil_mode, self.count_include_pad,
                            self.divisor_override)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


def _check_pool(name, kernel_size, stride, padding) -> None:
    window = _pair(name, "kernel_size", kernel_size, 1)
    if stride is not None:
        _pair(name, "stride", stride, 1)
    if any(2 * p > k for p, k in zip(_pair(name, "padding", padding, 0), window, strict=True)):
        raise ValueError(f"{name}: padding ({padding}) must be at most half of kernel_size ({kernel_size})")


class LayerNorm(Module):
    """Normalize over the last len(normalized_shape) axes, then scale by weight (ones) and shift by bias
    (zeros), as torch.nn.LayerNorm; elementwise_affine=False has neither, bias=False no shift.

    >>> LayerNorm(4, elementwise_affine=False)(np.arange(8, dtype="float32").reshape(2, 4)).shape
    (2, 4)
    """

    def __init__(self, normalized_shape, eps: float = 1e-5, elementwise_affine: bool = True, bias: bool = True,
                 device=None, dtype=None):
        super().__init__()
        dtype = factory_dtype(dtype, self)
        shape = tuple(normalized_shape) if isinstance(normalized_shape, (tuple, list)) else (normalized_shape,)
        if not shape or not all(isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d > 0 for d in shape):
            raise ValueError(f"LayerNorm: normalized_shape must be a positive int or a tuple of them, "
                             f"got {normalized_shape!r}")
        self.normalized_shape, self.eps, self.elementwise_affine = tuple(int(d) for d in shape), eps, elementwise_affine
        self.dim = math.prod(self.normalized_shape)
        self.weight = Parameter(np.ones(self.normalized_shape, dtype)) if elementwise_affine else None
        self.bias = Parameter(np.zeros(self.normalized_shape, dtype)) if elementwise_affine and bias else None
        self._dtype = dtype
        place(self, device)

    def forward(self, x):
        x = check_input(self, x, self._dtype)
        k = len(self.normalized_shape)
        if x.shape[x.ndim - k:] != self.normalized_shape or x.ndim < k:
            raise layer_errors.layer_norm_error(self, x.shape)
        if k == 1:
            return F.layer_norm(x, self.weight, self.bias, eps=self.eps)
        y = F.layer_norm(tracer.reshape(x, x.shape[:x.ndim - k] + (self.dim,)), eps=self.eps)
        y = tracer.reshape(y, x.shape)
        if self.weight is not None:
            y = y * self.weight
        return y if self.bias is None else y + self.bias

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}, "
                f"bias={self.bias is not None}")


class Dropout(Module):
    """Dropout while training (a fresh mask every call), identity after eval()."""

    def __init__(self, p: float = 0.5, inplace: bool = False):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"{type(self).__name__}: p must be in [0, 1], got {p}")
        self.p, self.inplace = p, inplace  # inplace: accepted as torch's; the result is a new tensor

    def forward(self, x):
        return F.dropout(x, self.p, training=self.training, seed=None)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class Dropout2d(Dropout):
    """Zero whole channels of (N, C, H, W) or (N, C, L) input with probability p while training (one draw per
    sample and channel), scaling the rest by 1 / (1 - p); identity after eval().

    >>> y = Dropout2d(0.5)(np.ones((2, 8, 3, 3), "float32")).numpy()
    >>> bool(((y == 0) | (y == 2)).all()) and bool((y.min(axis=(2, 3)) == y.max(axis=(2, 3))).all())
    True
    """

    def forward(self, x):
        x = x if isinstance(x, tracer.Tensor) else tracer.tensor(x)
        if x.ndim < 3:
            raise ValueError(f"Dropout2d: expected input (N, C, H, W) or (N, C, L), got shape {x.shape}")
        if not self.training or self.p == 0.0:
            return x
        mask = F.dropout(tracer.ones(x.shape[:2] + (1,) * (x.ndim - 2), x.dtype), self.p, training=True, seed=None)
        return x * mask


class Identity(Module):
    """Returns its input (a placeholder layer, as torch.nn.Identity); constructor arguments are ignored."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, x):
        return x


class Flatten(Module):
    """Merge dimensions start_dim..end_dim into one (shapes are static, so this is one reshape)."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1):
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, x):
        shape = tuple(x.shape)
        ndim = max(len(shape), 1)
        if not (-ndim <= self.start_dim < ndim and -ndim <= self.end_dim < ndim):
            raise ValueError(f"Flatten: start_dim {self.start_dim} and end_dim {self.end_dim} must be axes of x of "
                             f"shape {shape}")
        start, end = self.start_dim % ndim, self.end_dim % ndim
        if start > end:
            raise ValueError(f"Flatten: start_dim {self.start_dim} comes after end_dim {self.end_dim} for x of "
                             f"shape {shape}")
        # the size is spelled out, not -1, so an empty batch (0, ...) flattens as well
        return tracer.reshape(x, shape[:start] + (math.prod(shape[start:end + 1]),) + shape[end + 1:])

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Split axis `dim` into `unflattened_size` (one entry may be -1), as torch.nn.Unflatten.

    >>> Unflatten(1, (2, 4))(np.zeros((3, 8), "float32")).shape
    (3, 2, 4)
    """

    def __init__(self, dim: int, unflattened_size):
        super().__init__()
        if not isinstance(unflattened_size, (tuple, list)) or not all(
                isinstance(d, (int, np.integer)) and not isinstance(d, bool) for d in unflattened_size):
            raise TypeError(f"Unflatten: unflattened_size must be a tuple of ints, got {unflattened_size!r}")
        self.dim, self.unflattened_size = dim, tuple(int(d) for d in unflattened_size)

    def forward(self, x):
        x = x if isinstance(x, tracer.Tensor) else tracer.tensor(x)
        if not -x.ndim <= self.dim < x.ndim:
            raise ValueError(f"Unflatten: dim {self.dim} is not an axis of x of shape {x.shape}")
        d = self.dim % x.ndim
        known = math.prod(v for v in self.unflattened_size if v != -1)
        if self.unflattened_size.count(-1) > 1 or (-1 not in self.unflattened_size and known != x.shape[d]) or \
                (-1 in self.unflattened_size and (known == 0 or x.shape[d] % known)):
            raise RuntimeError(f"Unflatten: unflattened_size {self.unflattened_size} does not fit dim {self.dim} of "
                               f"size {x.shape[d]} (x of shape {x.shape})")
        return tracer.reshape(x, x.shape[:d] + self.unflattened_size + x.shape[d + 1:])

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"


__all__ = ["AvgPool2d", "Dropout", "Dropout2d", "Flatten", "Identity", "LayerNorm", "Linear", "ModuleList",
           "Sequential", "Unflatten"]
