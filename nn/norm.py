"""Normalization layers, as torch.nn's: BatchNorm1d/2d/3d, InstanceNorm1d/2d/3d, GroupNorm, RMSNorm and
LocalResponseNorm (LayerNorm is in nn.layers). Constructor signatures, defaults, parameter and buffer names
(weight, bias, running_mean, running_var, num_batches_tracked) and state-dict keys are torch's, so state dicts
load both ways. The computations are nn.functional's (nn/norm_functional.py).
"""
from __future__ import annotations

import numbers
import warnings

import numpy as np

import tracer

from . import layer_errors
from . import norm_functional as NF
from .module import Module, Parameter, check_input
from .parameter import factory_dtype, place  # one rule for every layer (np.float64, torch.float64 too)


def _positive_int(layer: str, name: str, v) -> int:
    if isinstance(v, bool) or not isinstance(v, (numbers.Integral, np.integer)) or v < 1:
        raise ValueError(f"{layer}: {name} must be a positive int, got {v!r}")
    return int(v)


class _NormBase(Module):
    """Shared by BatchNorm and InstanceNorm: torch's _NormBase parameters (weight ones, bias zeros, when affine)
    and buffers (running_mean zeros, running_var ones, num_batches_tracked int64 0, when track_running_stats)."""

    _ndims: tuple[int, ...] = ()

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
                 track_running_stats: bool = True, device=None, dtype=None, *, bias: bool = True):
        super().__init__()
        name = type(self).__name__
        self.num_features = _positive_int(name, "num_features", num_features)
        if momentum is not None and not 0.0 <= momentum <= 1.0:
            raise ValueError(f"{name}: momentum must be in [0, 1] or None (the cumulative average), got {momentum!r}")
        dtype = factory_dtype(dtype)
        self.eps, self.momentum = float(eps), None if momentum is None else float(momentum)
        self.affine, self.track_running_stats = bool(affine), bool(track_running_stats)
        self._bias = self.affine and bool(bias)  # as torch prints it: whether there is a bias
        self.weight = Parameter(np.ones((num_features,), dtype)) if affine else None
        self.bias = Parameter(np.zeros((num_features,), dtype)) if affine and bias else None
        if track_running_stats:
            self.register_buffer("running_mean", tracer.zeros((num_features,), dtype))
            self.register_buffer("running_var", tracer.ones((num_features,), dtype))
            self.register_buffer("num_batches_tracked", tracer.zeros((), "int64"))
        else:
            for b in ("running_mean", "running_var", "num_batches_tracked"):
                self.register_buffer(b, None)
        self._dtype = dtype
        place(self, device)

    def reset_running_stats(self) -> None:
        """running_mean to zeros, running_var to ones, num_batches_tracked to 0, in place (torch's)."""
        if self.track_running_stats:
            self.running_mean.copy_(tracer.zeros_like(self.running_mean))
            self.running_var.copy_(tracer.ones_like(self.running_var))
            self.num_batches_tracked.copy_(tracer.zeros_like(self.num_batches_tracked))

    def reset_parameters(self) -> None:
        """reset_running_stats(), weight to ones and bias to zeros (torch's)."""
        self.reset_running_stats()
        if self.weight is not None:
            self.weight._data[...] = 1
        if self.bias is not None:
            self.bias._data[...] = 0

    def _checked(self, x):
        x = check_input(self, x, self._dtype)
        if x.ndim not in self._ndims:
            wanted = " or ".join(f"{n}D" for n in self._ndims)
            raise ValueError(f"{type(self).__name__}: expected {wanted} input (got {x.ndim}D input of shape "
                             f"{x.shape})")
        return x

    def extra_repr(self) -> str:
        m = self.momentum
        return (f"{self.num_features}, eps={self.eps}, momentum={m}, affine={self.affine}, bias={self._bias}, "
                f"track_running_stats={self.track_running_stats}")


