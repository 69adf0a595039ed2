"""NumPy's protocols on Tensor: `np.exp(t)`, `np.add(t, 1)`, `np.sum(t)`, `np.mean(t, axis=0)` return Tensors
(eagerly, and inside a trace, where they record the same ops as tracer's functions).

A ufunc or function tracegrad has no op for raises a TypeError naming what to use instead. Other NumPy
functions on concrete tensors (np.allclose, np.isclose, ...) see plain arrays, as before: they return
NumPy values. Inside a trace they raise, since a traced value has no data.
"""
from __future__ import annotations

import math

import numpy as np

from . import math as _m
from . import shape as _s
from .tensor import Tensor, TraceError

_UFUNCS = {
    "add": _m.add, "subtract": _m.subtract, "multiply": _m.multiply, "divide": _m.divide, "power": _m.power,
    "maximum": _m.maximum, "minimum": _m.minimum, "less": _m.less, "less_equal": _m.less_equal,
    "greater": _m.greater, "greater_equal": _m.greater_equal, "equal": _m.equal, "not_equal": _m.not_equal,
    "negative": _m.negative, "absolute": _m.abs, "exp": _m.exp, "log": _m.log, "sqrt": _m.sqrt, "sin": _m.sin,
    "cos": _m.cos, "tanh": _m.tanh, "matmul": _s.matmul, "square": lambda x: _m.multiply(x, x),
    "positive": lambda x: x, "floor_divide": _m.floor_divide, "remainder": _m.remainder,
}
_UFUNC_HINTS = {"isnan": "x != x", "clip": "x.clamp(lo, hi)"}


def _special_ufuncs() -> dict:
    """NumPy's names for tracer/special_math.py's and tracer/bitwise.py's functions (imported late: both
    modules import this package's math, and NumPy calls arrive only once tracer is loaded)."""
    from . import bitwise as b
    from . import special_math as sm
    names = {"tan": sm.tan, "arcsin": sm.asin, "arccos": sm.acos, "arctan": sm.atan, "arctan2": sm.atan2,
             "sinh": sm.sinh, "cosh": sm.cosh, "arcsinh": sm.asinh, "arccosh": sm.acosh, "arctanh": sm.atanh,
             "log2": sm.log2, "log10": sm.log10, "log1p": sm.log1p, "expm1": sm.expm1, "exp2": sm.exp2,
             "logaddexp": sm.logaddexp, "hypot": sm.hypot, "copysign": sm.copysign, "fmin": sm.fmin, "fmax": sm.fmax,
             "fmod": sm.fmod, "heaviside": sm.heaviside, "reciprocal": sm.reciprocal, "sign": sm.sign,
             "trunc": sm.trunc, "floor": sm.floor, "ceil": sm.ceil, "rint": sm.round, "bitwise_and": b.bitwise_and,
             "bitwise_or": b.bitwise_or, "bitwise_xor": b.bitwise_xor, "invert": b.bitwise_not,
             "left_shift": b.bitwise_left_shift, "right_shift": b.bitwise_right_shift}
    _UFUNCS.update(names)
    return names


def array_ufunc(self, ufunc, method, *inputs, **kwargs):
    """NumPy's ufunc protocol: the common ufuncs on a Tensor run as tracegrad ops and return Tensors."""
    fn = _UFUNCS.get(ufunc.__name__) or _special_ufuncs().get(ufunc.__name__)  # a miss: load them, look again
    if method != "__call__" or fn is None:
        what = f"np.{ufunc.__name__}" + ("" if method == "__call__" else f".{method}")
        hint = _UFUNC_HINTS.get(ufunc.__name__) if method == "__call__" else {
            "reduce": "tracer.sum / tracer.max / ... with axis=", "accumulate": "tracer.cumsum"}.get(method)
        raise TypeError(f"{what} is not supported on tracegrad Tensors; use {hint or 'a tracer function'}"
                        f"{'' if hint else ', or call it on x.numpy() outside a trace'}")
    out = kwargs.pop("out", None)
    unknown = {k: v for k, v in kwargs.items() if v is not None and not (k == "casting" and v == "same_kind")}
    if unknown:
        raise TypeError(f"np.{ufunc.__name__}: arguments {sorted(unknown)} are not supported on tracegrad Tensors")
    result = fn(*inputs)
    if out is None:
        return result
    if len(out) != 1 or isinstance(out[0], Tensor):
        raise TypeError(f"np.{ufunc.__name__}: out= must be one NumPy array")
    out[0][...] = result.numpy()  # `arr += t`: the array is written in place, as NumPy does
    return out[0]


