"""Neural-network ops: softmax, log_softmax, layer_norm, dropout; the losses live in loss.py."""
from __future__ import annotations

import math

import numpy as np

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


_CHUNK = 1 << 14  # dropout's mask a chunk at a time: its uint64 scratch (128 KiB) stays in L2, is never faulted in
_COUNTERS = np.arange(_CHUNK, dtype=np.uint64)  # each chunk's counters 0, 1, ... (its first index goes in the key)


def _key(xp, seed):
    # a 1-element key rather than a 0-d one: NumPy scalar arithmetic would warn on the wrap-around
    return _splitmix64(xp, xp.asarray(seed).reshape(1).astype(xp.int64).astype(xp.uint64))


def _hash_into(xp, counters, z, t, first, key):
    """z <- splitmix64(key + (first + 1 + counters) * golden), counters uint64 (0, 1, ...), in place (t: scratch
    of z's size): the uniform draw of flat element first + counters[i] is (z[i] >> 11) / 2**53."""
    u = xp.uint64
    xp.multiply(counters, u(_GOLDEN), out=z)
    z += key + u((first + 1) * _GOLDEN % 2**64)
    for shift, mix in ((30, _MIX1), (27, _MIX2), (31, None)):
        xp.right_shift(z, u(shift), out=t)
        z ^= t
        if mix is not None:
            z *= u(mix)
    return z


def dropout_uniform(xp, seed, shape):
    """Uniform floats in [0, 1), float64, one per element of `shape`, as a function of the seed alone."""
    n = math.prod(int(d) for d in shape)
    z = xp.arange(n, dtype=xp.uint64)
    z = _hash_into(xp, z, z, xp.empty(n, xp.uint64), 0, _key(xp, seed))
    return ((z >> xp.uint64(11)).astype(xp.float64) * (1.0 / 2.0**53)).reshape(tuple(shape))


def _threshold(rate):
    """u = (z >> 11) / 2**53 >= rate iff the integer z >> 11 >= ceil(rate * 2**53) (rate * 2**53 is exact)
    iff z >= that << 11, below 2**64 (rate < 1 makes ceil(rate * 2**53) at most 2**53 - 1): dropout's mask
    compares the hashes with it, exactly as `dropout_uniform(...) >= rate`, without the floats."""
    return math.ceil(rate * 2.0**53) << 11


def _infer_dropout(op, types, rate):
    x, seed = tensor_arg(op, types, 0), tensor_arg(op, types, 1)
    require_float(op, x)
    if seed.dtype not in INT_DTYPES or seed.shape != ():
        raise op.error(f"argument seed must be a 0-d int64 tensor, got {seed}")
    if not 0.0 <= rate < 1.0:
        raise op.error(f"rate must be in [0, 1), got {rate}")
    return x


def _dropout(xp, x, seed, rate, out=None):
    """x * (dropout_uniform(seed) >= rate) * (1 / (1 - rate)): x * keep first, then the scale (x * scale could
    overflow where keep is 0), a chunk of the flat (C-order) elements at a time on NumPy; into `out` (a C-ordered
    array of x's shape and dtype: the executor's planned storage, ir.runtime.conv_specialize) when given."""
    if rate == 0.0:
        return x
    n, key, threshold = x.size, _key(xp, seed), xp.uint64(_threshold(rate))
    step = min(n, _CHUNK) if xp.__name__ == "numpy" else n
    counters = _COUNTERS if xp.__name__ == "numpy" else xp.arange(n, dtype=xp.uint64)
    flat = xp.ascontiguousarray(x).reshape(-1)
    result = xp.empty(x.shape, x.dtype) if out is None else out
    out = result.reshape(-1)
    z, t, keep = xp.empty(step, xp.uint64), xp.empty(step, xp.uint64), xp.empty(step, bool)
    for s in range(0, n, max(step, 1)):
        m = min(step, n - s)
        _hash_into(xp, counters[:m], z[:m], t[:m], s, key)
        xp.greater_equal(z[:m], threshold, out=keep[:m])
        xp.multiply(flat[s:s + m], keep[:m], out=out[s:s + m])
    out *= 1.0 / (1.0 - rate)
    return result


declare("nn.dropout", ("x", "seed"), (Attr("rate", "float"),), infer=_infer_dropout, kernel=_dropout)

from . import loss  # noqa: E402,F401  (the losses are nn ops too; importing nn registers them)
