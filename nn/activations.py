"""Activation functions and their modules, as torch.nn's: built from tracer primitives, so each works
eagerly and traced and is differentiated through its parts.

>>> import numpy as np
>>> x = np.array([-2.0, 0.0, 2.0], "float32")
>>> LeakyReLU(0.1)(x).numpy().tolist()
[-0.20000000298023224, 0.0, 2.0]
"""
from __future__ import annotations

import tracer
from tracer import Tensor

from .module import Module


def _tensor(x) -> Tensor:
    return x if isinstance(x, Tensor) else tracer.tensor(x)


def leaky_relu(x, negative_slope: float = 0.01) -> Tensor:
    """x where x > 0, else negative_slope * x."""
    x = _tensor(x)
    return tracer.where(x > 0, x, x * negative_slope)


def elu(x, alpha: float = 1.0) -> Tensor:
    """x where x > 0, else alpha * (exp(x) - 1); exp sees 0 where x > 0, so a large x never overflows into its
    gradient. A where, not minimum(x, 0): minimum splits its tie at 0, which halved the slope there; torch's
    gradient at 0 is the lower branch's, alpha."""
    x = _tensor(x)
    return tracer.where(x > 0, x, (tracer.exp(tracer.where(x > 0, 0.0, x)) - 1.0) * alpha)


def softplus(x, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """log(1 + exp(beta * x)) / beta, and x itself where beta * x > threshold, as torch.

    Written as max(z, 0) + log(1 + exp(-|z|)) so that exp never overflows."""
    x = _tensor(x)
    z = x * beta
    smooth = (tracer.maximum(z, 0.0) + tracer.log(tracer.exp(-tracer.abs(z)) + 1.0)) * (1.0 / beta)
    return tracer.where(z > threshold, x, smooth)


def mish(x) -> Tensor:
    """x * tanh(softplus(x))."""
    x = _tensor(x)
    return x * tracer.tanh(softplus(x))


def _legacy_softmax_dim(ndim: int) -> int:
    """torch's choice when nn.Softmax(dim=None) is called: 0 for 0-, 1- and 3-d input, else 1."""
    return 0 if ndim in (0, 1, 3) else 1


class ReLU(Module):
    """max(x, 0)."""

    def forward(self, x):
        return tracer.relu(_tensor(x))


class GELU(Module):
    """x * Phi(x), exact (erf) or approximate="tanh", as torch.nn.GELU."""

    def __init__(self, approximate: str = "none"):
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError(f"GELU: approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate

    def forward(self, x):
        return tracer.gelu(_tensor(x), approximate=self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class Tanh(Module):
    """tanh(x)."""

    def forward(self, x):
        return tracer.tanh(_tensor(x))


class Sigmoid(Module):
    """1 / (1 + exp(-x))."""

    def forward(self, x):
        return tracer.sigmoid(_tensor(x))


class SiLU(Module):
    """x * sigmoid(x)."""

    def forward(self, x):
        return tracer.silu(_tensor(x))


class LeakyReLU(Module):
    """leaky_relu(x, negative_slope)."""

    def __init__(self, negative_slope: float = 0.01):
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, x):
        return leaky_relu(x, self.negative_slope)

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}"


class ELU(Module):
    """elu(x, alpha)."""

    def __init__(self, alpha: float = 1.0):
        super().__init__()
        self.alpha = alpha

    def forward(self, x):
        return elu(x, self.alpha)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}"


class Softplus(Module):
    """softplus(x, beta, threshold)."""

    def __init__(self, beta: float = 1.0, threshold: float = 20.0):
        super().__init__()
        self.beta, self.threshold = beta, threshold

    def forward(self, x):
        return softplus(x, self.beta, self.threshold)

    def extra_repr(self) -> str:
        return f"beta={self.beta}, threshold={self.threshold}"


class Mish(Module):
    """x * tanh(softplus(x))."""

    def forward(self, x):
        return mish(x)


class Softmax(Module):
    """softmax along `dim` (torch's implicit choice when dim is None: 0 for 0-, 1- and 3-d input, else 1)."""

    def __init__(self, dim: int | None = None):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        x = _tensor(x)
        return tracer.softmax(x, axis=_legacy_softmax_dim(x.ndim) if self.dim is None else self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class LogSoftmax(Softmax):
    """log_softmax along `dim` (the same implicit choice as Softmax when dim is None)."""

    def forward(self, x):
        x = _tensor(x)
        return tracer.log_softmax(x, axis=_legacy_softmax_dim(x.ndim) if self.dim is None else self.dim)


__all__ = ["ELU", "GELU", "LeakyReLU", "LogSoftmax", "Mish", "ReLU", "SiLU", "Sigmoid", "Softmax", "Softplus", "Tanh",
           "elu", "leaky_relu", "mish", "softplus"]
