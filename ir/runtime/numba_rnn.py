"""The LSTM cell (nn.lstm_cell and grad.lstm_cell_backward, ir/ops/rnn_cell.py) as one numba loop each way, for
float32 (the `fast` extra).

An LSTM step's cell is small (word_language_model: gates (20, 800)) and runs once per time step and layer, 70
times a step each way, so NumPy's dozen ufunc calls per cell are mostly call overhead; one loop over (B, H)
computes the four gate activations, c' and h' (or every gradient) in a pass. Measured at (20, 800), one thread,
on the shared 2-core machine: forward 21-31 us against NumPy's 44-52, backward 36-41 against 53-90; the
word_language_model step 0.96x (min of 30 interleaved rounds, /tmp/h4_ab.py).
The activations are float32 throughout (`MATH_F32` below: sixteen lanes to a vector, where numba_math's float64
polynomials take eight and a longer polynomial): exp(-|x|) by Cody-Waite reduction and cephes' degree-6 expf
polynomial, sigmoid = 1 / (1 + e) or e / (1 + e), tanh = (1 - e2) / (1 + e2) from e2 = exp(-2|x|), and for
|x| < 0.55 (where 1 - e2 would cancel) tanh's Taylor series to x**15. Measured on 9 million points, float32
against float64: sigmoid within 1.8e-7 relative (values above 1e-37; below, +0 or a denormal's 1e-38 error),
tanh within 1.6e-7; NaN propagates, sigmoid(+-inf) is 1 and 0, tanh(+-inf) +-1, tanh(-0.0) -0.0. The cell
loops at (20, 800), one thread: forward 0.61x, backward 0.66x the float64-polynomial loops they replace.
Products and sums are float32, in the order of the NumPy kernels. Values agree with the NumPy kernels to
float32 rounding (within 1e-6 of float64, tests/ir/test_conv_lstm_kernels.py, tests/ir/test_wlm_cell.py).
float64, CuPy, strided or small inputs, and every call before numba has loaded (ir.runtime.numba_hook's tiers)
run the NumPy kernels.
"""
from __future__ import annotations

import functools

import numpy as np

from ..ops import rnn_cell as _rnn_cell_ops  # noqa: F401  (declares the ops: their NumPy kernels)
from ..ops.registry import get_op, provide_kernel
from . import numba_hook

MIN_SIZE = 4096  # gate elements: below, NumPy's calls cost little, and a small model never waits for numba

_NUMPY = {name: get_op(name).kernel for name in ("nn.lstm_cell", "grad.lstm_cell_backward")}

# float32 exp(y) for y <= 0, sigmoid and tanh, inlined into the loops (a generated module's text, imports
# included, which ir.runtime.numba_nll's rows use too: numba_math's helpers work in float64). exp_neg32_plus(y, err)
# is exp(y + err) for a correction err far below y's ulp (numba_nll's TwoSum remainder), exp_neg32 with none.
# For y below -87 both give +0 (the true value is a float32 denormal or 0).
MATH_F32 = '''
from llvmlite import ir as llvm
from numba import types
from numba.extending import intrinsic


@intrinsic
def _bits_to_f32(typingctx, bits):
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], llvm.FloatType())
    return types.float32(types.int32), codegen


@intrinsic
def _f32_to_bits(typingctx, value):
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], llvm.IntType(32))
    return types.int32(types.float32), codegen


f32 = np.float32
_ROUND32 = f32(12582912.0)  # 1.5 * 2**23: adding it rounds to an integer, which then sits in the low bits
_ROUND32_BITS = np.int32(1262485504)
_LOG2E32, _LN2_HI, _LN2_LO = f32(1.4426950408889634), f32(0.693359375), f32(-2.12194440e-4)
_E0, _E1, _E2, _E3, _E4, _E5 = (f32(1.9875691500e-4), f32(1.3981999507e-3), f32(8.3334519073e-3),
                                f32(4.1665795894e-2), f32(1.6666665459e-1), f32(5.0000001201e-1))
_T3, _T5, _T7, _T9 = f32(-1 / 3), f32(2 / 15), f32(-17 / 315), f32(62 / 2835)
_T11, _T13, _T15 = f32(-1382 / 155925), f32(21844 / 6081075), f32(-929569 / 638512875)
_LOW32, _SMALL_TANH32 = f32(-87.0), f32(0.55)
_ONE32, _ZERO32, _MINUS_ZERO32 = f32(1), f32(0), f32(-0.0)


@njit(inline="always", error_model="numpy")
def exp_neg32_plus(y, err):
    yc = _LOW32 if y < _LOW32 else y  # NaN fails the test and stays NaN
    t = yc * _LOG2E32 + _ROUND32
    k = t - _ROUND32
    r = ((yc - k * _LN2_HI) - k * _LN2_LO) + err
    p = (((((_E0 * r + _E1) * r + _E2) * r + _E3) * r + _E4) * r + _E5) * (r * r) + r + _ONE32
    e = p * _bits_to_f32((_f32_to_bits(t) - _ROUND32_BITS + np.int32(127)) << np.int32(23))
    return _ZERO32 if y < _LOW32 else e


@njit(inline="always", error_model="numpy")
def exp_neg32(y):
    return exp_neg32_plus(y, _MINUS_ZERO32)  # r + -0.0 is r: the add folds away


@njit(inline="always", error_model="numpy")
def sigmoid_f32(x):
    e = exp_neg32(-abs(x))
    return (_ONE32 if x >= _ZERO32 else e) / (_ONE32 + e)


@njit(inline="always", error_model="numpy")
def tanh_f32(x):
    a = abs(x)
    e = exp_neg32(-(a + a))
    big = (_ONE32 - e) / (_ONE32 + e)
    x2 = x * x
    small = x * (_ONE32 + x2 * (_T3 + x2 * (_T5 + x2 * (_T7 + x2 * (_T9 + x2 * (_T11 + x2 * (_T13 + x2 * _T15)))))))
    return small if a < _SMALL_TANH32 else (-big if x < _ZERO32 else big)
'''

