"""torch.nn.functional's normalisations (re-exported from nn.functional): batch_norm, instance_norm, layer_norm,
rms_norm, group_norm, local_response_norm. Each is composed of tracer primitives (layer_norm over its flattened
axes is the one fused nn.layer_norm op), so it works eagerly, traced, and with loss.backward().

Running statistics are updated in place with copy_ (a compiled step writes them back as an eager call does),
from values cut off from the gradient, as torch's.

>>> import numpy as np, tracer
>>> x = tracer.tensor(np.arange(6, dtype="float32").reshape(3, 2))
>>> mean, var = tracer.zeros((2,)), tracer.ones((2,))
>>> y = batch_norm(x, mean, var, training=True, momentum=0.5)
>>> mean.numpy().tolist(), var.numpy().tolist()
([1.0, 1.5], [2.5, 2.5])
"""
from __future__ import annotations

import math
import numbers

import numpy as np

import tracer
from tracer import Tensor


def _tensor(x) -> Tensor:
    return x if isinstance(x, Tensor) else tracer.tensor(x)


def _optional(x):
    return None if x is None else _tensor(x)


def _per_channel(t: Tensor, ndim: int) -> Tensor:
    return tracer.reshape(t, (1, t.shape[0]) + (1,) * (ndim - 2))


def _affine(y: Tensor, weight, bias) -> Tensor:
    if weight is not None:
        y = y * _per_channel(_tensor(weight), y.ndim)
    if bias is not None:
        y = y + _per_channel(_tensor(bias), y.ndim)
    return y


def _update(running: Tensor, batch: Tensor, momentum) -> None:
    running.copy_(running * (1.0 - momentum) + tracer.stop_gradient(batch) * momentum)


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training: bool = False,  # noqa: A002
               momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Normalise each channel (axis 1) of (N, C, ...) input over every other axis, as torch's: with the batch's
    mean and biased variance when training (running_mean / running_var, when given, then move towards the batch's
    mean and unbiased variance by `momentum`, in place), else with the running statistics."""
    x = _tensor(input)
    if x.ndim < 2:
        raise ValueError(f"batch_norm: expected input with at least 2 dimensions (N, C, ...), got shape {x.shape}")
    axes = (0,) + tuple(range(2, x.ndim))
    if training:
        count = math.prod(x.shape[a] for a in axes)
        if count <= 1:
            raise ValueError(f"batch_norm: expected more than 1 value per channel when training, got input of "
                             f"shape {x.shape}")
        mean, var = tracer.mean(x, axis=axes), tracer.var(x, axis=axes)
        if running_mean is not None:
            _update(running_mean, mean, momentum)
        if running_var is not None:
            _update(running_var, var * (count / (count - 1)), momentum)
    else:
        if running_mean is None or running_var is None:
            raise ValueError("batch_norm: running_mean and running_var are needed when training=False")
        mean, var = _tensor(running_mean), _tensor(running_var)
    y = (x - _per_channel(mean, x.ndim)) * tracer.rsqrt(_per_channel(var, x.ndim) + eps)
    return _affine(y, weight, bias)


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None,  # noqa: A002
                  use_input_stats: bool = True, momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Normalise each (sample, channel) of (N, C, ...) input over its spatial axes, as torch's. With
    use_input_stats the instance's own statistics normalise, and running_mean / running_var (when given) move
    towards their mean over the batch (the variance unbiased); without, the running statistics normalise."""
    x = _tensor(input)
    if x.ndim < 3:
        raise ValueError(f"instance_norm: expected input (N, C, ...) with at least one spatial axis, got shape "
                         f"{x.shape}")
    axes = tuple(range(2, x.ndim))
    if not use_input_stats:
        if running_mean is None or running_var is None:
            raise ValueError("instance_norm: running_mean and running_var are needed when use_input_stats=False")
        y = (x - _per_channel(_tensor(running_mean), x.ndim)) * tracer.rsqrt(_per_channel(_tensor(running_var),
                                                                                         x.ndim) + eps)
        return _affine(y, weight, bias)
    count = math.prod(x.shape[a] for a in axes)
    if count <= 1:
        raise ValueError(f"instance_norm: expected more than 1 spatial element when training, got input of shape "
                         f"{x.shape}")
    mean = tracer.mean(x, axis=axes, keepdims=True)
    var = tracer.var(x, axis=axes, keepdims=True)
    if running_mean is not None:
        _update(running_mean, tracer.mean(tracer.reshape(mean, x.shape[:2]), axis=0), momentum)
    if running_var is not None:
        unbiased = tracer.reshape(var, x.shape[:2]) * (count / (count - 1))
        _update(running_var, tracer.mean(unbiased, axis=0), momentum)
    return _affine((x - mean) * tracer.rsqrt(var + eps), weight, bias)


def _is_shape(v) -> bool:
    if isinstance(v, (numbers.Integral, np.integer)) and not isinstance(v, bool):
        return True
    return isinstance(v, (tuple, list)) and all(isinstance(d, (numbers.Integral, np.integer))
                                                and not isinstance(d, bool) for d in v)


