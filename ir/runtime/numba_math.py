"""Scalar math for the numba kernels (ir.runtime.numba_gen, ir.runtime.numba_composite), inlined into
their loops so the loops vectorise.

numba's LLVM has no vector math library: `math.exp` and `math.tanh` are calls into libm, one element at a
time, and a loop that calls them is not vectorised. `exp32` and `tanh32` are float32 exp and tanh computed
in float64 with no calls and no branches (selects only), so the loop around them is: Cody-Waite range
reduction x = k ln2 + r, |r| <= ln2 / 2, a degree-10 Taylor polynomial for exp(r) (relative error below
3e-13, far under float32's 6e-8 half-ulp) and 2**k put together from its exponent bits. Every result is
rounded once to float32, so it is float32's correctly rounded value but for rare ties: within 1e-7
relative of float64. NaN propagates, exp(+-inf) is inf and 0, tanh(+-inf) is +-1.
"""
from __future__ import annotations

import math

import numpy as np
from llvmlite import ir as llvm
from numba import njit, types
from numba.extending import intrinsic

_LOG2E = 1.0 / math.log(2.0)
_LN2 = math.log(2.0)
_ROUND = 1.5 * 2.0 ** 52
_ROUND_BITS = int(np.float64(_ROUND).view(np.int64))
_SMALL_TANH = 2.0 ** -10  # below it tanh(x) = x - x**3 / 3 to 1e-13 relative; above, 1 - 2 / (e + 1) is exact enough


@intrinsic
def _bits_to_float64(typingctx, bits):
    """The float64 whose IEEE bits are the int64 `bits` (a bitcast: one instruction, vectorises)."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], llvm.DoubleType())
    return types.float64(types.int64), codegen


@intrinsic
def _float64_to_bits(typingctx, value):
    """The IEEE bits of a float64 as an int64 (a bitcast)."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], llvm.IntType(64))
    return types.int64(types.float64), codegen


@intrinsic
def _bits_to_f32(typingctx, bits):
    """The float32 whose IEEE bits are the int32 `bits` (ir.runtime.numba_rnn's MATH_F32)."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], llvm.FloatType())
    return types.float32(types.int32), codegen


@intrinsic
def _f32_to_bits(typingctx, value):
    """The IEEE bits of a float32 as an int32."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], llvm.IntType(32))
    return types.int32(types.float32), codegen


@njit(inline="always", error_model="numpy")
def exp_reduced(d):
    """exp(d) for a float64 d in [-160, 160] (or NaN), to 3e-13 relative."""
    # round to an integer by adding 1.5 * 2**52 (no floor call, no float->int64 conversion: AVX has neither
    # vectorised); then k sits in the low bits of t's representation
    t = d * _LOG2E + _ROUND
    k = t - _ROUND
    r = d - k * _LN2
    p = 1.0 + r * (1.0 + r * (0.5 + r * (1.0 / 6 + r * (1.0 / 24 + r * (1.0 / 120 + r * (
        1.0 / 720 + r * (1.0 / 5040 + r * (1.0 / 40320 + r * (1.0 / 362880 + r * (1.0 / 3628800))))))))))
    # k is NaN only when d is, and then so is p: whatever the garbage bits give, the product is NaN
    scale = _bits_to_float64((_float64_to_bits(t) - _ROUND_BITS + 1023) << 52)
    return p * scale


@njit(inline="always", error_model="numpy")
def exp32(x):
    """exp of a float32, rounded to float32 (inf above 88.72, 0 below -103.97, NaN for NaN)."""
    d = np.float64(x)
    d = 160.0 if d > 160.0 else d  # NaN fails both tests and stays NaN
    d = -160.0 if d < -160.0 else d
    return np.float32(exp_reduced(d))


@njit(inline="always", error_model="numpy")
def tanh32(x):
    """tanh of a float32, rounded to float32."""
    d = np.float64(x)
    a = abs(d)
    a2 = 40.0 if a > 40.0 else a  # tanh is 1 in float64 well before 40; NaN stays NaN
    e = exp_reduced(2.0 * a2)
    big = 1.0 - 2.0 / (e + 1.0)
    small = d * (1.0 - d * d * (1.0 / 3.0))  # from d itself: tanh(-0.0) is -0.0
    signed = -big if d < 0.0 else big
    return np.float32(small if a < _SMALL_TANH else signed)


@njit(inline="always", error_model="numpy")
def sigmoid32(x):
    """1 / (1 + exp(-x)) as the sigmoid kernel computes it (exp(-|x|), no overflow, both tails exact)."""
    d = np.float64(x)
    a = abs(d)
    a = 160.0 if a > 160.0 else a
    e = exp_reduced(-a)
    return np.float32((1.0 if d >= 0.0 else e) / (1.0 + e))


__all__ = ["exp32", "exp_reduced", "sigmoid32", "tanh32"]
