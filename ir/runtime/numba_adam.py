"""Adam/AdamW, Adadelta, RMSprop and Adagrad updates as numba loops over every parameter at once (the `fast`
extra), their state kept in flat buffers (nn.optim.flat keeps them: one 1-D array per state name and dtype,
each parameter's state a view of it at its offset).

`run(kernel(kind), offs, coef, bufs, scratch, pairs)` updates the parameters of `pairs` ((p, g): 1-D C-contiguous
arrays of `dtype`, or two empty arrays for a parameter left alone) eight per numba call; parameter j's state
is bufs[k][offs[j]:offs[j] + p.size] and its options and step-dependent factors coef[j] (one row per
parameter, in the dtype, as `ROWS` lists them: flags as 0/1, each Python-float factor rounded to the dtype as
NumPy's weak scalars are). Each loop does the NumPy update's operations (nn/optim/optimizers.py and
adaptive.py) in the same order in the parameter's dtype, with no fastmath and no FMA contraction, so both give
the same bits (np.maximum's too: the second operand on a tie, a NaN of either).

Why the loop is fast now where one Adam loop "measured no faster than NumPy" before: that loop was compiled
with numba's default error_model="python", whose division checks for a zero divisor and raises, so neither
the division nor sqrt vectorised (217 us on (128, 512) float32 against NumPy's 227 us); error_model="numpy"
(IEEE division) lets LLVM vectorise both (vsqrtps, vdivps): 30-35 us, about 2.8x NumPy's ten ufunc passes
(1 thread; 3.2x at mnist's 9216x128, where NumPy's passes each go out of cache).
"""
from __future__ import annotations

import functools

import numpy as np

from . import numba_hook

SLOTS = 8  # (p, g) pairs per numba call
# each kind's coefficient row; flags are 0/1 (wd_mode: 0 none, 1 coupled g + wd * p, 2 decoupled p *= scale)
ROWS = {
    "adam": ("maximize", "wd_mode", "wd", "scale", "b1c", "beta2", "b2c", "bc2", "eps", "step_size", "amsgrad"),
    "adadelta": ("maximize", "wd_mode", "wd", "rho", "rho1", "eps", "lr"),
    "rmsprop": ("maximize", "wd_mode", "wd", "alpha", "alpha1", "centered", "eps", "has_momentum", "momentum", "lr"),
    "adagrad": ("maximize", "wd_mode", "wd", "eps", "clr"),
}

_BODIES = '''

@njit(cache=True, error_model="numpy")
def signed(g, sc, maximize):
    """g, or -g written into the scratch sc (a loop of its own: inlined, LLVM would fold the negation into the
    operations after it, fsub(p, fneg(x)) into fadd(p, x), which keeps a NaN's sign where NumPy's flips it)."""
    if not maximize:
        return g
    for i in range(g.shape[0]):
        sc[i] = -g[i]
    return sc


@njit(cache=True, error_model="numpy")
def at(b0, b1, b2, o, n):
    """The three state buffers' slices at offset o (a loop indexing b[o + i] does not vectorise: 490 against 28
    us on 128x512 float32; the slice of a buffer a kind does not use is empty)."""
    return b0[o:o + n], b1[o:o + n], b2[o:o + n]


@njit(cache=True, error_model="numpy")
def adam1(p, g, m, v, w, sc, c):
    mode, wd, scale, b1c = c[1], c[2], c[3], c[4]
    beta2, b2c, bc2, eps, step, amsgrad = c[5], c[6], c[7], c[8], c[9], c[10] != 0
    g = signed(g, sc, c[0] != 0)
    # a gradient that is the parameter's own array (opt.step([p.data, ...])): NumPy's p *= scale scales it too
    own = mode == 2 and p.shape[0] > 0 and g.ctypes.data == p.ctypes.data
    for i in range(p.shape[0]):
        pi = p[i]
        if mode == 2:
            pi = pi * scale
        gi = pi if own else g[i]
        if mode == 1:
            gi = gi + wd * pi
        mi = m[i]
        mi = mi + (gi - mi) * b1c
        m[i] = mi
        vi = v[i] * beta2 + (gi * b2c) * gi
        v[i] = vi
        if amsgrad:
            wi = w[i]
            vi = wi if wi > vi or wi != wi else vi
            w[i] = vi
        p[i] = pi - (mi * step) / (math.sqrt(vi) / bc2 + eps)


@njit(cache=True, error_model="numpy")
def adadelta1(p, g, v, a, unused, sc, c):
    mode, wd, rho, rho1, eps, lr = c[1], c[2], c[3], c[4], c[5], c[6]
    g = signed(g, sc, c[0] != 0)
    for i in range(p.shape[0]):
        gi = g[i]
        if mode == 1:
            gi = gi + wd * p[i]
        vi = v[i] * rho + (gi * gi) * rho1
        v[i] = vi
        d = math.sqrt(a[i] + eps) / math.sqrt(vi + eps) * gi
        a[i] = a[i] * rho + (d * d) * rho1
        p[i] = p[i] - d * lr


@njit(cache=True, error_model="numpy")
def rmsprop1(p, g, v, b, mean, sc, c):
    mode, wd, alpha, alpha1 = c[1], c[2], c[3], c[4]
    centered, eps, has_momentum, momentum, lr = c[5] != 0, c[6], c[7] != 0, c[8], c[9]
    g = signed(g, sc, c[0] != 0)
    for i in range(p.shape[0]):
        gi = g[i]
        if mode == 1:
            gi = gi + wd * p[i]
        vi = v[i] * alpha + (gi * gi) * alpha1
        v[i] = vi
        if centered:
            mi = mean[i]
            mi = mi + (gi - mi) * alpha1
            mean[i] = mi
            avg = math.sqrt(vi - mi * mi) + eps
        else:
            avg = math.sqrt(vi) + eps
        if has_momentum:
            bi = b[i] * momentum + gi / avg
            b[i] = bi
            p[i] = p[i] - bi * lr
        else:
            p[i] = p[i] - (gi / avg) * lr


@njit(cache=True, error_model="numpy")
def adagrad1(p, g, s, unused1, unused2, sc, c):
    mode, wd, eps, clr = c[1], c[2], c[3], c[4]
    g = signed(g, sc, c[0] != 0)
    for i in range(p.shape[0]):
        gi = g[i]
        if mode == 1:
            gi = gi + wd * p[i]
        si = s[i] + gi * gi
        s[i] = si
        p[i] = p[i] - (gi / (math.sqrt(si) + eps)) * clr
'''


