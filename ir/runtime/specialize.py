"""Kernels specialized to one binding's static types, for the NumPy executor.

A kernel is written once for any shape and dtype (`kernel(xp, *arrays, **attrs)`), so it decides at
run time what the IR already fixed: the axes to reduce, whether a dtype needs a cast, which `where`
path fits the size, and it goes through NumPy's Python-level wrappers (`np.sum`, `np.mean`,
`np.transpose` are Python functions over the ufuncs). On arrays of a few thousand elements those
decisions cost more than the arithmetic. `specialize(call)` makes them once, at compile time, and
returns a callable of the arrays alone: a ufunc, a bound ufunc method with its axes, a method getter.

Each specialization computes exactly what the op's kernel computes, with the same ufuncs in the same
order, so results are bit-identical (tests/ir/test_specialize.py runs the op table both ways). Ops
without an entry, dtypes a specialization does not cover (integer reductions, float16 statistics) and
CuPy keep the generic kernel.
"""
from __future__ import annotations

import functools
import math
import operator

import numpy as np

from ..nodes import Call
from ..ops.elementwise import _where
from ..ops.manipulate import perm_axes
from ..ops.reduction import kernel_axes
from ..ops.registry import get_op
from ..types import TensorType
from . import numba_hook

_FLOATS = ("float32", "float64")
_UFUNCS = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply, "maximum": np.maximum,
           "minimum": np.minimum, "negative": np.negative, "abs": np.absolute, "exp": np.exp, "log": np.log,
           "sqrt": np.sqrt, "sin": np.sin, "cos": np.cos, "tanh": np.tanh, "less": np.less,
           "less_equal": np.less_equal, "greater": np.greater, "greater_equal": np.greater_equal,
           "equal": np.equal, "not_equal": np.not_equal, "matmul": np.matmul}
_FLOAT_UFUNCS = {"divide": np.divide, "power": np.power}  # integer divide truncates: the kernel's own rule
_REDUCE = {"sum": np.add, "max": np.maximum, "min": np.minimum}


def specialize(call: Call, xp):
    """A callable of the arrays alone that computes `call` as its kernel would, or None to keep the kernel."""
    if xp is not np:
        return None
    types = [a.type for a in call.args]
    if not all(isinstance(t, TensorType) for t in types) or not isinstance(call.type, TensorType):
        return None
    if numba_hook.ENABLED:  # numba's softmax, layer_norm and GELU where it has them (ir.runtime.numba_hook)
        fast = numba_hook.specialize(call)
        if fast is not None:
            return fast
    build = _BUILDERS.get(call.op)
    if build is None:
        return None
    return build(call.op, types, call.type, **call.attrs)


def _ufunc(name, types, out):
    return _UFUNCS[name]


def _float_ufunc(name, types, out):
    return _FLOAT_UFUNCS[name] if out.dtype in _FLOATS else None


def _relu(name, types, out):
    if out.dtype not in _FLOATS:
        return None
    zero = np.dtype(out.dtype).type(0)

    def relu(x):  # maximum(x, 0) in the kernel's order: maximum(-0.0, 0) keeps -0.0
        return np.maximum(x, zero)
    return relu


def _where_(name, types, out):
    if max(math.prod(t.shape) for t in types) < 4096:
        return np.where
    return functools.partial(_where, np)


def _reduction(name, types, out, axis, keepdims):
    x = types[0]
    if x.dtype not in _FLOATS:
        return None  # NumPy widens small integers; the kernel casts back
    axes = kernel_axes(axis, x.ndim)
    if name != "mean":
        return functools.partial(_REDUCE[name].reduce, axis=axes, keepdims=keepdims)
    count = _count(x.dtype, math.prod(x.shape[a] for a in axes))
    if count == 0:
        return None  # np.mean's empty-slice warning and nan: the kernel's business
    return functools.partial(_mean, axes=axes, keepdims=keepdims, count=count)


def _count(dtype: str, n: int):
    """The divisor of a mean as np.mean divides: an intp, so a float32 sum is divided in float64 and rounded
    once. A Python int (cast to float32, one rounding less work) gives the same bits while float32 holds
    it exactly; above 2**24 it would round (2**24 + 1 -> 2**24)."""
    return n if dtype != "float32" or n <= 2**24 else np.intp(n)


def _mean(x, axes, keepdims, count):
    # np.mean: the sum, then a true divide by the count (in place when the sum is an array)
    s = np.add.reduce(x, axis=axes, keepdims=keepdims)
    if type(s) is np.ndarray:
        return np.true_divide(s, count, out=s, casting="unsafe")
    return s.dtype.type(s / count)


