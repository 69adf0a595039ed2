"""Random tensors from a seed: random.uniform, random.normal, random.randint. None carries a gradient.

They draw from the same counter-based generator as dropout (`dropout_uniform`): the values depend only on
the seed, the shape and the attributes, so NumPy and CuPy agree and a recomputed checkpoint region draws
the same values again. The seed is an input (a 0-d int tensor), so a compiled step can feed a fresh one
per call.
"""
from __future__ import annotations

import numpy as np

from ..types import INT_DTYPES, TensorType
from .nn import dropout_uniform
from .registry import Attr, declare, tensor_arg

SHAPE = Attr("shape", "shape")


def _infer(kinds, check=None):
    def infer(op, types, shape, dtype, **attrs):
        seed = tensor_arg(op, types, 0)
        if seed.dtype not in INT_DTYPES or seed.shape != ():
            raise op.error(f"argument seed must be a 0-d int64 tensor, got {seed}")
        if any(d < 0 for d in shape):
            raise op.error(f"shape {shape} has a negative dimension")
        if dtype not in kinds:
            raise op.error(f"dtype must be one of {', '.join(kinds)}, got {dtype}")
        if check is not None:
            check(op, dtype=dtype, **attrs)
        return TensorType(shape, dtype)
    return infer


def _check_range(op, low, high, dtype):
    if not low < high:
        raise op.error(f"low ({low}) must be less than high ({high})")
    info = np.iinfo(dtype) if np.dtype(dtype).kind in "iu" else None  # random.uniform shares this check
    if info is not None and (low < info.min or high - 1 > info.max):
        raise op.error(f"low ({low}) and high - 1 ({high - 1}) must be within the range of {dtype} "
                       f"({info.min}..{info.max})")


def _check_std(op, mean, std, dtype):
    if not std >= 0:
        raise op.error(f"std must be >= 0, got {std}")


FLOATS = ("float16", "float32", "float64")


def _uniform(xp, seed, shape, low, high, dtype):
    return (low + (high - low) * dropout_uniform(xp, seed, shape)).astype(dtype)


def _normal(xp, seed, shape, mean, std, dtype):
    # Box-Muller on two streams of uniforms (the first half and the second half of 2n draws)
    u = dropout_uniform(xp, seed, (2,) + tuple(shape))
    z = xp.sqrt(-2.0 * xp.log1p(-u[0])) * xp.cos(2.0 * xp.pi * u[1])
    return (mean + std * z).astype(dtype)


def _randint(xp, seed, shape, low, high, dtype):
    u = dropout_uniform(xp, seed, shape)
    return xp.minimum(low + xp.floor(u * (high - low)), high - 1).astype(dtype)


declare("random.uniform", ("seed",), (SHAPE, Attr("low", "float", 0.0), Attr("high", "float", 1.0),
                                      Attr("dtype", "dtype", "float32")),
        infer=_infer(FLOATS, _check_range), kernel=_uniform, differentiable=False,
        doc="Uniform values in [low, high).")
declare("random.normal", ("seed",), (SHAPE, Attr("mean", "float", 0.0), Attr("std", "float", 1.0),
                                     Attr("dtype", "dtype", "float32")),
        infer=_infer(FLOATS, _check_std), kernel=_normal, differentiable=False,
        doc="Normal values of the given mean and standard deviation.")
declare("random.randint", ("seed",), (SHAPE, Attr("low", "int"), Attr("high", "int"),
                                      Attr("dtype", "dtype", "int64")),
        infer=_infer(INT_DTYPES, _check_range), kernel=_randint, differentiable=False,
        doc="Integers drawn uniformly from low..high-1.")
