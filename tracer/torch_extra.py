"""torch's functions that tracegrad spelled no other way: isnan/isinf/isfinite, logical_*, clamp_min/max, addcmul,
addcdiv, diff, tile, ravel, the stacks, multinomial, bernoulli, normal, randperm (the value-dependent ones,
nonzero, unique, ..., are tracer/data_dependent.py's).

All of them are compositions of the primitive ops, so they trace and differentiate.
"""
from __future__ import annotations

import math

import numpy as np

from . import create as _create
from . import shape as _shape
from .bitwise import bitwise_and, bitwise_not, bitwise_or, bitwise_xor
from .math import as_tensor, astype, equal, less, less_equal, multiply, not_equal, where
from .placement import tensor_device
from .sort_ops import argsort, topk
from .special_math import clamp, copysign
from .tensor import Tensor
from .torch_methods import _dim, repeat

_FLOATS = ("float16", "float32", "float64")


# ---------------------------------------------------------------- elementwise predicates and logic


def isnan(input) -> Tensor:  # noqa: A002 (torch's names)
    """True where input is NaN (never for integer tensors)."""
    x = as_tensor(input)
    return not_equal(x, x) if x.dtype in _FLOATS else _shape.zeros_like(x, "bool")


def isinf(input) -> Tensor:  # noqa: A002
    """True where input is +inf or -inf."""
    x = as_tensor(input)
    return equal(abs(x), math.inf) if x.dtype in _FLOATS else _shape.zeros_like(x, "bool")


def isposinf(input) -> Tensor:  # noqa: A002
    """True where input is +inf."""
    x = as_tensor(input)
    return equal(x, math.inf) if x.dtype in _FLOATS else _shape.zeros_like(x, "bool")


def isneginf(input) -> Tensor:  # noqa: A002
    """True where input is -inf."""
    x = as_tensor(input)
    return equal(x, -math.inf) if x.dtype in _FLOATS else _shape.zeros_like(x, "bool")


def isfinite(input) -> Tensor:  # noqa: A002
    """True where input is neither NaN nor infinite (|x| < inf is False for both).

    >>> import tracer
    >>> tracer.isfinite(tracer.tensor([1.0, float("inf"), float("nan")])).tolist()
    [True, False, False]
    """
    x = as_tensor(input)
    return less(abs(x), math.inf) if x.dtype in _FLOATS else _shape.ones_like(x, "bool")


def isreal(input) -> Tensor:  # noqa: A002
    """True everywhere: tracegrad has no complex dtype."""
    return _shape.ones_like(as_tensor(input), "bool")


def signbit(input) -> Tensor:  # noqa: A002
    """True where the sign bit is set (negative numbers and -0.0)."""
    x = as_tensor(input)
    if x.dtype not in _FLOATS:
        return less(x, 0)
    return less(copysign(1.0, x), 0)


def _truth(x) -> Tensor:
    x = as_tensor(x)
    return x if x.dtype == "bool" else not_equal(x, 0)


def logical_and(input, other) -> Tensor:  # noqa: A002
    """Elementwise `input and other` (nonzero is True), as a bool tensor."""
    return bitwise_and(_truth(input), _truth(other))


def logical_or(input, other) -> Tensor:  # noqa: A002
    """Elementwise `input or other` (nonzero is True), as a bool tensor."""
    return bitwise_or(_truth(input), _truth(other))


def logical_xor(input, other) -> Tensor:  # noqa: A002
    """Elementwise exclusive or (nonzero is True), as a bool tensor."""
    return bitwise_xor(_truth(input), _truth(other))


def logical_not(input) -> Tensor:  # noqa: A002
    """Elementwise `not input` (zero is True), as a bool tensor."""
    return bitwise_not(_truth(input))


# ---------------------------------------------------------------- arithmetic


def clamp_min(input, min) -> Tensor:  # noqa: A001,A002
    """max(input, min) elementwise (torch.clamp_min)."""
    return clamp(input, min=min)


def clamp_max(input, max) -> Tensor:  # noqa: A001,A002
    """min(input, max) elementwise (torch.clamp_max)."""
    return clamp(input, max=max)


