"""Normalization layers with running statistics: BatchNorm1d, BatchNorm2d, and GroupNorm, as torch's."""
from __future__ import annotations

import math

import numpy as np

import tracer

from .module import Module, Parameter, check_input


class _BatchNorm(Module):
    """Shared by BatchNorm1d and BatchNorm2d: normalize each channel (axis 1) over every other axis.

    While training, the batch's mean and (biased) variance normalize, and the running statistics move
    towards the batch's (the variance unbiased, as torch): `running = (1 - momentum) * running + momentum *
    batch`, written with `copy_`, so a compiled step updates them exactly as an eager call does. After
    eval() the running statistics normalize. The buffers (running_mean, running_var, num_batches_tracked)
    are in state_dict under torch's names.
    """

    _ndims: tuple[int, ...] = ()

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float = 0.1, affine: bool = True,
                 track_running_stats: bool = True, dtype: str = "float32"):
        super().__init__()
        name = type(self).__name__
        if not isinstance(num_features, (int, np.integer)) or isinstance(num_features, bool) or num_features < 1:
            raise ValueError(f"{name}: num_features must be a positive int, got {num_features!r}")
        if momentum is None or not 0.0 <= momentum <= 1.0:
            raise ValueError(f"{name}: momentum must be a number in [0, 1] (the cumulative average of "
                             f"momentum=None is not supported), got {momentum!r}")
        self.num_features, self.eps, self.momentum = int(num_features), float(eps), float(momentum)
        self.affine, self.track_running_stats = affine, track_running_stats
        self.weight = Parameter(np.ones((num_features,), dtype)) if affine else None
        self.bias = Parameter(np.zeros((num_features,), dtype)) if affine else None
        if track_running_stats:
            self.register_buffer("running_mean", tracer.zeros((num_features,), dtype))
            self.register_buffer("running_var", tracer.ones((num_features,), dtype))
            self.register_buffer("num_batches_tracked", tracer.zeros((), "int64"))
        self._dtype = dtype

    def forward(self, x):
        name = type(self).__name__
        x = check_input(self, x, self.weight.dtype if self.affine else self._dtype)
        if x.ndim not in self._ndims or x.shape[1] != self.num_features:
            wanted = " or ".join(f"{n}-d" for n in self._ndims)
            raise ValueError(f"{name}: expected {wanted} input with {self.num_features} channels on axis 1, "
                             f"got shape {x.shape}")
        axes = (0,) + tuple(range(2, x.ndim))
        per_channel = (1, self.num_features) + (1,) * (x.ndim - 2)
        if self.training or not self.track_running_stats:
            mean, var = tracer.mean(x, axis=axes), tracer.var(x, axis=axes)
            count = math.prod(x.shape[a] for a in axes)
            if count <= 1 and self.training:
                raise ValueError(f"{name}: expected more than 1 value per channel when training, got input of "
                                 f"shape {x.shape}")
            if self.training and self.track_running_stats:
                m = self.momentum
                batch_mean = tracer.stop_gradient(mean)
                batch_var = tracer.stop_gradient(var) * (count / (count - 1))
                self.running_mean.copy_(self.running_mean * (1 - m) + batch_mean * m)
                self.running_var.copy_(self.running_var * (1 - m) + batch_var * m)
                self.num_batches_tracked.copy_(self.num_batches_tracked + 1)
        else:
            mean, var = self.running_mean, self.running_var
        y = (x - tracer.reshape(mean, per_channel)) * tracer.rsqrt(tracer.reshape(var, per_channel) + self.eps)
        if self.affine:
            y = y * tracer.reshape(self.weight, per_channel) + tracer.reshape(self.bias, per_channel)
        return y

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"track_running_stats={self.track_running_stats}")


class BatchNorm1d(_BatchNorm):
    """Batch normalization of (N, C) or (N, C, L) input over the batch (and length) axes, per channel.

    While training, the batch's statistics normalize and the running statistics (buffers running_mean,
    running_var, num_batches_tracked) move towards them, in compiled steps as in eager calls; after eval()
    the running statistics normalize.

    >>> import numpy as np
    >>> bn = BatchNorm1d(3)
    >>> y = bn(np.arange(12, dtype="float32").reshape(4, 3))
    >>> y.numpy()[:, 0].astype(float).round(3).tolist(), bn.running_mean.numpy().astype(float).round(2).tolist()
    ([-1.342, -0.447, 0.447, 1.342], [0.45, 0.55, 0.65])
    """

    _ndims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch normalization of (N, C, H, W) input over the batch and spatial axes, per channel.

    While training, the batch's statistics normalize and the running statistics (buffers running_mean,
    running_var, num_batches_tracked) move towards them, in compiled steps as in eager calls; after eval()
    the running statistics normalize.

    >>> import numpy as np
    >>> bn = BatchNorm2d(2)
    >>> _ = bn(np.ones((4, 2, 3, 3), "float32"))
    >>> bn.running_mean.numpy().tolist(), int(bn.num_batches_tracked.item())
    ([0.10000000149011612, 0.10000000149011612], 1)
    """

    _ndims = (4,)


class GroupNorm(Module):
    """Normalize (N, C, ...) input over groups of C // num_groups channels (and every spatial position),
    then scale and shift per channel, as torch.nn.GroupNorm (no running statistics).

    >>> import numpy as np
    >>> gn = GroupNorm(2, 4)
    >>> y = gn(np.arange(8, dtype="float32").reshape(1, 4, 2))
    >>> y.numpy()[0, :2].astype(float).round(3).tolist()
    [[-1.342, -0.447], [0.447, 1.342]]
    """

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5, affine: bool = True,
                 dtype: str = "float32"):
        super().__init__()
        if num_groups < 1 or num_channels % num_groups:
            raise ValueError(f"GroupNorm: num_channels ({num_channels}) must be divisible by num_groups "
                             f"({num_groups})")
        self.num_groups, self.num_channels, self.eps, self.affine = num_groups, num_channels, float(eps), affine
        self.weight = Parameter(np.ones((num_channels,), dtype)) if affine else None
        self.bias = Parameter(np.zeros((num_channels,), dtype)) if affine else None
        self._dtype = dtype

    def forward(self, x):
        x = check_input(self, x, self._dtype)
        if x.ndim < 2 or x.shape[1] != self.num_channels:
            raise ValueError(f"GroupNorm: expected input (N, {self.num_channels}, ...), got shape {x.shape}")
        n = x.shape[0]
        groups = tracer.reshape(x, (n, self.num_groups, math.prod(x.shape[1:]) // self.num_groups))
        mean = tracer.mean(groups, axis=2, keepdims=True)
        var = tracer.var(groups, axis=2, keepdims=True)
        y = tracer.reshape((groups - mean) * tracer.rsqrt(var + self.eps), x.shape)
        if self.affine:
            per_channel = (1, self.num_channels) + (1,) * (x.ndim - 2)
            y = y * tracer.reshape(self.weight, per_channel) + tracer.reshape(self.bias, per_channel)
        return y

    def extra_repr(self) -> str:
        return f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}"


__all__ = ["BatchNorm1d", "BatchNorm2d", "GroupNorm"]