class _BatchNorm(_NormBase):
    """Normalize each channel (axis 1) over every other axis (F.batch_norm).

    While training, the batch's mean and (biased) variance normalize, num_batches_tracked counts the call, and
    the running statistics move towards the batch's (the variance unbiased, as torch): `running = (1 - m) *
    running + m * batch`, with m = momentum, or 1 / num_batches_tracked (the cumulative average) when momentum is
    None, written with copy_, so a compiled step updates them exactly as an eager call does. After eval() the
    running statistics normalize; without running statistics (track_running_stats=False) the batch's always do.
    """

    def forward(self, x):
        x = check_input(self, x, self._dtype)
        if x.ndim not in self._ndims or x.shape[1] != self.num_features:
            raise layer_errors.batch_norm_error(self, x.shape)
        momentum = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats:
            self.num_batches_tracked.copy_(self.num_batches_tracked + 1)
            if self.momentum is None:  # the cumulative moving average
                momentum = 1.0 / tracer.astype(self.num_batches_tracked, self._dtype)
        use_batch = self.training or self.running_mean is None
        update = self.training and self.track_running_stats
        return NF.batch_norm(x, self.running_mean if update or not use_batch else None,
                             self.running_var if update or not use_batch else None, self.weight, self.bias,
                             use_batch, momentum, self.eps)