_HEADER = '''"""Generated by ir.runtime.numba_rnn: the LSTM cell, forward and backward, float32."""
import numpy as np
from numba import njit
'''

_SOURCE = '''


# Row slices, not gates[b, hidden + j]: with them LLVM sees four distinct rows and vectorises the loop (the
# 2-D indexing form measured 8x slower backward).
@njit(cache=True, error_model="numpy", fastmath={"contract"})
def cell(gates, c, h, c_new):
    n, hidden = c.shape
    for b in range(n):
        gi, gf = gates[b, :hidden], gates[b, hidden:2 * hidden]
        gg, go = gates[b, 2 * hidden:3 * hidden], gates[b, 3 * hidden:]
        cb, hb, cn = c[b], h[b], c_new[b]
        for j in range(hidden):
            si, sf, tg, so = sigmoid_f32(gi[j]), sigmoid_f32(gf[j]), tanh_f32(gg[j]), sigmoid_f32(go[j])
            cc = sf * cb[j] + si * tg
            cn[j] = cc
            hb[j] = tanh_f32(cc) * so


@njit(cache=True, error_model="numpy", fastmath={"contract"})
def cell_backward(gates, c, dh, dc, d, dc_prev):
    n, hidden = c.shape
    one = f32(1)
    for b in range(n):
        gi, gf = gates[b, :hidden], gates[b, hidden:2 * hidden]
        gg, go = gates[b, 2 * hidden:3 * hidden], gates[b, 3 * hidden:]
        di, df = d[b, :hidden], d[b, hidden:2 * hidden]
        dg, do = d[b, 2 * hidden:3 * hidden], d[b, 3 * hidden:]
        cb, dhb, dcb, dpb = c[b], dh[b], dc[b], dc_prev[b]
        for j in range(hidden):
            si, sf, tg, so = sigmoid_f32(gi[j]), sigmoid_f32(gf[j]), tanh_f32(gg[j]), sigmoid_f32(go[j])
            tc = tanh_f32(sf * cb[j] + si * tg)
            dct = (one - tc * tc) * so * dhb[j] + dcb[j]  # dL/dc' in all: dc' and dh' through h' = so tanh(c')
            di[j] = dct * tg * (si * (one - si))
            df[j] = dct * cb[j] * (sf * (one - sf))
            dg[j] = dct * si * (one - tg * tg)
            do[j] = dhb[j] * tc * (so * (one - so))
            dpb[j] = dct * sf
'''


@functools.cache
def _module():
    from .numba_gen import load
    return load(_HEADER + MATH_F32 + _SOURCE, "rnn")


def _load():
    g, c = np.zeros((1, 4), np.float32), np.zeros((1, 1), np.float32)
    _module().cell(g, c, np.empty_like(c), np.empty_like(c))
    _module().cell_backward(g, c, c, c, np.empty_like(g), np.empty_like(c))


def _fits(xp, gates, *arrays) -> bool:
    if (not numba_hook.ENABLED or xp is not np or type(gates) is not np.ndarray or gates.dtype != np.float32
            or gates.size < MIN_SIZE):
        return False
    if not all(type(a) is np.ndarray and a.dtype == np.float32 and a.flags.c_contiguous for a in (gates, *arrays)):
        return False
    if not numba_hook.ready():  # numba still loading (its tiered start): NumPy's kernels meanwhile
        numba_hook.prepare(("lstm_cell",), _load)
        return False
    return True


def lstm_cell(xp, gates, c):
    """nn.lstm_cell: (h', c') in one loop (float32 on NumPy), else the NumPy kernel."""
    if not _fits(xp, gates, c):
        return _NUMPY["nn.lstm_cell"](xp, gates, c)
    h, c_new = np.empty(c.shape, np.float32), np.empty(c.shape, np.float32)
    _module().cell(gates, c, h, c_new)
    return h, c_new


def lstm_cell_backward(xp, gates, c, dh, dc):
    """grad.lstm_cell_backward: (d gates, d c) in one loop (float32 on NumPy), else the NumPy kernel."""
    if not _fits(xp, gates, c, dh, dc):
        return _NUMPY["grad.lstm_cell_backward"](xp, gates, c, dh, dc)
    d, dc_prev = np.empty(gates.shape, np.float32), np.empty(c.shape, np.float32)
    _module().cell_backward(gates, c, dh, dc, d, dc_prev)
    return d, dc_prev


if numba_hook.ENABLED:  # with TRACEGRAD_KERNELS=numpy (or no numba) the ops keep their NumPy kernels untouched
    provide_kernel("nn.lstm_cell", lstm_cell)
    provide_kernel("grad.lstm_cell_backward", lstm_cell_backward)

__all__ = ["MIN_SIZE", "lstm_cell", "lstm_cell_backward"]
