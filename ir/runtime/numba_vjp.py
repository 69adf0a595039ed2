"""numba row kernels for the chains the VJP rules emit (ir.runtime.vjp_chains finds them), for float32.

Each kernel reads float32, computes in float64 and rounds once per element (the NumPy chains round every
sub-op to float32), one row at a time with the row in cache and no full-size temporaries:

- `softmax_vjp(y, g[, mask]) = y * (g - sum(g * y))` over the last axis, optionally with the `where` that
  follows it in attention (`where(mask, fill, dx)` or `where(mask, dx, fill)`, a scalar fill);
- `masked_softmax(x, mask)`: softmax over the last axis of `where(mask, fill, x)` (attention's causal mask);
- `layer_norm_dx(x, gamma, g)`: rstd * (d - mean(d) - xhat * mean(d * xhat)), d = g * gamma, and
  `layer_norm_dgamma(x, g)`: sum over rows of g * xhat (the statistics recomputed from x, as the rule does);
- `take_backward(data, indices)`: take's VJP over axis 0 (an embedding's gradient), np.add.at's in-order
  additions as one loop (the same bits, about 10x faster on the GPT's token embedding);
- `gelu_tanh_vjp(x, g)`: g * d/dx of the tanh GELU, and `gelu_tanh(x)` (the nn.gelu binding itself), both as
  x * sigmoid(2u), which has no cancellation in 1 + tanh(u) for negative x.

Sums are float64 with reassociation allowed (so they vectorise); NaN and inf propagate as in NumPy's chains.
A mask is read as one of numba_gen's forms: full (one mask row per row) or a tile of the trailing axes
(mask row i % mask rows). `runner(...)` gives `run(xs, out=None)` for a `fused` binding of one of these
chains (ir.runtime.vjp_chains decides which, and whether the kernel takes its types).
"""
from __future__ import annotations

import functools
import math

import numpy as np

from .numba_composite import EXP_F32, ROW_SUMS
from .numba_gen import load
from .numba_threads import fork_safe, threads, use_parallel

_JIT = '@njit(cache=True, error_model="numpy", fastmath={{"contract"}}{extra})'

# float64 sums with reassociation, in functions of their own (ir.runtime.numba_composite.ROW_SUMS says why)
_SUMS = '''
@njit(cache=True, error_model="numpy", fastmath={"contract", "reassoc"})
def row_dot(a, b):
    s = 0.0
    for j in range(a.shape[0]):
        s += np.float64(a[j]) * np.float64(b[j])
    return s


@njit(cache=True, error_model="numpy", fastmath={"contract", "reassoc"})
def row_dot_scaled(g, gamma, a, mean, rstd):
    # (sum of d, sum of d * xhat) with d = g * gamma, xhat = (a - mean) * rstd
    sd = 0.0
    sdx = 0.0
    for j in range(a.shape[0]):
        d = np.float64(g[j]) * np.float64(gamma[j])
        sd += d
        sdx += d * ((np.float64(a[j]) - mean) * rstd)
    return sd, sdx


@njit(cache=True, error_model="numpy")
def scatter_add_rows(index, data, out):
    # np.add.at(out, index, data) over rows, in its order: out[index[i]] += data[i] for i = 0, 1, ... (the same
    # additions, so the same bits)
    for i in range(index.shape[0]):
        r = index[i]
        for j in range(data.shape[1]):
            out[r, j] += data[i, j]

'''

