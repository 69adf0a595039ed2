"""Neural-network ops: softmax, log_softmax, layer_norm, dropout; the losses live in loss.py."""
from __future__ import annotations

from ..types import INT_DTYPES
from .common import norm_axes, norm_axis, require_float, same_dtype
from .registry import Attr, declare, tensor_arg

# ---------------------------------------------------------------- softmax, log_softmax
# Primitives rather than exp/sum composites: subtracting the row maximum first keeps exp from
# overflowing for large logits, and log_softmax as x - max - log(sum(exp(x - max))) never takes
# the log of an underflowed 0 (log(softmax(x)) would give -inf where the true value is finite).


def _infer_softmax(op, types, axis):
    t = tensor_arg(op, types, 0)
    require_float(op, t)
    if t.ndim == 0:
        raise op.error("argument x must have at least one dimension, got a 0-d tensor")
    norm_axis(op, axis, t.ndim)
    return t


def _softmax(xp, x, axis):
    if x.size == 0:  # max has no identity over an empty axis; the result is as empty as x
        return x.copy()
    e = xp.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _log_softmax(xp, x, axis):
    if x.size == 0:
        return x.copy()
    shifted = x - x.max(axis=axis, keepdims=True)
    return shifted - xp.log(xp.exp(shifted).sum(axis=axis, keepdims=True))


declare("nn.softmax", ("x",), (Attr("axis", "int", -1),), infer=_infer_softmax, kernel=_softmax)
declare("nn.log_softmax", ("x",), (Attr("axis", "int", -1),), infer=_infer_softmax, kernel=_log_softmax)

# ---------------------------------------------------------------- layer_norm


def _infer_layer_norm(op, types, axes, epsilon):
    data, gamma, beta = (tensor_arg(op, types, i) for i in range(3))
    require_float(op, data, "data")
    same_dtype(op, types)
    if not axes:
        raise op.error("axes must name at least one axis")
    norm = norm_axes(op, axes, data.ndim)
    # gamma and beta broadcast against data only when the normalized axes are the trailing ones
    if norm != tuple(range(data.ndim - len(norm), data.ndim)):
        raise op.error(f"axes {list(axes)} must be the last {len(norm)} axes of data of shape {data.shape}")
    want = data.shape[data.ndim - len(norm):]
    for name, t in (("gamma", gamma), ("beta", beta)):
        if t.shape != want:
            raise op.error(f"argument {name} of shape {t.shape} must have the shape {want} of data "
                           f"{data.shape} at axes {list(axes)}")
    if epsilon < 0:
        raise op.error(f"epsilon must be >= 0, got {epsilon}")
    return data


def _layer_norm(xp, data, gamma, beta, axes, epsilon):
    axes = tuple(axes)
    # float16 statistics in float32, as PyTorch: (x - mean)**2 overflows float16 above 256
    wide = data.astype(xp.float32) if data.dtype == xp.float16 else data
    centered = wide - wide.mean(axis=axes, keepdims=True)
    var = (centered * centered).mean(axis=axes, keepdims=True)
    out = centered / xp.sqrt(var + epsilon) * gamma + beta  # float16 gamma, beta promote to float32
    return out.astype(data.dtype, copy=False)


declare("nn.layer_norm", ("data", "gamma", "beta"), (Attr("axes", "ints"), Attr("epsilon", "float", 1e-5)),
        infer=_infer_layer_norm, kernel=_layer_norm, fixed={"center": (True,), "scale": (True,)})

# ---------------------------------------------------------------- dropout
# The mask comes from a counter-based generator: element i (flat, C order) keeps its value when
# u_i >= rate, where u_i = splitmix64(key + (i + 1) * golden) / 2**64 and key = splitmix64(seed).
# So the mask depends only on (seed, flat index, rate), not on the device or on any global state:
# NumPy and CuPy draw the same mask, a recomputed checkpoint region draws the same mask again, and
# the backward pass reproduces it from the seed instead of keeping it in memory.

_GOLDEN = 0x9E3779B97F4A7C15
_MIX1, _MIX2 = 0xBF58476D1CE4E5B9, 0x94D049BB133111EB


def _splitmix64(xp, z):
    """The splitmix64 finalizer on a uint64 array (wrapping arithmetic is what the hash wants)."""
    u = xp.uint64
    z = (z ^ (z >> u(30))) * u(_MIX1)
    z = (z ^ (z >> u(27))) * u(_MIX2)
    return z ^ (z >> u(31))


def dropout_uniform(xp, seed, shape):
    """Uniform floats in [0, 1), float64, one per element of `shape`, as a function of the seed alone."""
    # 1-element arrays rather than 0-d ones: NumPy scalar arithmetic would warn on the wrap-around.
    key = _splitmix64(xp, xp.asarray(seed).reshape(1).astype(xp.int64).astype(xp.uint64))
    n = 1
    for d in shape:
        n *= int(d)
    z = _splitmix64(xp, key + xp.arange(1, n + 1, dtype=xp.uint64) * xp.uint64(_GOLDEN))
    return ((z >> xp.uint64(11)).astype(xp.float64) * (1.0 / 2.0**53)).reshape(tuple(shape))


def _infer_dropout(op, types, rate):
    x, seed = tensor_arg(op, types, 0), tensor_arg(op, types, 1)
    require_float(op, x)
    if seed.dtype not in INT_DTYPES or seed.shape != ():
        raise op.error(f"argument seed must be a 0-d int64 tensor, got {seed}")
    if not 0.0 <= rate < 1.0:
        raise op.error(f"rate must be in [0, 1), got {rate}")
    return x


def _dropout(xp, x, seed, rate):
    if rate == 0.0:
        return x
    keep = dropout_uniform(xp, seed, x.shape) >= rate
    return x * keep * (1.0 / (1.0 - rate))


declare("nn.dropout", ("x", "seed"), (Attr("rate", "float"),), infer=_infer_dropout, kernel=_dropout)

from . import loss  # noqa: E402,F401  (the losses are nn ops too; importing nn registers them)
