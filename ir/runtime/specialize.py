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
from ..ops.elementwise import _SAME_WIDTH_INT, _where
from ..ops.loss import _checked_targets
from ..ops.manipulate import perm_axes, split_bounds
from ..ops.reduction import kernel_axes
from ..ops.registry import get_op
from ..types import TensorType, TupleType
from . import dense_chains, numba_hook, numba_nll, split2, vjp_chains
from .conv_specialize import BUILDERS as _CONV_BUILDERS

_FLOATS = ("float32", "float64")
_TUPLE_ARGS = frozenset({"concat", "stack"})  # ops whose one argument is a tuple of tensors
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
    if call.op in ("fused", "nn.gelu", "grad.take_backward") and numba_hook.ENABLED:
        # a backward chain's row kernel, the tanh GELU's forward as the same x * sigmoid(2u), the embedding
        # gradient's scatter-add as one loop (ir.runtime.vjp_chains)
        fast = vjp_chains.kernel(call)
        if fast is not None:
            return fast
    if call.op == "fused" and numba_hook.ENABLED:  # log_softmax + nll_loss, its adjoint (ir.runtime.numba_nll)
        fast = numba_nll.kernel(call)
        if fast is not None:
            return fast
    if call.op == "fused":  # a dense layer's bias + relu, relu's backward: one pass each (ir.runtime.dense_chains)
        fast = dense_chains.kernel(call)
        if fast is not None:
            return fast
    types = [a.type for a in call.args]
    if call.op in _TUPLE_ARGS and len(types) == 1 and isinstance(types[0], TupleType):
        types = list(types[0].fields)
    if call.op == "split" and isinstance(types[0], TensorType):  # an RNN's steps: views by slices made here
        return _split(types[0], **call.attrs)
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


def planned(fn, scratch=(), fresh=True):
    """Mark kernel `fn` as taking `out=` (ir.runtime.storage plans an array for its result) and, where it
    needs large temporaries of these (shape, dtype), `scratch=` (a tuple of planned arrays, in that order).
    `fresh`: its result is always `out` or a new array; False: it may be a view of an operand (reshape's).
    Called without them the kernel allocates as before, with the same values."""
    fn.takes_out, fn.scratch, fn.fresh = True, tuple((tuple(sh), str(dt)) for sh, dt in scratch), fresh
    return fn


def _ufunc(name, types, out):
    return _UFUNCS[name]