_ROWS = '''
{jit}
def softmax_vjp_{name}(y, g, mask, kind, fill, out):
    rm = mask.shape[0]
    for i in {loop}(y.shape[0]):
        s = row_dot(g[i], y[i])
        mi = i % rm
        for j in range(y.shape[1]):
            v = np.float32(np.float64(y[i, j]) * (np.float64(g[i, j]) - s))
            if kind == 1:
                v = fill if mask[mi, j] else v
            elif kind == 2:
                v = v if mask[mi, j] else fill
            out[i, j] = v


{jit}
def masked_softmax_{name}(x, mask, kind, fill, out):
    rm = mask.shape[0]
    n = x.shape[1]
    for i in {loop}(x.shape[0]):
        mi = i % rm
        row = out[i]
        for j in range(n):  # the where's values, then the row's softmax in place
            v = x[i, j]
            if kind == 1:
                v = fill if mask[mi, j] else v
            else:
                v = v if mask[mi, j] else fill
            row[j] = v
        m = row[0]
        for j in range(n):  # a NaN is passed over here (the select vectorises), but its exp makes the
            v = row[j]      # row's sum NaN, so the whole row is NaN, as NumPy's
            m = v if v > m else m
        md = np.float64(m)
        for j in range(n):
            d = np.float64(row[j]) - md
            d = -160.0 if d < -160.0 else d
            row[j] = np.float32(exp_f32(d))
        inv = 1.0 / row_sum(row)
        for j in range(n):  # exp rounded to float32 (6e-8 relative), the quotient rounded once more
            row[j] = np.float32(np.float64(row[j]) * inv)


{jit}
def layer_norm_dx_{name}(x, gamma, g, epsilon, out):
    n = x.shape[1]
    for i in {loop}(x.shape[0]):
        mean, rstd = row_stats(x[i], epsilon)
        sd, sdx = row_dot_scaled(g[i], gamma, x[i], mean, rstd)
        md = sd / n
        mdx = sdx / n
        for j in range(n):
            xh = (np.float64(x[i, j]) - mean) * rstd
            d = np.float64(g[i, j]) * np.float64(gamma[j])
            out[i, j] = np.float32(rstd * ((d - md) - xh * mdx))


{jit}
def layer_norm_dgamma_{name}(x, g, epsilon, stats, acc, blocks):
    # the rows' statistics first, then sum over rows of g * xhat into acc (float64), one block of columns per
    # loop step: each column's additions in row order whatever the blocks, so the same bits serial or parallel
    rows, n = x.shape
    for i in {loop}(rows):
        mean, rstd = row_stats(x[i], epsilon)
        stats[i, 0] = mean
        stats[i, 1] = rstd
    for b in {loop}(blocks):
        lo = n * b // blocks
        hi = n * (b + 1) // blocks
        a = acc[lo:hi]
        for i in range(rows):
            mean = stats[i, 0]
            rstd = stats[i, 1]
            xi = x[i, lo:hi]  # 1-D views: with x[i, j] and acc[j] the loop did not vectorise (2.5x slower)
            gi = g[i, lo:hi]
            for j in range(hi - lo):
                a[j] += np.float64(gi[j]) * ((np.float64(xi[j]) - mean) * rstd)


{jit}
def gelu_tanh_vjp_{name}(x, g, out):
    # gelu(x) = x * s with s = sigmoid(2u) = 0.5 * (1 + tanh(u)), u = k * (x + a x^3): one exp, no cancellation
    # in 1 + tanh; d/dx = s + x * s * (1 - s) * 2u', and s * (1 - s) = e * s^2 with e = exp(-2u)
    for i in {loop}(x.shape[0]):
        d = np.float64(x[i])
        # x clamped to +-12.5 (|z| <= 159.3, inside exp_f32's range): beyond, the slope is 1 or 0 to float64
        # (its second term below 1e-60); with z clamped instead, that term was exp(-160) * x^3, finite garbage
        # for |x| above ~1e20. NaN fails both tests and stays NaN
        c = 12.5 if d > 12.5 else d
        c = -12.5 if c < -12.5 else c
        c2 = c * c
        z = -1.5957691216057308 * (c + 0.044715 * (c2 * c))
        e = exp_f32(z)
        s = 1.0 / (1.0 + e)
        v = s + c * ((e * s) * s) * (1.5957691216057308 * (1.0 + 0.134145 * c2))
        v = v if abs(d) < np.inf else np.nan  # NumPy's chain: 0 * inf at x = +-inf
        out[i] = np.float32(np.float64(g[i]) * v)


{jit}
def gelu_tanh_{name}(x, out):
    for i in {loop}(x.shape[0]):
        d = np.float64(x[i])
        z = -1.5957691216057308 * (d + 0.044715 * ((d * d) * d))
        z = 160.0 if z > 160.0 else z
        z = -160.0 if z < -160.0 else z
        v = d / (1.0 + exp_f32(z))
        v = np.nan if d == -np.inf else v  # NumPy's kernel: -inf * (1 + tanh(-inf)) = -inf * 0
        out[i] = np.float32(v)
'''

_HEADER = '''"""Generated by ir.runtime.numba_vjp: the VJP chains' row kernels."""
import math

import numpy as np
from numba import njit, prange

from {package}.numba_math import _LN2, _LOG2E, _ROUND, _ROUND_BITS, _bits_to_float64, _float64_to_bits
'''


@functools.cache
def _module():
    body = "".join(_ROWS.format(name=name, loop=loop, jit=_JIT.format(extra=extra))
                   for name, loop, extra in (("serial", "range", ""), ("parallel", "prange", ", parallel=True")))
    return load(_HEADER.format(package=__package__) + EXP_F32 + ROW_SUMS + _SUMS + body, "vjp_rows")


def _kernel(name: str, size: int, rows: bool = False):
    module = _module()
    serial = getattr(module, f"{name}_serial")
    return fork_safe(serial, getattr(module, f"{name}_parallel")) if use_parallel(size, rows) else serial


_NO_MASK = np.zeros((1, 1), np.bool_)


