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
import warnings

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


def _draws(generator) -> np.random.Generator:
    """The numpy Generator to draw from: the module's (manual_seed), or the one `generator=` names."""
    if generator is None:
        return _generator
    if isinstance(generator, np.random.Generator):
        return generator
    inner = getattr(generator, "_rng", None)  # a tracer.Generator: its own stream, as torch's generator=
    if isinstance(inner, np.random.Generator):
        return inner
    raise TypeError(f"generator must be a tracer.Generator, a numpy Generator or None, got {type(generator).__name__}")


def uniform_(tensor, a: float = 0.0, b: float = 1.0, generator=None):
    """Fill with U(a, b), in place; returns the tensor."""
    return _fill(tensor, _draws(generator).uniform(a, b, _shape(tensor)))


def normal_(tensor, mean: float = 0.0, std: float = 1.0, generator=None):
    """Fill with N(mean, std**2), in place; returns the tensor."""
    return _fill(tensor, _draws(generator).normal(mean, std, _shape(tensor)))


def trunc_normal_(tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0, b: float = 2.0, generator=None):
    """Fill with N(mean, std**2) truncated to [a, b] (bounds in the values' units, as torch), by torch's
    method: uniform draws between the bounds' CDF values, mapped back through the inverse normal CDF."""
    if mean < a - 2 * std or mean > b + 2 * std:
        warnings.warn("mean is more than 2 std from [a, b] in nn.init.trunc_normal_. The distribution of values "
                      "may be incorrect.", stacklevel=2)
    lo, hi = _normal_cdf((a - mean) / std), _normal_cdf((b - mean) / std)
    u = _draws(generator).uniform(lo, hi, _shape(tensor))
    return _fill(tensor, np.clip(mean + std * _normal_icdf(u), a, b))


def _normal_cdf(x: float) -> float:
    return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0


_erf = np.frompyfunc(math.erf, 1, 1)


def _normal_icdf(p: np.ndarray) -> np.ndarray:
    """The standard normal quantile of p in (0, 1): Acklam's rational approximation, then two Newton steps
    on the exact CDF (float64 accurate)."""
    p = np.clip(np.asarray(p, "float64"), 1e-300, 1 - 1e-16)
    a = [-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02, 1.383577518672690e+02,
         -3.066479806614716e+01, 2.506628277459239e+00]
    b = [-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02, 6.680131188771972e+01,
         -1.328068155288572e+01]
    c = [-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00, -2.549732539343734e+00,
         4.374664141464968e+00, 2.938163982698783e+00]
    d = [7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00, 3.754408661907416e+00]
    q = np.where(p < 0.5, p, 1 - p)
    tail = np.sqrt(-2 * np.log(np.maximum(q, 1e-300)))
    x_tail = (((((c[0] * tail + c[1]) * tail + c[2]) * tail + c[3]) * tail + c[4]) * tail + c[5]) / \
        ((((d[0] * tail + d[1]) * tail + d[2]) * tail + d[3]) * tail + 1)
    r = (p - 0.5) ** 2
    x_mid = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * (p - 0.5) / \
        (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1)
    x = np.where(q < 0.02425, np.where(p < 0.5, x_tail, -x_tail), x_mid)
    for _ in range(2):
        err = (1 + _erf(x / math.sqrt(2)).astype("float64")) / 2 - p
        x = x - err * math.sqrt(2 * math.pi) * np.exp(x * x / 2)
    return x


def constant_(tensor, val: float):
    """Fill with `val`, in place; returns the tensor."""
    return _fill(tensor, val)


def zeros_(tensor):
    """Fill with zeros, in place; returns the tensor."""
    return _fill(tensor, 0.0)


def ones_(tensor):
    """Fill with ones, in place; returns the tensor."""
    return _fill(tensor, 1.0)


def eye_(tensor):
    """Fill a 2-d tensor with the identity (ones on the diagonal of a possibly non-square matrix)."""
    shape = _shape(tensor)
    if len(shape) != 2:
        raise ValueError(f"eye_: only tensors with 2 dimensions are supported, got shape {shape}")
    return _fill(tensor, np.eye(*shape))


def dirac_(tensor, groups: int = 1):
    """Fill a 3-, 4- or 5-d convolution weight with the Dirac delta, so the convolution keeps its input's
    channels (in each of `groups` groups); the other entries are zero."""
    shape = _shape(tensor)
    if len(shape) not in (3, 4, 5):
        raise ValueError(f"dirac_: only tensors with 3, 4, or 5 dimensions are supported, got shape {shape}")
    if shape[0] % groups:
        raise ValueError(f"dirac_: dim 0 must be divisible by groups, got {shape[0]} and groups={groups}")
    per_group = shape[0] // groups
    values = np.zeros(shape)
    centre = tuple(k // 2 for k in shape[2:])
    for g in range(groups):
        for d in range(min(per_group, shape[1])):
            values[(g * per_group + d, d) + centre] = 1
    return _fill(tensor, values)


def fan_in_and_fan_out(shape) -> tuple[int, int]:
    """PyTorch's fans: (in, out) for a matrix (out, in); for conv weights (out, in, *k) both times the
    receptive field size. `_calculate_fan_in_and_fan_out(tensor)` is torch's spelling."""
    shape = tuple(shape)
    if len(shape) < 2:
        raise ValueError(f"Fan in and fan out can not be computed for tensor with fewer than 2 dimensions "
                         f"(shape {shape})")
    receptive = int(np.prod(shape[2:], dtype=np.int64)) if len(shape) > 2 else 1
    return shape[1] * receptive, shape[0] * receptive


def _calculate_fan_in_and_fan_out(tensor) -> tuple[int, int]:
    return fan_in_and_fan_out(_shape(tensor))


_LINEAR = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
           "sigmoid")


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """torch.nn.init.calculate_gain: 1 for linear, conv and sigmoid, 5/3 for tanh, sqrt(2) for relu,
    sqrt(2 / (1 + slope**2)) for leaky_relu (param the negative slope, default 0.01), 3/4 for selu."""
    if nonlinearity in _LINEAR:
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif not isinstance(param, bool) and isinstance(param, (int, float)):
            slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _fan(tensor, mode: str) -> int:
    if not isinstance(mode, str) or mode.lower() not in ("fan_in", "fan_out"):
        raise ValueError(f"mode {mode!r} not supported, please use one of ['fan_in', 'fan_out']")
    fan_in, fan_out = fan_in_and_fan_out(_shape(tensor))
    return fan_in if mode.lower() == "fan_in" else fan_out


