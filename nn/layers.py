"""Layers with PyTorch's weight layouts, parameter names and default initialisation."""
from __future__ import annotations

import math

import numpy as np

import tracer

from . import functional as F
from . import init
from .module import Module, Parameter


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

    def __init__(self, in_features: int, out_features: int, bias: bool = True, dtype: str = "float32"):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.weight = Parameter(np.empty((out_features, in_features), dtype))
        self.bias = Parameter(np.empty((out_features,), dtype)) if bias else None
        _default_init(self.weight, self.bias, in_features)

    def forward(self, x):
        return F.linear(x, self.weight, self.bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class Conv2d(Module):
    """2-D convolution over NCHW input, weight (out_channels, in_channels // groups, kh, kw)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, dilation=1,
                 groups: int = 1, bias: bool = True, dtype: str = "float32"):
        super().__init__()
        for name, value in (("in_channels", in_channels), ("out_channels", out_channels), ("groups", groups)):
            if not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"Conv2d: {name} must be a positive int, got {value!r}")
        if in_channels % groups or out_channels % groups:
            raise ValueError(f"Conv2d: in_channels ({in_channels}) and out_channels ({out_channels}) must both "
                             f"be divisible by groups ({groups})")
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        # padding is numbers only: torch's "same" / "valid" strings are not supported
        self.kernel_size = _pair("Conv2d", "kernel_size", kernel_size, 1)
        self.stride, self.dilation = _pair("Conv2d", "stride", stride, 1), _pair("Conv2d", "dilation", dilation, 1)
        self.padding = _pair("Conv2d", "padding", padding, 0)
        self.weight = Parameter(np.empty((out_channels, in_channels // groups, *self.kernel_size), dtype))
        self.bias = Parameter(np.empty((out_channels,), dtype)) if bias else None
        _default_init(self.weight, self.bias, init.fan_in_and_fan_out(self.weight.shape)[0])

    def forward(self, x):
        return F.conv2d(x, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)

    def extra_repr(self) -> str:
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}, "
                f"padding={self.padding}")


class MaxPool2d(Module):
    """Max pooling over NCHW input; stride defaults to kernel_size, padding at most half the window."""

    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        name = type(self).__name__
        window = _pair(name, "kernel_size", kernel_size, 1)
        if stride is not None:
            _pair(name, "stride", stride, 1)
        if any(2 * p > k for p, k in zip(_pair(name, "padding", padding, 0), window, strict=True)):
            raise ValueError(f"{name}: padding ({padding}) must be at most half of kernel_size ({kernel_size})")
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding

    def forward(self, x):
        return F.max_pool2d(x, self.kernel_size, self.stride, self.padding)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool2d(MaxPool2d):
    """Average pooling; zero padding counts towards the average, as PyTorch's default."""

    def forward(self, x):
        return F.avg_pool2d(x, self.kernel_size, self.stride, self.padding)


class Embedding(Module):
    """A lookup table: integer indices (...) -> rows of weight (num_embeddings, dim), weight ~ N(0, 1)."""

    def __init__(self, num_embeddings: int, dim: int, dtype: str = "float32"):
        super().__init__()
        self.num_embeddings, self.dim = num_embeddings, dim
        self.weight = init.normal_(Parameter(np.empty((num_embeddings, dim), dtype)))

    def forward(self, indices):
        if not isinstance(indices, tracer.Tensor):
            indices = tracer.tensor(np.asarray(indices))
        # take() counts negative indices from the end (numpy's rule); an embedding must refuse them, as torch.
        # Only known values can be checked: a traced argument's indices are checked by take's kernel alone.
        known = indices._data
        if known is not None and known.size and (int(known.min()) < 0 or int(known.max()) >= self.num_embeddings):
            bad = int(known.min()) if int(known.min()) < 0 else int(known.max())
            raise IndexError(f"{self!r}: index {bad} is out of range [0, {self.num_embeddings})")
        return tracer.take(self.weight, indices, axis=0)

    def extra_repr(self) -> str:
        return f"{self.num_embeddings}, {self.dim}"


class LayerNorm(Module):
    """Normalise over the last axis of size `dim`, then scale by weight (ones) and shift by bias (zeros)."""

    def __init__(self, dim: int, eps: float = 1e-5, dtype: str = "float32"):
        super().__init__()
        if isinstance(dim, (tuple, list)):  # torch's normalized_shape: only a single (last) axis here
            if len(dim) != 1:
                raise ValueError(f"LayerNorm: normalises over the last axis only, got normalized_shape {tuple(dim)}; "
                                 "reshape so the axes to normalise are one last axis")
            (dim,) = dim
        self.dim, self.eps = dim, eps
        self.weight = Parameter(np.ones((dim,), dtype))
        self.bias = Parameter(np.zeros((dim,), dtype))

    def forward(self, x):
        if not x.shape or x.shape[-1] != self.dim:
            raise ValueError(f"{self!r}: expected the last axis of x to have size {self.dim}, got x of shape {x.shape}")
        return F.layer_norm(x, self.weight, self.bias, eps=self.eps)

    def extra_repr(self) -> str:
        return f"{self.dim}, eps={self.eps}"


class Dropout(Module):
    """Dropout while training (a fresh mask every call), identity after eval()."""

    def __init__(self, p: float = 0.5):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"Dropout: p must be in [0, 1], got {p}")
        self.p = p

    def forward(self, x):
        return F.dropout(x, self.p, training=self.training, seed=None)

    def extra_repr(self) -> str:
        return f"p={self.p}"


class ReLU(Module):
    def forward(self, x):
        return F.relu(x)


class GELU(Module):
    def __init__(self, approximate: str = "none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, x):
        return F.gelu(x, approximate=self.approximate)


class Tanh(Module):
    def forward(self, x):
        return F.tanh(x)


class Sigmoid(Module):
    def forward(self, x):
        return tracer.sigmoid(x)


class SiLU(Module):
    def forward(self, x):
        return tracer.silu(x)


class Identity(Module):
    """Returns its input (a placeholder layer, as torch.nn.Identity)."""

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


class Sequential(Module):
    """Modules applied in order, registered as "0", "1", ...; indexable, sliceable, iterable."""

    def __init__(self, *modules: Module):
        super().__init__()
        for i, m in enumerate(modules):
            setattr(self, str(i), m)

    def __getitem__(self, index):
        items = list(self._modules.items())
        if not isinstance(index, slice):
            return items[index][1]
        part = type(self)()
        part._modules.update(items[index])  # keep the names: re-registering would rename the parameters
        for name, m in items[index]:
            object.__setattr__(part, name, m)
        return part

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def append(self, module: Module) -> Sequential:
        setattr(self, str(len(self)), module)
        return self

    def forward(self, x):
        for m in self:
            x = m(x)
        return x


__all__ = ["AvgPool2d", "Conv2d", "Dropout", "Embedding", "Flatten", "GELU", "LayerNorm", "Linear", "MaxPool2d",
           "ReLU", "Sequential", "Tanh"]


class ModuleList(Sequential):
    """Modules held in a list, registered as "0", "1", ... (as torch.nn.ModuleList): indexable,
    sliceable, iterable, `append`; it has no forward of its own.

    >>> blocks = ModuleList([Linear(2, 2) for _ in range(3)])
    >>> len(blocks), [name for name, _ in blocks.named_parameters()][:2]
    (3, ['0.weight', '0.bias'])
    """

    def __init__(self, modules=()):
        super().__init__(*modules)

    def forward(self, *args):
        raise TypeError("ModuleList has no forward: iterate over it and call each module")