def addcmul(input, tensor1, tensor2, *, value=1) -> Tensor:  # noqa: A002
    """input + value * tensor1 * tensor2."""
    return as_tensor(input) + multiply(multiply(tensor1, tensor2), value)


def addcdiv(input, tensor1, tensor2, *, value=1) -> Tensor:  # noqa: A002
    """input + value * tensor1 / tensor2."""
    return as_tensor(input) + as_tensor(tensor1) / tensor2 * value


def rsub(input, other, *, alpha=1) -> Tensor:  # noqa: A002
    """other - alpha * input."""
    return as_tensor(other) - multiply(input, alpha) if isinstance(other, Tensor) else \
        multiply(input, -alpha) + other


def float_power(input, exponent) -> Tensor:  # noqa: A002
    """input ** exponent in float64, as torch."""
    e = astype(exponent, "float64") if isinstance(exponent, Tensor) else float(exponent)
    return astype(input, "float64") ** e


def _to_float(x: Tensor) -> Tensor:
    return x if x.dtype in _FLOATS else astype(x, "float32")


def deg2rad(input) -> Tensor:  # noqa: A002
    """Degrees to radians."""
    return _to_float(as_tensor(input)) * (math.pi / 180.0)


def rad2deg(input) -> Tensor:  # noqa: A002
    """Radians to degrees."""
    return _to_float(as_tensor(input)) * (180.0 / math.pi)


def sinc(input) -> Tensor:  # noqa: A002
    """sin(pi x) / (pi x), 1 at x = 0 (the gradient there is 0, as torch's)."""
    x = _to_float(as_tensor(input))
    zero = equal(x, 0)
    px = where(zero, 1.0, x) * math.pi
    return where(zero, 1.0, px.sin() / px)


# ---------------------------------------------------------------- shapes


def diff(input, n: int = 1, dim: int = -1, prepend=None, append=None) -> Tensor:  # noqa: A002
    """The n-th forward difference along `dim` (prepend / append joined first), as torch.diff."""
    x = as_tensor(input)
    d = _dim("diff", dim, x.ndim)
    parts = [p for p in (prepend, x, append) if p is not None]
    if len(parts) > 1:
        x = _shape.concat([as_tensor(p) if as_tensor(p).ndim else _shape.broadcast_to(
            as_tensor(p), x.shape[:d] + (1,) + x.shape[d + 1:]) for p in parts], axis=d)
    lead = (slice(None),) * d
    for _ in range(n):
        y = x[lead + (slice(1, None),)] - x[lead + (slice(None, -1),)]
        x = not_equal(y, 0) if x.dtype == "bool" else y
    return x


def tile(input, dims) -> Tensor:  # noqa: A002
    """input repeated dims[i] times along each axis; fewer dims than axes count from the last (torch.tile)."""
    x = as_tensor(input)
    dims = tuple(dims) if hasattr(dims, "__iter__") else (dims,)
    return repeat(x, *((1,) * (x.ndim - len(dims)) + dims))


def ravel(input) -> Tensor:  # noqa: A002
    """The elements as a 1-D tensor."""
    return _shape.reshape(as_tensor(input), (-1,))


def _at_least(x, n: int) -> Tensor:
    x = as_tensor(x)
    if n == 1:
        return x.reshape((1,)) if x.ndim == 0 else x
    if n == 2:
        return x.reshape((1, -1)) if x.ndim < 2 else x
    return x.reshape((1, -1, 1)) if x.ndim < 2 else (_shape.expand_dims(x, 2) if x.ndim == 2 else x)


def hstack(tensors) -> Tensor:
    """Joined along the first axis of 1-D tensors, else the second (torch.hstack)."""
    ts = [_at_least(t, 1) for t in tensors]
    return _shape.concat(ts, axis=0 if ts[0].ndim == 1 else 1)


def vstack(tensors) -> Tensor:
    """Joined along the first axis, 1-D tensors as rows (torch.vstack, row_stack)."""
    return _shape.concat([_at_least(t, 2) for t in tensors], axis=0)


def dstack(tensors) -> Tensor:
    """Joined along the third axis (torch.dstack)."""
    return _shape.concat([_at_least(t, 3) for t in tensors], axis=2)


