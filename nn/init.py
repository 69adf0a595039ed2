"""Weight initialisers, in place, with PyTorch's fan and gain rules and one seedable generator.

>>> import numpy as np
>>> from nn import Parameter
>>> manual_seed(0)
>>> w = kaiming_uniform_(Parameter(np.zeros((4, 9), "float32")), a=5 ** 0.5)
>>> bool(abs(w.numpy()).max() <= 1 / 3)
True
"""
from __future__ import annotations

import math

import numpy as np

from tracer import Tensor
from tracer.tensor import array_module_of

_generator = np.random.default_rng(0)  # fixed by default, as torch's is, so models are reproducible


def manual_seed(seed: int) -> None:
    """Reseed the generator that every initialiser (and so every layer's default init) draws from."""
    global _generator
    _generator = np.random.default_rng(seed)


def generator() -> np.random.Generator:
    """The generator the initialisers draw from (for code that wants the same reproducible stream)."""
    return _generator


def _fill(t, values):
    """Write `values` into the tensor or array `t` in place, keeping its dtype; returns `t`."""
    target = t._data if isinstance(t, Tensor) else t
    if target is None:
        raise TypeError("an initialiser needs a concrete tensor, not a traced one")
    if type(target) is not np.ndarray:  # a GPU tensor: CuPy takes its own arrays only
        values = array_module_of(target).asarray(values)
    target[...] = values
    return t


def _shape(t) -> tuple[int, ...]:
    return tuple(t.shape)


def uniform_(t, a: float = 0.0, b: float = 1.0):
    """Fill with U(a, b)."""
    return _fill(t, _generator.uniform(a, b, _shape(t)))


def normal_(t, mean: float = 0.0, std: float = 1.0):
    """Fill with N(mean, std**2)."""
    return _fill(t, _generator.normal(mean, std, _shape(t)))


def constant_(t, value: float):
    """Fill t with `value`, in place; returns t."""
    return _fill(t, value)


def zeros_(t):
    """Fill t with zeros, in place; returns t."""
    return _fill(t, 0.0)


def ones_(t):
    """Fill t with ones, in place; returns t."""
    return _fill(t, 1.0)


def fan_in_and_fan_out(shape) -> tuple[int, int]:
    """PyTorch's fans: (in, out) for a matrix (out, in); for conv weights (out, in, *k) both times the
    receptive field size."""
    if len(shape) < 2:
        raise ValueError(f"fan in and fan out need at least 2 dimensions, got shape {tuple(shape)}")
    receptive = int(np.prod(shape[2:], dtype=np.int64)) if len(shape) > 2 else 1
    return shape[1] * receptive, shape[0] * receptive


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """The recommended gain of torch.nn.init.calculate_gain."""
    if nonlinearity in ("linear", "conv1d", "conv2d", "conv3d", "sigmoid", "identity"):
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else float(param)
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"unsupported nonlinearity {nonlinearity!r}")


def kaiming_uniform_(t, a: float = 0.0, mode: str = "fan_in", nonlinearity: str = "leaky_relu"):
    """Fill with U(-bound, bound), bound = gain * sqrt(3 / fan), as torch.nn.init.kaiming_uniform_."""
    fan_in, fan_out = fan_in_and_fan_out(_shape(t))
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"mode must be 'fan_in' or 'fan_out', got {mode!r}")
    fan = fan_in if mode == "fan_in" else fan_out
    if fan == 0:  # a zero-element weight (Linear(0, n)): nothing to fill, as torch
        return t
    bound = calculate_gain(nonlinearity, a) * math.sqrt(3.0 / fan)
    return uniform_(t, -bound, bound)


def xavier_uniform_(t, gain: float = 1.0):
    """Fill with U(-bound, bound), bound = gain * sqrt(6 / (fan_in + fan_out))."""
    fan_in, fan_out = fan_in_and_fan_out(_shape(t))
    bound = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return uniform_(t, -bound, bound)


__all__ = ["calculate_gain", "constant_", "fan_in_and_fan_out", "generator", "kaiming_uniform_", "manual_seed",
           "normal_", "ones_", "uniform_", "xavier_uniform_", "zeros_"]