def _shape(fn: str, normalized_shape, x: Tensor) -> tuple[int, ...]:
    shape = (int(normalized_shape),) if isinstance(normalized_shape, (numbers.Integral, np.integer)) else \
        tuple(int(d) for d in normalized_shape)
    if not shape or x.ndim < len(shape) or x.shape[x.ndim - len(shape):] != shape:
        raise RuntimeError(f"{fn}: input of shape {x.shape} does not end with normalized_shape {shape}")
    return shape


def _checked_param(fn: str, name: str, t, shape: tuple[int, ...]):
    if t is None:
        return None
    t = _tensor(t)
    if t.shape != shape:
        raise RuntimeError(f"{fn}: {name} of shape {t.shape} must have the normalized_shape {shape}")
    return t


def layer_norm(input, normalized_shape=None, weight=None, bias=None, eps: float = 1e-5) -> Tensor:  # noqa: A002
    """Normalise over the last len(normalized_shape) axes, then scale by weight and shift by bias (each shaped
    normalized_shape), as torch's F.layer_norm(input, normalized_shape, weight, bias, eps).

    tracegrad's older form layer_norm(x, weight=None, bias=None, eps) (over the last axis) is still accepted:
    a second argument that is not a shape (an int or a tuple of ints) is the weight.
    """
    x = _tensor(input)
    if normalized_shape is not None and not _is_shape(normalized_shape):  # the older form: (x, weight, bias)
        normalized_shape, weight, bias = None, normalized_shape, weight
    if normalized_shape is None:
        if not x.ndim:
            raise ValueError("layer_norm: x must have at least one dimension, got a 0-d tensor")
        normalized_shape = x.shape[-1:]
    shape = _shape("layer_norm", normalized_shape, x)
    weight = _checked_param("layer_norm", "weight", weight, shape)
    bias = _checked_param("layer_norm", "bias", bias, shape)
    if len(shape) == 1:
        return tracer.layer_norm(x, weight, bias, eps=eps)
    flat = (math.prod(shape),)
    y = tracer.layer_norm(tracer.reshape(x, x.shape[:x.ndim - len(shape)] + flat),
                          None if weight is None else tracer.reshape(weight, flat),
                          None if bias is None else tracer.reshape(bias, flat), eps=eps)
    return tracer.reshape(y, x.shape)


def rms_norm(input, normalized_shape, weight=None, eps: float | None = None) -> Tensor:  # noqa: A002
    """x / sqrt(mean(x**2 over the last len(normalized_shape) axes) + eps) * weight, as torch's; eps=None is the
    dtype's machine epsilon (torch.finfo(x.dtype).eps)."""
    x = _tensor(input)
    shape = _shape("rms_norm", normalized_shape, x)
    weight = _checked_param("rms_norm", "weight", weight, shape)
    if eps is None:
        eps = float(np.finfo(x.dtype).eps)
    axes = tuple(range(x.ndim - len(shape), x.ndim))
    y = x * tracer.rsqrt(tracer.mean(x * x, axis=axes, keepdims=True) + eps)
    return y if weight is None else y * weight


def group_norm(input, num_groups: int, weight=None, bias=None, eps: float = 1e-5) -> Tensor:  # noqa: A002
    """Normalise (N, C, ...) input over groups of C // num_groups channels and every spatial position, then scale
    and shift per channel, as torch's."""
    x = _tensor(input)
    if x.ndim < 2:
        raise RuntimeError(f"group_norm: expected input (N, C, ...) with at least 2 dimensions, got shape {x.shape}")
    if num_groups < 1 or x.shape[1] % num_groups:
        raise RuntimeError(f"group_norm: expected the number of channels ({x.shape[1]}) to be divisible by "
                           f"num_groups ({num_groups}), input of shape {x.shape}")
    groups = tracer.reshape(x, (x.shape[0], num_groups, math.prod(x.shape[1:]) // num_groups))
    mean = tracer.mean(groups, axis=2, keepdims=True)
    var = tracer.var(groups, axis=2, keepdims=True)
    return _affine(tracer.reshape((groups - mean) * tracer.rsqrt(var + eps), x.shape), weight, bias)


def local_response_norm(input, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0) -> Tensor:  # noqa: A002
    """x / (k + alpha / size * (sum of x**2 over the channel window [c - size // 2, c + (size - 1) // 2]))**beta,
    over axis 1 of (N, C, ...) input, zero-padded at the ends, as torch's."""
    x = _tensor(input)
    if x.ndim < 3:
        raise ValueError(f"local_response_norm: expected 3D or higher dimensionality input (got {x.ndim} "
                         f"dimensions)")
    if x.shape[0] == 0:
        return x
    sq = x * x
    channels = x.shape[1]
    before, after = size // 2, (size - 1) // 2
    pads = [t for t in (tracer.zeros((x.shape[0], before) + x.shape[2:], x.dtype) if before else None, sq,
                        tracer.zeros((x.shape[0], after) + x.shape[2:], x.dtype) if after else None) if t is not None]
    padded = tracer.concat(pads, axis=1) if len(pads) > 1 else sq
    window = padded[:, 0:channels]
    for i in range(1, size):
        window = window + padded[:, i:i + channels]
    return x / tracer.power(window * (alpha / size) + k, beta)


__all__ = ["batch_norm", "group_norm", "instance_norm", "layer_norm", "local_response_norm", "rms_norm"]
