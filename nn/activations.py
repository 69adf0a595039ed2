"""Activation modules, as torch.nn's: the constructor arguments (inplace= wherever torch takes it), attribute
names, PReLU's weight parameter and repr as torch's. Each calls its function in nn/activations_functional.py,
built from tracer primitives, so it works eagerly, traced, and with loss.backward().

>>> import numpy as np
>>> x = np.array([-2.0, 0.0, 2.0], "float32")
>>> LeakyReLU(0.1)(x).numpy().tolist(), repr(LeakyReLU(0.2, inplace=True))
([-0.20000000298023224, 0.0, 2.0], 'LeakyReLU(negative_slope=0.2, inplace=True)')
"""
from __future__ import annotations

import warnings

import numpy as np

import tracer
from tracer import Tensor

from . import activations_functional as AF
from .activations_functional import elu, leaky_relu, mish, softplus  # noqa: F401  (nn.activations.elu, ...)
from .module import Module, Parameter
from .parameter import factory_dtype, place


def _tensor(x) -> Tensor:
    return x if isinstance(x, Tensor) else tracer.tensor(x)


def _legacy_softmax_dim(ndim: int) -> int:
    """torch's choice when nn.Softmax(dim=None) is called: 0 for 0-, 1- and 3-d input, else 1."""
    return 0 if ndim in (0, 1, 3) else 1


class _Inplace(Module):
    """An activation with torch's `inplace=False` argument, printed as torch's (inplace=True only when set)."""

    def __init__(self, inplace: bool = False):
        super().__init__()
        self.inplace = inplace

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class ReLU(_Inplace):
    """max(x, 0)."""

    def forward(self, input):  # noqa: A002
        return AF.relu(input, self.inplace)


class SiLU(_Inplace):
    """x * sigmoid(x)."""

    def forward(self, input):  # noqa: A002
        return AF.silu(input, self.inplace)


class Mish(_Inplace):
    """x * tanh(softplus(x))."""

    def forward(self, input):  # noqa: A002
        return AF.mish(input, self.inplace)


class SELU(_Inplace):
    """scale * elu(x, alpha) with torch's constants."""

    def forward(self, input):  # noqa: A002
        return AF.selu(input, self.inplace)


class Hardsigmoid(_Inplace):
    """relu6(x + 3) / 6."""

    def forward(self, input):  # noqa: A002
        return AF.hardsigmoid(input, self.inplace)

    def extra_repr(self) -> str:
        return ""  # torch prints Hardsigmoid() whatever inplace is


class Hardswish(Hardsigmoid):
    """x * relu6(x + 3) / 6."""

    def forward(self, input):  # noqa: A002
        return AF.hardswish(input, self.inplace)


class LeakyReLU(Module):
    """x where x > 0, else negative_slope * x."""

    def __init__(self, negative_slope: float = 0.01, inplace: bool = False):
        super().__init__()
        self.negative_slope, self.inplace = negative_slope, inplace

    def forward(self, input):  # noqa: A002
        return AF.leaky_relu(input, self.negative_slope, self.inplace)

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace else "")