def column_stack(tensors) -> Tensor:
    """1-D (and 0-d) tensors as columns, joined along the second axis (torch.column_stack)."""
    ts = [as_tensor(t) for t in tensors]
    return _shape.concat([t.reshape((-1, 1)) if t.ndim < 2 else t for t in ts], axis=1)


# ---------------------------------------------------------------- random


def _rand_like(fn: str, x: Tensor, shape, generator) -> Tensor:
    dtype = x.dtype if x.dtype in _FLOATS else "float32"
    return _create.rand(shape, dtype=dtype, generator=generator, device=tensor_device(x))


def multinomial(input, num_samples: int, replacement: bool = False, *, generator=None) -> Tensor:  # noqa: A002
    """Indices drawn from the categorical distributions in the rows of `input` (non-negative weights, not
    necessarily summing to 1), as torch.multinomial: (num_samples,) for a vector, (rows, num_samples) for a
    matrix. Without replacement by the exponential-keys rule (the top num_samples of log(u) / w), with it by
    the inverse of the cumulative weights; both trace (the draws differ from torch's).

    >>> import tracer
    >>> tracer.multinomial(tracer.tensor([0.0, 1.0, 0.0]), 2, replacement=True).tolist()
    [1, 1]
    """
    w = as_tensor(input)
    if w.ndim not in (1, 2):
        raise RuntimeError(f"multinomial: prob_dist must be 1 or 2 dim, got shape {w.shape}")
    w = _to_float(w)
    k, n = int(num_samples), w.shape[-1]
    if k <= 0:
        raise RuntimeError(f"multinomial: cannot sample n_sample <= 0 samples, got {num_samples}")
    if not replacement and k > n:
        raise RuntimeError(f"multinomial: cannot sample n_sample > prob_dist.size(-1) samples without replacement "
                           f"({k} > {n})")
    if not replacement:
        u = _rand_like("multinomial", w, w.shape, generator)
        live = less(0.0, w)  # weight 0: key -inf, never picked while other entries remain
        keys = where(live, u.log() / where(live, w, 1.0), -math.inf)
        return topk(keys, k, dim=-1).indices
    cdf = w.cumsum(-1)
    total = cdf[..., -1:]
    u = _rand_like("multinomial", w, w.shape[:-1] + (k,), generator) * total
    idx = _shape.sum(less_equal(_shape.expand_dims(cdf, -2), _shape.expand_dims(u, -1)), axis=-1)
    return clamp(astype(idx, "int64"), max=n - 1)


def bernoulli(input, p=None, *, generator=None) -> Tensor:  # noqa: A002
    """1 with probability `input` (or the number p), else 0, in input's dtype."""
    x = as_tensor(input)
    prob = x if p is None else p
    return astype(less(_rand_like("bernoulli", x, x.shape, generator), prob), x.dtype)


def normal(mean, std=1.0, size=None, *, generator=None, dtype=None, device=None) -> Tensor:
    """Normal samples: `normal(mean_tensor, std_tensor)` (their broadcast shape), or `normal(0.0, 1.0, size)`."""
    if size is None:
        shape = np.broadcast_shapes(np.shape(mean), np.shape(std))
        dtype = dtype or next((t.dtype for t in (mean, std) if isinstance(t, Tensor)), "float32")
    else:
        shape = tuple(size) if hasattr(size, "__iter__") else (size,)
    z = _create.randn(shape, dtype=dtype or "float32", generator=generator, device=device)
    return z * std + mean


def randperm(n: int, *, generator=None, dtype: str = "int64", device=None, requires_grad: bool = False) -> Tensor:
    """A random permutation of 0..n-1 (the argsort of n uniform draws, so it traces)."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise ValueError(f"randperm: n must be an int >= 0, got {n!r}")
    u = _create.rand(int(n), dtype="float64", generator=generator, device=device)
    return astype(argsort(u), dtype)


__all__ = ["addcdiv", "addcmul", "bernoulli", "clamp_max", "clamp_min", "column_stack", "deg2rad", "diff", "dstack",
           "float_power", "hstack", "isfinite", "isinf", "isnan", "isneginf", "isposinf", "isreal", "logical_and",
           "logical_not", "logical_or", "logical_xor", "multinomial", "normal", "rad2deg", "randperm", "ravel", "rsub",
           "signbit", "sinc", "tile", "vstack"]