def _np_axis_call(fn, rename=None):
    def call(*args, **kwargs):
        for old, new in (rename or {}).items():
            if old in kwargs:
                kwargs[new] = kwargs.pop(old)
        return fn(*args, **kwargs)
    return call


def _where(condition, x=None, y=None):
    if x is None or y is None:
        raise TypeError("np.where(condition) (the indices form) is not supported on tracegrad Tensors: its shape "
                        "depends on the values")
    return _m.where(condition, x, y)


# NumPy functions whose tracegrad meaning lives in tracer.torch_methods (which imports this module): it
# registers them here when it loads, so this module never imports it back
METHOD_FUNCTIONS: dict = {}


def _functions():
    tm = METHOD_FUNCTIONS
    return {
        np.sum: _s.sum, np.mean: _s.mean, np.max: _s.max, np.amax: _s.max, np.min: _s.min, np.amin: _s.min,
        np.var: _np_axis_call(_s.var, {"ddof": "correction"}), np.std: _np_axis_call(tm["std"], {"ddof": "correction"}),
        np.argmax: _s.argmax, np.argmin: tm["argmin"], np.reshape: _np_axis_call(_s.reshape, {"newshape": "shape"}),
        np.transpose: _s.permute_dims, np.concatenate: _s.concat, np.stack: _s.stack, np.squeeze: _s.squeeze,
        np.expand_dims: _s.expand_dims, np.where: _where,
        np.clip: _np_axis_call(tm["clamp"], {"a_min": "min", "a_max": "max"}),
        np.take: _s.take, np.tril: _s.tril, np.triu: _s.triu, np.broadcast_to: _s.broadcast_to, np.matmul: _s.matmul,
        np.swapaxes: _s.transpose, np.zeros_like: _s.zeros_like, np.ones_like: _s.ones_like,
        np.full_like: _s.full_like, np.shape: lambda a: a.shape, np.ndim: lambda a: a.ndim,
        np.size: lambda a: math.prod(a.shape), np.split: _s.split, np.cumsum: _s.cumsum,
    }


_FUNCTIONS: dict = {}
# keyword arguments NumPy's functions take that mean "the default" when None
_DEFAULTS = {"out": None, "dtype": None, "where": True, "initial": np._NoValue}


def _to_numpy(v):
    if isinstance(v, Tensor):
        if v._var is not None:
            raise TraceError
        return v.numpy()
    if isinstance(v, (list, tuple)):
        return type(v)(_to_numpy(a) for a in v)
    return v


def array_function(self, func, types, args, kwargs):
    """NumPy's function protocol: np.sum(t), np.mean(t, axis=0), np.concatenate([t, u]) ... return Tensors."""
    if not _FUNCTIONS:
        _FUNCTIONS.update(_functions())
    fn = _FUNCTIONS.get(func)
    kwargs = {k: v for k, v in kwargs.items() if not (k in _DEFAULTS and v is _DEFAULTS[k])}
    if fn is not None and not {"out", "dtype", "where", "initial"} & set(kwargs):
        return fn(*args, **kwargs)
    try:
        return func(*_to_numpy(args), **_to_numpy(kwargs))
    except TraceError:
        pass
    raise TypeError(f"np.{func.__name__} is not supported on traced tensors"
                    + (f" with arguments {sorted(kwargs)}" if fn is not None else "")
                    + "; use the tracer function of that name (tracer.sum, tracer.concat, ...) or compute it "
                    "outside the traced function")


OPERATORS = {"__array_ufunc__": array_ufunc, "__array_function__": array_function}