def _matmul(name, types, out):
    a, b = types
    if a.ndim >= 3 and b.ndim >= 3 and out.dtype in _FLOATS and a.dtype == b.dtype and 0 not in out.shape:
        if (split2.threads() > 1 and a.shape[:-2] == b.shape[:-2] and a.shape[0] >= 2
                and math.prod(out.shape) >= split2.MIN_SIZE):  # the stack's halves on two threads (ir.runtime.split2)
            return planned(functools.partial(_stacked_split, half=a.shape[0] // 2, shape=out.shape, dtype=out.dtype))
        return planned(_stacked)
    if a.ndim < 3 or b.ndim != 2 or out.dtype not in _FLOATS or a.dtype != b.dtype or 0 in out.shape:
        return np.matmul
    # a linear layer: (..., K) @ (K, N) as one 2-D GEMM (M = the leading dims), about 8% faster than NumPy's
    # stack of (T, K) @ (K, N) products and the same values; a strided `a` keeps the stacked product
    shape, rows = out.shape, math.prod(a.shape[:-1])

    def linear(x, w, out=None):
        if not x.flags.c_contiguous:
            return np.matmul(x, w, out=out)
        if out is None:
            return np.matmul(x.reshape(rows, -1), w).reshape(shape)
        np.matmul(x.reshape(rows, -1), w, out=out.reshape(rows, -1))
        return out
    return planned(linear)


def _stacked(x, y, out=None):
    """A stack of products (attention's q @ k^T, p @ v and their gradients). A transposed operand whose
    columns lie far apart (k^T with its heads taken out of the qkv buffer: strides (4, 1536) on a (32, 64)
    block) is copied first: (16, 4, 64, 32) @ that, float32, 1 thread, 0.36 ms as it is, 0.25 ms with the
    copy. Row-major strided and dense transposed operands measured faster as they are, and are left."""
    return np.matmul(_spread(x), _spread(y), out=out)


def _stacked_split(x, y, half, shape, dtype, out=None):
    """_stacked with the first `half` matrices on this thread and the rest on split2's worker: each matrix is
    the same BLAS call on the same operands, so the same bits."""
    out = np.empty(shape, dtype) if out is None else out
    split2.run(functools.partial(_stacked, x[:half], y[:half], out[:half]),
               functools.partial(_stacked, x[half:], y[half:], out[half:]))
    return out


def _spread(a):
    s = a.strides
    if s[-1] != a.itemsize and s[-2] == a.itemsize and s[-1] > 8 * a.shape[-2] * a.itemsize and 0 not in s:
        return np.ascontiguousarray(a)
    return a


def _float_ufunc(name, types, out):
    return _FLOAT_UFUNCS[name] if out.dtype in _FLOATS else None


def _relu(name, types, out):
    if out.dtype not in _FLOATS:
        return None
    zero = np.dtype(out.dtype).type(0)

    def relu(x, out=None):  # the kernel's maximum(x, 0), into planned storage (NumPy: +0.0 for -0.0, nan kept)
        return np.maximum(x, zero, out=out)
    return planned(relu)


def _where_(name, types, out):
    if max(math.prod(t.shape) for t in types) < 4096:
        return np.where
    if any(t.dtype != out.dtype for t in types[1:]):
        return functools.partial(_where, np)
    kernel = functools.partial(_where, np)
    view = _SAME_WIDTH_INT.get(out.dtype)
    if view is None:
        def where(c, x, y, out=None):
            if out is None:
                return kernel(c, x, y)
            np.copyto(out, y)  # the selected bits copied: the kernel's values exactly
            np.copyto(out, x, where=c)
            return out
        return planned(where)
    return planned(functools.partial(_select, kernel=kernel, view=np.dtype(view)), scratch=[(out.shape, view)])


def _select(c, x, y, kernel, view, out=None, scratch=(None,)):
    """The kernel's branchless select of the bits, (x & m) | (y & ~m) with m all ones where c holds, written into
    `out` and one scratch mask: NumPy's masked copy branches per element (on a random (256, 1024) float32 mask,
    1 thread: copyto(where=) 1.1 ms, these six passes about 0.15 ms)."""
    if out is None:
        return kernel(c, x, y)
    m = np.empty(out.shape, view) if scratch[0] is None else scratch[0]
    np.copyto(m, c)
    np.negative(m, out=m)
    o = out.view(view)
    np.bitwise_and(x.view(view), m, out=o)
    np.invert(m, out=m)
    np.bitwise_and(y.view(view), m, out=m)
    np.bitwise_or(o, m, out=o)
    return out


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


_sum_reshape.fresh = True  # a new array, never a view of x: ir.runtime.storage may plan x's buffer


def _permute(name, types, out, axes):
    axes = perm_axes(get_op(name), axes, types[0].ndim)
    if axes == (1, 0):
        return operator.attrgetter("T")
    return operator.methodcaller("transpose", axes)


def _reshape(name, types, out, **attrs):
    if types[0].ndim == 0 and name == "squeeze":
        return None
    shape = out.shape
    if math.prod(shape) == 0:
        return operator.methodcaller("reshape", shape)

    def reshape(x, out=None):  # a view where NumPy can make one; else the copy goes into `out`
        if out is None or x.flags.c_contiguous:
            return x.reshape(shape)
        try:
            return x.reshape(shape, copy=False)
        except ValueError:
            np.copyto(out.reshape(x.shape), x)  # C order, as reshape copies
            return out
    return planned(reshape, fresh=False)


def _split(x, indices_or_sections, axis):
    """split's pieces as np.split makes them (views x[..., lo:hi, ...]), from slices fixed at build time: np.split
    spends about a microsecond a piece in Python, 40 us on the (35, 20, 800) steps of word_language_model's LSTM."""
    axis %= x.ndim
    bounds = split_bounds(None, x.shape[axis], indices_or_sections)
    keys = tuple((slice(None),) * axis + (slice(lo, hi),) for lo, hi in zip(bounds[:-1], bounds[1:], strict=True))
    return lambda a: tuple([a[k] for k in keys])


def _concat(name, types, out, axis):
    if any(t.dtype != out.dtype for t in types) or 0 in out.shape:
        return None
    return planned(functools.partial(_concatenate, axis=axis))


def _concatenate(xs, axis, out=None):
    return np.concatenate(xs, axis=axis, out=out)


def _stack(name, types, out, axis):
    # into planned storage (the generic kernel allocates each call); ir.runtime.concat_heads makes the GPT's
    axis %= out.ndim
    if any(t.dtype != out.dtype for t in types) or 0 in out.shape:
        return None
    if numba_hook.ENABLED:  # attention's (B, T, H, D) heads as one copy loop (ir.runtime.numba_stack)
        from . import numba_stack
        fast = numba_stack.kernel(types, out, axis)
        if fast is not None:
            return planned(fast)
    if axis and split2.threads() > 1 and out.shape[0] >= 2 and math.prod(out.shape) >= split2.MIN_SIZE:
        return planned(functools.partial(_stack_split, axis=axis, half=out.shape[0] // 2, shape=out.shape))
    return planned(functools.partial(_stack_into, axis=axis))


def _stack_into(xs, axis, out=None):
    return np.stack(xs, axis=axis, out=out)


def _stack_split(xs, axis, half, shape, out=None):
    """np.stack's copies, the first `half` along axis 0 here and the rest on split2's worker (the same bits)."""
    out = np.empty(shape, xs[0].dtype) if out is None else out
    split2.run(functools.partial(np.stack, [x[:half] for x in xs], axis, out[:half]),
               functools.partial(np.stack, [x[half:] for x in xs], axis, out[half:]))
    return out


def _nll_backward(name, types, out, reduction, ignore_index):
    _g, pred, targets = types
    if pred.ndim != 2 or pred.dtype not in _FLOATS or 0 in pred.shape:
        return None
    return planned(functools.partial(_nll_loss_backward, mean=reduction == "mean", ignore_index=ignore_index))


def _nll_loss_backward(g, pred, targets, mean, ignore_index, out=None):
    # the kernel's one_hot * coef without the (N, C) one-hot: each row 0 * coef (its sign, and nan where coef is
    # not finite, as the product), then coef at the target column
    safe, valid = _checked_targets(np, pred, targets, ignore_index)
    coef = -g * valid
    if mean:
        coef = coef / np.maximum(valid.sum(), 1).astype(pred.dtype)
    coef = coef.astype(pred.dtype, copy=False)
    out = np.multiply(coef[:, None], pred.dtype.type(0), out=np.empty(pred.shape, pred.dtype) if out is None else out)
    out[np.arange(len(safe)), safe] = coef
    return out


def _astype(name, types, out, dtype):
    return operator.methodcaller("astype", dtype)


def _softmax(name, types, out, axis):
    if out.dtype not in _FLOATS or math.prod(out.shape) == 0:
        return None
    if name == "nn.log_softmax":
        return planned(functools.partial(_log_softmax, axis=axis), scratch=[(out.shape, out.dtype)])
    return planned(functools.partial(_softmax_, axis=axis))


def _softmax_(x, axis, out=None):
    # the kernel's exp(x - max) / sum, each step written into the one temporary
    e = np.subtract(x, np.maximum.reduce(x, axis=axis, keepdims=True), out=out)
    np.exp(e, out=e)
    return np.divide(e, np.add.reduce(e, axis=axis, keepdims=True), out=e)


def _log_softmax(x, axis, out=None, scratch=(None,)):
    # the reductions' arguments by position (axis, dtype, out, keepdims), no keyword parsing per call
    shifted = np.subtract(x, _MAX(x, axis, None, None, True), out=out)
    s = _ADD(np.exp(shifted, out=scratch[0]), axis, None, None, True)
    return np.subtract(shifted, np.log(s, out=s), out=shifted)


_MAX, _ADD = np.maximum.reduce, np.add.reduce


def _ce_logits(name, types, out):
    pred, labels = types
    if pred.dtype not in _FLOATS or pred.dtype != labels.dtype or pred.shape != labels.shape or pred.ndim < 2:
        return None
    n = np.dtype(pred.dtype).type(pred.shape[0])

    def cross_entropy(p, t):  # the kernel's -(p * t).sum() / N, the same ufuncs in the same order
        return np.negative(_ADD(np.multiply(p, t), None)) / n
    return cross_entropy


def _gelu(name, types, out, approximate):
    # a 0-d product is a NumPy scalar, which no `out=` can receive: the kernel's business
    if approximate != "tanh" or out.dtype not in _FLOATS or out.shape == ():
        return None
    return planned(functools.partial(_gelu_tanh), scratch=[(out.shape, out.dtype)])


_GELU_C = math.sqrt(2.0 / math.pi)


def _gelu_tanh(x, out=None, scratch=(None,)):
    # the kernel's 0.5 * x * (1 + tanh(c * (x + 0.044715 * x * x * x))), the same operations in the same
    # order (products and sums with one scalar commute exactly), in two buffers instead of eight
    a = np.multiply(x, 0.044715, out=scratch[0])
    np.multiply(a, x, out=a)
    np.multiply(a, x, out=a)
    np.add(x, a, out=a)
    np.multiply(a, _GELU_C, out=a)
    np.tanh(a, out=a)
    np.add(a, 1.0, out=a)
    b = np.multiply(x, 0.5, out=out)
    return np.multiply(b, a, out=b)


def _layer_norm(name, types, out, axes, epsilon):
    data = types[0]
    if data.dtype not in _FLOATS or any(t.dtype != data.dtype for t in types):
        return None  # float16 statistics go through float32 in the kernel
    axes = tuple(a % data.ndim for a in axes)
    count = _count(data.dtype, math.prod(data.shape[a] for a in axes))
    if count == 0:
        return None
    return planned(functools.partial(_layer_norm_, axes=axes, count=count, epsilon=epsilon),
                   scratch=[(data.shape, data.dtype)])


def _layer_norm_(data, gamma, beta, axes, count, epsilon, out=None, scratch=(None,)):
    # the kernel's (x - mean) / sqrt(var + eps) * gamma + beta, written into the centered buffer
    centered = np.subtract(data, _mean(data, axes, True, count), out=out)
    var = _mean(np.multiply(centered, centered, out=scratch[0]), axes, True, count)
    np.divide(centered, np.sqrt(var + epsilon), out=centered)
    np.multiply(centered, gamma, out=centered)
    return np.add(centered, beta, out=centered)


_BUILDERS = {**{n: _ufunc for n in _UFUNCS}, **{n: _float_ufunc for n in _FLOAT_UFUNCS}, "matmul": _matmul,
             "nn.relu": _relu, "where": _where_, "sum": _reduction, "mean": _reduction, "max": _reduction,
             "min": _reduction, "collapse_sum_to": _collapse, "permute_dims": _permute, "reshape": _reshape,
             "expand_dims": _reshape, "squeeze": _reshape, "astype": _astype, "stack": _stack, "nn.softmax": _softmax,
             "nn.log_softmax": _softmax, "nn.gelu": _gelu, "nn.layer_norm": _layer_norm, "concat": _concat,
             "grad.nll_loss_backward": _nll_backward, "nn.cross_entropy_with_logits": _ce_logits,
             **_CONV_BUILDERS}  # conv, pool and dropout kernels taking out= (ir.runtime.conv_specialize)

__all__ = ["planned", "specialize"]