def _source() -> str:
    pairs = ", ".join(f"p{k}, g{k}" for k in range(SLOTS))
    out = ['"""Generated by ir.runtime.numba_adam: Adam, Adadelta, RMSprop and Adagrad over flat state."""',
           "import math", "", "from numba import njit", _BODIES]
    for kind in ROWS:
        calls = "".join(f"    {kind}1(p{k}, g{k}, *at(b0, b1, b2, offs[j + {k}], p{k}.shape[0]), sc, coef[j + {k}])\n"
                        for k in range(SLOTS))
        out.append(f'\n@njit(cache=True, error_model="numpy")\n'
                   f"def {kind}{SLOTS}(offs, coef, j, b0, b1, b2, sc, {pairs}):\n{calls}")
    return "\n".join(out)


@functools.cache
def _module():
    from .numba_gen import load
    return load(_source(), "optim_flat")


def ready(kind: str, dtype) -> bool:
    """numba loaded with this kind's kernel for `dtype`; else (numba still loading, its tiered start) the kernel
    is queued for the background load and False (NumPy's update runs meanwhile)."""
    if numba_hook.ready():
        return True
    numba_hook.prepare(("optim_flat", kind, dtype), functools.partial(_load, kind, dtype))
    return False


def _load(kind, dtype):
    z = np.zeros(SLOTS, dtype)
    getattr(_module(), f"{kind}{SLOTS}")(np.zeros(SLOTS, np.int64), np.zeros((SLOTS, len(ROWS[kind])), dtype), 0,
                                         z, z, z, z, *[z[:0]] * (2 * SLOTS))


def kernel(kind: str):
    """The kind's numba kernel (after ready(kind, dtype)), for `run`."""
    return getattr(_module(), f"{kind}{SLOTS}")


def run(fn, offs, coef, bufs, scratch, pairs: list) -> None:
    """Update every (p, g) of `pairs` (flat list p0, g0, p1, g1, ...; a multiple of 2 * SLOTS long, padded with
    empty arrays, as `offs` and `coef` have a multiple of SLOTS rows) with its state in `bufs` (three 1-D arrays;
    one of size 0 for a state this kind or these options do not use); `scratch`: 1-D, as large as the largest p
    where a row has maximize set; `fn` from kernel(kind)."""
    b0, b1, b2 = bufs
    if len(pairs) == 2 * SLOTS:
        fn(offs, coef, 0, b0, b1, b2, scratch, *pairs)
        return
    step = 2 * SLOTS
    for j in range(0, len(pairs) // 2, SLOTS):
        fn(offs, coef, j, b0, b1, b2, scratch, *pairs[2 * j:2 * j + step])


DTYPES = (np.dtype(np.float32), np.dtype(np.float64))

__all__ = ["DTYPES", "ROWS", "SLOTS", "kernel", "ready", "run"]