def _mask_rows(mask, n):
    return _NO_MASK if mask is None else np.ascontiguousarray(mask).reshape(-1, n)


def _out(out, shape):
    return out if out is not None and out.flags.c_contiguous else np.empty(shape, np.float32)


def runner(name: str, idx, types, out, params):
    """`run(xs, out=None)` for the `fused` binding of chain `name` (ir.runtime.vjp_chains): its inputs are
    xs[i] for i in idx, in the order of ir.runtime.vjp_chains' leaves, of these types."""
    shape = tuple(out.shape)
    size = math.prod(shape)
    if name == "layer_norm_dgamma":
        rows = math.prod(types[0].shape) // params["n"]
        kernel = _kernel("layer_norm_dgamma", rows * params["n"], rows=True)
        # one block of at least 16 columns per thread in the prange form, one block in the serial
        blocks = max(1, min(threads(), params["n"] // 16)) if kernel is not _module().layer_norm_dgamma_serial else 1
        return _planned(functools.partial(_dgamma, idx=tuple(idx), n=params["n"], eps=params["eps"], shape=shape,
                                          kernel=kernel, rows=rows, blocks=blocks))
    if name == "take_backward":  # a grad.take_backward binding over axis 0: (data, indices), not a tuple
        return functools.partial(_take_backward, shape=shape, mode=params["mode"],
                                 kernel=_module().scatter_add_rows)
    if name == "gelu_tanh":  # an nn.gelu binding: its one array, not a tuple
        return _planned(functools.partial(_gelu, shape=shape, kernel=_kernel("gelu_tanh", size)))
    if name == "gelu_tanh_vjp":
        return _planned(functools.partial(_elementwise, idx=tuple(idx), shape=shape,
                                          kernel=_kernel("gelu_tanh_vjp", size)))
    n = shape[-1]
    if name == "layer_norm_dx":
        n = params["n"]
        return _planned(functools.partial(_layer_norm_dx, idx=tuple(idx), n=n, eps=params["eps"], shape=shape,
                                          kernel=_kernel("layer_norm_dx", size, rows=True)))
    base = "masked_softmax" if name.startswith("masked_softmax") else "softmax_vjp"
    return _planned(functools.partial(_masked_rows, idx=tuple(idx), n=n, shape=shape, kind=params["kind"],
                                      fill=np.float32(params["fill"]), kernel=_kernel(base, size),
                                      forward=base == "masked_softmax"))


def _masked_rows(xs, idx, n, shape, kind, fill, kernel, forward, out=None):
    # masked_softmax(x, mask) (forward) and softmax_vjp(y, g[, mask])
    out = _out(out, shape)
    a = xs[idx[0]].reshape(-1, n)
    mask = _mask_rows(xs[idx[-1]] if kind else None, n)
    if forward:
        kernel(a, mask, kind, fill, out.reshape(-1, n))
    else:
        kernel(a, xs[idx[1]].reshape(-1, n), mask, kind, fill, out.reshape(-1, n))
    return out


def _layer_norm_dx(xs, idx, n, eps, shape, kernel, out=None):
    out = _out(out, shape)
    x, gamma, g = (xs[i] for i in idx)
    kernel(x.reshape(-1, n), np.ascontiguousarray(gamma).reshape(n), g.reshape(-1, n), eps, out.reshape(-1, n))
    return out


def _dgamma(xs, idx, n, eps, shape, kernel, rows, blocks, out=None):
    x, g = (xs[i] for i in idx)
    acc = np.zeros(n, np.float64)
    kernel(x.reshape(-1, n), g.reshape(-1, n), eps, np.empty((rows, 2), np.float64), acc, blocks)
    if out is None:
        return acc.astype(np.float32).reshape(shape)
    np.copyto(out.reshape(n), acc, casting="same_kind")
    return out


def _take_backward(data, indices, shape, mode, kernel):
    from ..ops.manipulate import _positions

    index = _positions(np, indices, shape[0], mode, "grad.take_backward", 0).reshape(-1)
    out = np.zeros(shape, data.dtype)
    kernel(index, data.reshape(index.size, -1), out.reshape(shape[0], -1))
    return out


def _gelu(x, shape, kernel, out=None):
    out = _out(out, shape)
    kernel(x.reshape(-1), out.reshape(-1))
    return out


def _elementwise(xs, idx, shape, kernel, out=None):
    out = _out(out, shape)
    kernel(*(xs[i].reshape(-1) for i in idx), out.reshape(-1))
    return out


def _planned(fn):
    # as ir.runtime.specialize.planned marks a kernel: it takes out= and returns out or a new array
    fn.takes_out, fn.scratch, fn.fresh = True, (), True
    return fn


__all__ = ["runner"]