class BatchNorm1d(_BatchNorm):
    """Batch normalization of (N, C) or (N, C, L) input over the batch (and length) axes, per channel.

    >>> bn = BatchNorm1d(3)
    >>> y = bn(np.arange(12, dtype="float32").reshape(4, 3))
    >>> y.numpy()[:, 0].astype(float).round(3).tolist(), bn.running_mean.numpy().astype(float).round(2).tolist()
    ([-1.342, -0.447, 0.447, 1.342], [0.45, 0.55, 0.65])
    """

    _ndims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch normalization of (N, C, H, W) input over the batch and spatial axes, per channel.

    >>> bn = BatchNorm2d(2)
    >>> _ = bn(np.ones((4, 2, 3, 3), "float32"))
    >>> bn.running_mean.numpy().tolist(), int(bn.num_batches_tracked.item())
    ([0.10000000149011612, 0.10000000149011612], 1)
    """

    _ndims = (4,)


class BatchNorm3d(_BatchNorm):
    """Batch normalization of (N, C, D, H, W) input over the batch and the three spatial axes, per channel.

    >>> bn = BatchNorm3d(2, momentum=None)  # the cumulative average of every batch seen
    >>> for v in (1.0, 3.0):
    ...     _ = bn(np.full((2, 2, 2, 2, 2), v, "float32"))
    >>> bn.running_mean.numpy().tolist(), int(bn.num_batches_tracked.item())
    ([2.0, 2.0], 2)
    """

    _ndims = (5,)


class _InstanceNorm(_NormBase):
    """Normalize each sample's channels over their spatial axes (F.instance_norm), batched or not.

    affine=False and track_running_stats=False by default, as torch's; with track_running_stats the running
    statistics (the mean over the batch of each instance's statistics) are updated while training and normalize
    after eval(). num_batches_tracked is kept as state (torch's key) but, as in torch, not counted.
    """

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float = 0.1, affine: bool = False,
                 track_running_stats: bool = False, device=None, dtype=None, *, bias: bool = True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype, bias=bias)

    def forward(self, x):
        x = self._checked(x)
        unbatched = x.ndim == self._ndims[0]
        channels = x.shape[0 if unbatched else 1]
        if channels != self.num_features:
            msg = (f"{type(self).__name__}: expected input's size at dim={0 if unbatched else 1} to match "
                   f"num_features ({self.num_features}), but got: {channels}.")
            if self.affine:
                raise ValueError(msg)
            warnings.warn(msg + " You can silence this warning by not passing in num_features, which is not used "
                          "because affine=False", stacklevel=2)
        if unbatched:
            x = tracer.expand_dims(x, 0)
        y = NF.instance_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                             self.training or not self.track_running_stats,
                             0.0 if self.momentum is None else self.momentum, self.eps)
        return tracer.squeeze(y, 0) if unbatched else y


class InstanceNorm1d(_InstanceNorm):
    """Instance normalization of (N, C, L) or unbatched (C, L) input over L, per sample and channel.

    >>> InstanceNorm1d(2)(np.array([[[0.0, 2.0], [1.0, 5.0]]], "float32")).numpy().round(3).tolist()
    [[[-1.0, 1.0], [-1.0, 1.0]]]
    """

    _ndims = (2, 3)


class InstanceNorm2d(_InstanceNorm):
    """Instance normalization of (N, C, H, W) or unbatched (C, H, W) input over H and W, per sample and
    channel."""

    _ndims = (3, 4)


class InstanceNorm3d(_InstanceNorm):
    """Instance normalization of (N, C, D, H, W) or unbatched (C, D, H, W) input over D, H and W, per sample and
    channel."""

    _ndims = (4, 5)


class GroupNorm(Module):
    """Normalize (N, C, ...) input over groups of C // num_groups channels (and every spatial position),
    then scale and shift per channel, as torch.nn.GroupNorm (no running statistics).

    >>> gn = GroupNorm(2, 4)
    >>> y = gn(np.arange(8, dtype="float32").reshape(1, 4, 2))
    >>> y.numpy()[0, :2].astype(float).round(3).tolist()
    [[-1.342, -0.447], [0.447, 1.342]]
    """

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5, affine: bool = True, device=None,
                 dtype=None, *, bias: bool = True):
        super().__init__()
        num_groups = _positive_int("GroupNorm", "num_groups", num_groups)
        num_channels = _positive_int("GroupNorm", "num_channels", num_channels)
        if num_channels % num_groups:
            raise ValueError(f"GroupNorm: num_channels ({num_channels}) must be divisible by num_groups "
                             f"({num_groups})")
        dtype = factory_dtype(dtype)
        self.num_groups, self.num_channels, self.eps, self.affine = num_groups, num_channels, float(eps), affine
        self._bias = bool(affine) and bool(bias)
        self.weight = Parameter(np.ones((num_channels,), dtype)) if affine else None
        self.bias = Parameter(np.zeros((num_channels,), dtype)) if affine and bias else None
        self._dtype = dtype
        place(self, device)

    def forward(self, x):
        x = check_input(self, x, self._dtype)
        if x.ndim < 2 or x.shape[1] != self.num_channels:
            raise ValueError(f"GroupNorm: expected input (N, {self.num_channels}, ...), got shape {x.shape}")
        return NF.group_norm(x, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, bias={self._bias}"


def _normalized_shape(layer: str, normalized_shape) -> tuple[int, ...]:
    shape = tuple(normalized_shape) if isinstance(normalized_shape, (tuple, list)) else (normalized_shape,)
    if not shape or not all(isinstance(d, (numbers.Integral, np.integer)) and not isinstance(d, bool) and d > 0
                            for d in shape):
        raise ValueError(f"{layer}: normalized_shape must be a positive int or a tuple of them, got "
                         f"{normalized_shape!r}")
    return tuple(int(d) for d in shape)


class RMSNorm(Module):
    """x / sqrt(mean(x**2 over the last len(normalized_shape) axes) + eps) * weight (ones), as torch.nn.RMSNorm;
    eps=None is the input dtype's machine epsilon.

    >>> RMSNorm(2)(np.array([[3.0, 4.0]], "float32")).numpy().astype(float).round(4).tolist()
    [[0.8485, 1.1314]]
    """

    def __init__(self, normalized_shape, eps: float | None = None, elementwise_affine: bool = True, device=None,
                 dtype=None):
        super().__init__()
        self.normalized_shape = _normalized_shape("RMSNorm", normalized_shape)
        self.eps, self.elementwise_affine = None if eps is None else float(eps), bool(elementwise_affine)
        dtype = factory_dtype(dtype)
        self.weight = Parameter(np.ones(self.normalized_shape, dtype)) if elementwise_affine else None
        self._dtype = dtype
        place(self, device)

    def reset_parameters(self) -> None:
        """Ones for the weight, as torch's RMSNorm.reset_parameters."""
        if self.weight is not None:
            self.weight._data[...] = 1

    def forward(self, x):
        x = check_input(self, x, self._dtype)
        return NF.rms_norm(x, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class LocalResponseNorm(Module):
    """Each channel divided by (k + alpha / size * the sum of squares over `size` neighbouring channels)**beta,
    as torch.nn.LocalResponseNorm (no parameters).

    >>> LocalResponseNorm(2, alpha=1.0, beta=1.0, k=0.0)(np.ones((1, 2, 1), "float32")).numpy().tolist()
    [[[2.0], [1.0]]]
    """

    def __init__(self, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0):
        super().__init__()
        self.size = _positive_int("LocalResponseNorm", "size", size)
        self.alpha, self.beta, self.k = alpha, beta, k

    def forward(self, x):
        return NF.local_response_norm(x, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self) -> str:
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"


__all__ = ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "GroupNorm", "InstanceNorm1d", "InstanceNorm2d",
           "InstanceNorm3d", "LocalResponseNorm", "RMSNorm"]