class ELU(Module):
    """x where x > 0, else alpha * (exp(x) - 1)."""

    def __init__(self, alpha: float = 1.0, inplace: bool = False):
        super().__init__()
        self.alpha, self.inplace = alpha, inplace

    def forward(self, input):  # noqa: A002
        return AF.elu(input, self.alpha, self.inplace)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class CELU(ELU):
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1))."""

    def forward(self, input):  # noqa: A002
        return AF.celu(input, self.alpha, self.inplace)


class Hardtanh(Module):
    """x limited to [min_val, max_val] (min_value / max_value: torch's deprecated spellings)."""

    def __init__(self, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False,
                 min_value: float | None = None, max_value: float | None = None):
        super().__init__()
        if min_value is not None or max_value is not None:
            warnings.warn("Hardtanh: keyword arguments min_value and max_value are deprecated; use min_val and "
                          "max_val", DeprecationWarning, stacklevel=2)
            min_val = min_val if min_value is None else min_value
            max_val = max_val if max_value is None else max_value
        if max_val <= min_val:
            raise ValueError(f"Hardtanh: max_val ({max_val}) must be greater than min_val ({min_val})")
        self.min_val, self.max_val, self.inplace = min_val, max_val, inplace

    def forward(self, input):  # noqa: A002
        return AF.hardtanh(input, self.min_val, self.max_val, self.inplace)

    def extra_repr(self) -> str:
        return f"min_val={self.min_val}, max_val={self.max_val}" + (", inplace=True" if self.inplace else "")


class ReLU6(Hardtanh):
    """min(max(x, 0), 6)."""

    def __init__(self, inplace: bool = False):
        super().__init__(0.0, 6.0, inplace)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class Threshold(Module):
    """x where x > threshold, else value."""

    def __init__(self, threshold: float, value: float, inplace: bool = False):
        super().__init__()
        self.threshold, self.value, self.inplace = threshold, value, inplace

    def forward(self, input):  # noqa: A002
        return AF.threshold(input, self.threshold, self.value, self.inplace)

    def extra_repr(self) -> str:
        return f"threshold={self.threshold}, value={self.value}" + (", inplace=True" if self.inplace else "")


class Softplus(Module):
    """log(1 + exp(beta * x)) / beta, x itself above threshold."""

    def __init__(self, beta: float = 1.0, threshold: float = 20.0):
        super().__init__()
        self.beta, self.threshold = beta, threshold

    def forward(self, input):  # noqa: A002
        return AF.softplus(input, self.beta, self.threshold)

    def extra_repr(self) -> str:
        return f"beta={self.beta}, threshold={self.threshold}"


class Softshrink(Module):
    """x - lambd above lambd, x + lambd below -lambd, else 0."""

    def __init__(self, lambd: float = 0.5):
        super().__init__()
        self.lambd = lambd

    def forward(self, input):  # noqa: A002
        return AF.softshrink(input, self.lambd)

    def extra_repr(self) -> str:
        return str(self.lambd)


class Hardshrink(Softshrink):
    """x where |x| > lambd, else 0."""

    def forward(self, input):  # noqa: A002
        return AF.hardshrink(input, self.lambd)


class PReLU(Module):
    """x where x > 0, else weight * x: weight (num_parameters,) learnt, one slope for all or one per channel
    (axis 1), initialised to `init`, as torch.nn.PReLU."""

    def __init__(self, num_parameters: int = 1, init: float = 0.25, device=None, dtype=None):
        super().__init__()
        if isinstance(num_parameters, bool) or not isinstance(num_parameters, (int, np.integer)) or num_parameters < 1:
            raise ValueError(f"PReLU: num_parameters must be a positive int, got {num_parameters!r}")
        self.num_parameters, self.init = int(num_parameters), init
        self.weight = Parameter(np.full((self.num_parameters,), init, factory_dtype(dtype)))
        place(self, device)

    def reset_parameters(self) -> None:
        """Refill the weight with `init`, as torch's PReLU.reset_parameters."""
        self.weight._data[...] = self.init

    def forward(self, input):  # noqa: A002
        return AF.prelu(input, self.weight)

    def extra_repr(self) -> str:
        return f"num_parameters={self.num_parameters}"


class _Stateless(Module):
    _fn = None

    def forward(self, input):  # noqa: A002
        return type(self)._fn(input)


class Softsign(_Stateless):
    """x / (1 + |x|)."""

    _fn = staticmethod(AF.softsign)


class Tanhshrink(_Stateless):
    """x - tanh(x)."""

    _fn = staticmethod(AF.tanhshrink)


class LogSigmoid(_Stateless):
    """log(sigmoid(x)), stable for every x (one primitive)."""

    _fn = staticmethod(lambda x: tracer.log_sigmoid(_tensor(x)))


class Tanh(_Stateless):
    """tanh(x)."""

    _fn = staticmethod(lambda x: tracer.tanh(_tensor(x)))


class Sigmoid(_Stateless):
    """1 / (1 + exp(-x))."""

    _fn = staticmethod(lambda x: tracer.sigmoid(_tensor(x)))


class GELU(Module):
    """x * Phi(x), exact (erf) or approximate="tanh", as torch.nn.GELU."""

    def __init__(self, approximate: str = "none"):
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError(f"GELU: approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate

    def forward(self, input):  # noqa: A002
        return tracer.gelu(_tensor(input), approximate=self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class GLU(Module):
    """a * sigmoid(b) of the two halves of x along `dim`."""

    def __init__(self, dim: int = -1):
        super().__init__()
        self.dim = dim

    def forward(self, input):  # noqa: A002
        return AF.glu(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class Softmax(Module):
    """softmax along `dim` (torch's implicit choice when dim is None: 0 for 0-, 1- and 3-d input, else 1)."""

    def __init__(self, dim: int | None = None):
        super().__init__()
        self.dim = dim

    def forward(self, input):  # noqa: A002
        x = _tensor(input)
        return tracer.softmax(x, axis=_legacy_softmax_dim(x.ndim) if self.dim is None else self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class LogSoftmax(Softmax):
    """log_softmax along `dim` (the same implicit choice as Softmax when dim is None)."""

    def forward(self, input):  # noqa: A002
        x = _tensor(input)
        return tracer.log_softmax(x, axis=_legacy_softmax_dim(x.ndim) if self.dim is None else self.dim)


class Softmin(Softmax):
    """softmax(-x) along `dim` (the same implicit choice as Softmax when dim is None)."""

    def forward(self, input):  # noqa: A002
        return AF.softmin(input, self.dim)


class Softmax2d(Module):
    """softmax over the channels (axis -3) of (N, C, H, W) or (C, H, W) input."""

    def forward(self, input):  # noqa: A002
        x = _tensor(input)
        if x.ndim not in (3, 4):
            raise ValueError(f"Softmax2d: expected input to be 3D or 4D, got {x.ndim}D instead (shape {x.shape})")
        return tracer.softmax(x, axis=-3)


__all__ = ["CELU", "ELU", "GELU", "GLU", "Hardshrink", "Hardsigmoid", "Hardswish", "Hardtanh", "LeakyReLU",
           "LogSigmoid", "LogSoftmax", "Mish", "PReLU", "ReLU", "ReLU6", "SELU", "SiLU", "Sigmoid", "Softmax",
           "Softmax2d", "Softmin", "Softplus", "Softshrink", "Softsign", "Tanh", "Tanhshrink", "Threshold", "elu",
           "leaky_relu", "mish", "softplus"]