def _kaiming_std(tensor, a, mode, nonlinearity) -> float | None:
    if 0 in _shape(tensor):  # a zero-element weight (Linear(0, n)): nothing to fill, as torch
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=3)
        return None
    return calculate_gain(nonlinearity, a) / math.sqrt(_fan(tensor, mode))


def kaiming_uniform_(tensor, a: float = 0, mode: str = "fan_in", nonlinearity: str = "leaky_relu", generator=None):
    """Fill with U(-bound, bound), bound = gain * sqrt(3 / fan), as torch.nn.init.kaiming_uniform_
    (a: leaky_relu's negative slope; mode: 'fan_in' or 'fan_out')."""
    std = _kaiming_std(tensor, a, mode, nonlinearity)
    return tensor if std is None else uniform_(tensor, -math.sqrt(3.0) * std, math.sqrt(3.0) * std, generator)


def kaiming_normal_(tensor, a: float = 0, mode: str = "fan_in", nonlinearity: str = "leaky_relu", generator=None):
    """Fill with N(0, std**2), std = gain / sqrt(fan), as torch.nn.init.kaiming_normal_."""
    std = _kaiming_std(tensor, a, mode, nonlinearity)
    return tensor if std is None else normal_(tensor, 0.0, std, generator)


def xavier_uniform_(tensor, gain: float = 1.0, generator=None):
    """Fill with U(-bound, bound), bound = gain * sqrt(6 / (fan_in + fan_out))."""
    fan_in, fan_out = fan_in_and_fan_out(_shape(tensor))
    bound = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return uniform_(tensor, -bound, bound, generator)


def xavier_normal_(tensor, gain: float = 1.0, generator=None):
    """Fill with N(0, std**2), std = gain * sqrt(2 / (fan_in + fan_out))."""
    fan_in, fan_out = fan_in_and_fan_out(_shape(tensor))
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / (fan_in + fan_out)), generator)


def orthogonal_(tensor, gain: float = 1, generator=None):
    """Fill with a (semi-)orthogonal matrix times gain, as torch: the Q of a QR decomposition of a normal
    matrix (rows = dim 0, the other dimensions flattened), its signs fixed by R's diagonal."""
    shape = _shape(tensor)
    if len(shape) < 2:
        raise ValueError(f"orthogonal_: only tensors with 2 or more dimensions are supported, got shape {shape}")
    if 0 in shape:
        return tensor
    rows = shape[0]
    cols = int(np.prod(shape)) // rows
    flat = _draws(generator).normal(0.0, 1.0, (rows, cols))
    if rows < cols:
        flat = flat.T
    q, r = np.linalg.qr(flat)
    q = q * np.sign(np.diag(r))
    if rows < cols:
        q = q.T
    return _fill(tensor, gain * q.reshape(shape))


def sparse_(tensor, sparsity: float, std: float = 0.01, generator=None):
    """Fill a 2-d tensor with N(0, std**2) and zero ceil(sparsity * rows) randomly chosen rows of every
    column, as torch.nn.init.sparse_."""
    shape = _shape(tensor)
    if len(shape) != 2:
        raise ValueError(f"sparse_: only tensors with 2 dimensions are supported, got shape {shape}")
    rows, cols = shape
    zeros = int(math.ceil(sparsity * rows))
    g = _draws(generator)
    values = g.normal(0.0, std, shape)
    for col in range(cols):
        values[g.permutation(rows)[:zeros], col] = 0
    return _fill(tensor, values)


def _deprecated(new):
    """torch's old names without the underscore (nn.init.normal, ...): the same, with torch's warning."""
    old = new.__name__[:-1]

    def alias(*args, **kwargs):
        warnings.warn(f"`nn.init.{old}` is now deprecated in favor of `nn.init.{new.__name__}`.", FutureWarning,
                      stacklevel=2)
        return new(*args, **kwargs)

    alias.__name__ = alias.__qualname__ = old
    alias.__doc__ = f"Deprecated (as in torch): `{new.__name__}`."
    return alias


uniform, normal, constant, eye, dirac = (_deprecated(f) for f in (uniform_, normal_, constant_, eye_, dirac_))
xavier_uniform, xavier_normal = _deprecated(xavier_uniform_), _deprecated(xavier_normal_)
kaiming_uniform, kaiming_normal = _deprecated(kaiming_uniform_), _deprecated(kaiming_normal_)
orthogonal, sparse = _deprecated(orthogonal_), _deprecated(sparse_)


__all__ = ["calculate_gain", "constant_", "dirac_", "eye_", "fan_in_and_fan_out", "generator", "kaiming_normal_",
           "kaiming_uniform_", "manual_seed", "normal_", "ones_", "orthogonal_", "sparse_", "trunc_normal_",
           "uniform_", "xavier_normal_", "xavier_uniform_", "zeros_"]