def _collapse(name, types, out, shape):
    x = types[0]
    if x.dtype not in _FLOATS:
        return None
    lead = x.ndim - len(shape)
    inner = tuple(lead + i for i, d in enumerate(shape) if d == 1 and x.shape[lead + i] != 1)
    if not lead and not inner:
        return None  # nothing to sum: the kernel hands x back
    if not inner:  # only leading axes: the sum has the target shape already
        return functools.partial(np.add.reduce, axis=tuple(range(lead)))
    return functools.partial(_sum_reshape, axes=tuple(range(lead)) + inner, shape=shape)


def _sum_reshape(x, axes, shape):
    return np.add.reduce(x, axis=axes, keepdims=True).reshape(shape)


def _permute(name, types, out, axes):
    axes = perm_axes(get_op(name), axes, types[0].ndim)
    if axes == (1, 0):
        return operator.attrgetter("T")
    return operator.methodcaller("transpose", axes)


def _reshape(name, types, out, **attrs):
    if types[0].ndim == 0 and name == "squeeze":
        return None
    return operator.methodcaller("reshape", out.shape)


def _astype(name, types, out, dtype):
    return operator.methodcaller("astype", dtype)


def _softmax(name, types, out, axis):
    if out.dtype not in _FLOATS or math.prod(out.shape) == 0:
        return None
    return functools.partial(_log_softmax if name == "nn.log_softmax" else _softmax_, axis=axis)


def _softmax_(x, axis):
    # the kernel's exp(x - max) / sum, each step written into the one temporary
    e = np.subtract(x, np.maximum.reduce(x, axis=axis, keepdims=True))
    np.exp(e, out=e)
    return np.divide(e, np.add.reduce(e, axis=axis, keepdims=True), out=e)


def _log_softmax(x, axis):
    shifted = np.subtract(x, np.maximum.reduce(x, axis=axis, keepdims=True))
    s = np.add.reduce(np.exp(shifted), axis=axis, keepdims=True)
    return np.subtract(shifted, np.log(s, out=s), out=shifted)


def _gelu(name, types, out, approximate):
    # a 0-d product is a NumPy scalar, which no `out=` can receive: the kernel's business
    return _gelu_tanh if approximate == "tanh" and out.dtype in _FLOATS and out.shape != () else None


_GELU_C = math.sqrt(2.0 / math.pi)


def _gelu_tanh(x):
    # the kernel's 0.5 * x * (1 + tanh(c * (x + 0.044715 * x * x * x))), the same operations in the same
    # order (products and sums with one scalar commute exactly), in two buffers instead of eight
    a = np.multiply(x, 0.044715)
    np.multiply(a, x, out=a)
    np.multiply(a, x, out=a)
    np.add(x, a, out=a)
    np.multiply(a, _GELU_C, out=a)
    np.tanh(a, out=a)
    np.add(a, 1.0, out=a)
    b = np.multiply(x, 0.5)
    return np.multiply(b, a, out=b)


def _layer_norm(name, types, out, axes, epsilon):
    data = types[0]
    if data.dtype not in _FLOATS or any(t.dtype != data.dtype for t in types):
        return None  # float16 statistics go through float32 in the kernel
    axes = tuple(a % data.ndim for a in axes)
    count = _count(data.dtype, math.prod(data.shape[a] for a in axes))
    if count == 0:
        return None
    return functools.partial(_layer_norm_, axes=axes, count=count, epsilon=epsilon)


def _layer_norm_(data, gamma, beta, axes, count, epsilon):
    # the kernel's (x - mean) / sqrt(var + eps) * gamma + beta, written into the centered buffer
    centered = np.subtract(data, _mean(data, axes, True, count))
    var = _mean(np.multiply(centered, centered), axes, True, count)
    np.divide(centered, np.sqrt(var + epsilon), out=centered)
    np.multiply(centered, gamma, out=centered)
    return np.add(centered, beta, out=centered)


_BUILDERS = {**{n: _ufunc for n in _UFUNCS}, **{n: _float_ufunc for n in _FLOAT_UFUNCS},
             "nn.relu": _relu, "where": _where_, "sum": _reduction, "mean": _reduction, "max": _reduction,
             "min": _reduction, "collapse_sum_to": _collapse, "permute_dims": _permute, "reshape": _reshape,
             "expand_dims": _reshape, "squeeze": _reshape, "astype": _astype, "nn.softmax": _softmax,
             "nn.log_softmax": _softmax, "nn.gelu": _gelu, "nn.layer_norm": _layer_norm}

__all__ = ["specialize"]
