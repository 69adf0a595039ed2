"""A stand-in for CuPy, so that tracegrad's CuPy branches run on a machine without CuPy or a GPU.

NumPy computes underneath; on top sit the CuPy rules those branches depend on:
- arrays are of class `cupy.ndarray`, not NumPy arrays; `.get()` copies one back to NumPy;
- an array refuses implicit conversion to NumPy (`np.asarray(a)` raises TypeError, as CuPy's does), and
  NumPy functions called on one dispatch to the module's, as CuPy's `__array_ufunc__`/`__array_function__` do;
- the module's functions refuse NumPy array arguments (TypeError, as CuPy's do); `asarray` moves them;
- `cuda.runtime.getDeviceCount()` reports the GPUs, or raises CUDARuntimeError when there are none;
- `ElementwiseKernel`, whose CUDA body is run by
  reading it as Python (tracegrad's generated bodies are written in the common subset of both, see
  ir/runtime/fused_cuda.py), so a wrong generated body gives wrong values here.
`COUNTS` counts device-to-host copies ("get"), ufunc.at scatters ("add.at") and kernel launches, so tests
can say a path never left the device.

Install it with `fake_cupy.install(monkeypatch, devices=1)`.
tests/test_cuda.py runs the real thing on a GPU.
"""
from __future__ import annotations

import collections
import math
import operator
import re
import types
import weakref

import numpy as np

COUNTS: collections.Counter = collections.Counter()
_LIVE: weakref.WeakValueDictionary = weakref.WeakValueDictionary()  # id(NumPy array) -> its device array


class CUDARuntimeError(RuntimeError):
    """What CuPy raises when no driver or device is there (a RuntimeError, as CuPy's)."""


def _unwrap(x, allow_numpy=False):
    if isinstance(x, ndarray):
        return x._a
    if isinstance(x, np.ndarray) and not allow_numpy:
        raise TypeError(f"Unsupported type {type(x)}: a NumPy array passed where a CuPy array is needed")
    if isinstance(x, tuple) and hasattr(x, "_fields"):
        return type(x)(*(_unwrap(v, allow_numpy) for v in x))
    if isinstance(x, (tuple, list)):
        return type(x)(_unwrap(v, allow_numpy) for v in x)
    return x


def _wrap(x):
    if isinstance(x, np.ndarray):
        known = _LIVE.get(id(x))  # the same device array comes back as the same object (ufuncs with out=)
        return known if known is not None and known._a is x else ndarray(x)
    if isinstance(x, np.generic):  # CuPy's reductions give 0-d arrays, not scalars
        return ndarray(np.asarray(x))
    if isinstance(x, tuple) and hasattr(x, "_fields"):  # a named tuple (linalg.svd's SVDResult), as CuPy's
        return type(x)(*(_wrap(v) for v in x))
    if isinstance(x, (tuple, list)):
        return type(x)(_wrap(v) for v in x)
    if callable(x) and not isinstance(x, type):
        return _Function(x)
    return x


class _Function:
    """A NumPy function (or ufunc, or bound method) called on the arrays underneath."""

    def __init__(self, fn):
        self._fn = fn

    def __call__(self, *args, **kwargs):
        return _wrap(self._fn(*_unwrap(args), **{k: _unwrap(v) for k, v in kwargs.items()}))

    def __getattr__(self, name):  # ufunc methods: xp.add.at(...), counted ("add.at")
        if name == "at":
            COUNTS[f"{self._fn.__name__}.at"] += 1
        return _wrap(getattr(self._fn, name))


class _Namespace:
    """A NumPy submodule seen through the same rules (xp.lib.stride_tricks.as_strided)."""

    def __init__(self, mod):
        self._mod = mod

    def __getattr__(self, name):
        value = getattr(self._mod, name)
        return _Namespace(value) if isinstance(value, types.ModuleType) else _wrap(value)


class ndarray:  # CuPy's spelling
    __module__ = "cupy"
    __slots__ = ("_a", "__weakref__")
    __hash__ = None

    def __init__(self, a: np.ndarray):
        self._a = a
        _LIVE[id(a)] = self

    @property
    def base(self):
        """The array whose memory a view shares (None for an owner), one object per buffer, as in CuPy."""
        b = self._a.base
        if not isinstance(b, np.ndarray):
            return None
        known = _LIVE.get(id(b))
        return known if known is not None and known._a is b else ndarray(b)

    def get(self) -> np.ndarray:
        COUNTS["get"] += 1
        return self._a.copy()

    def __array__(self, dtype=None, copy=None):
        raise TypeError("Implicit conversion to a NumPy array is not allowed. Please use `.get()` to construct "
                        "a NumPy array explicitly.")

    def __getattr__(self, name):
        if name.startswith("__"):  # no __array_interface__ and the like: NumPy must not see through it
            raise AttributeError(name)
        return _wrap(getattr(self._a, name))

    # NumPy functions given a CuPy array dispatch to CuPy, as CuPy's arrays make them (and so still refuse
    # NumPy arrays among the arguments)
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return _Function(ufunc if method == "__call__" else getattr(ufunc, method))(*inputs, **kwargs)

    def __array_function__(self, func, types, args, kwargs):
        return _Function(func)(*args, **kwargs)

    def __getitem__(self, key):
        return _wrap(self._a[_unwrap(key, allow_numpy=True)])

    def __setitem__(self, key, value):
        if isinstance(value, np.ndarray) and value.ndim:  # CuPy reads a NumPy value as fill()'s scalar
            raise ValueError("non-scalar numpy.ndarray cannot be used for fill")
        self._a[_unwrap(key, allow_numpy=True)] = _unwrap(value, allow_numpy=True)

    def __len__(self):
        return len(self._a)

    def __iter__(self):
        return (_wrap(v) for v in self._a)

    def __bool__(self):
        return bool(self._a)

    def __float__(self):
        return float(self._a)

    def __int__(self):
        return int(self._a)

    def __index__(self):
        return operator.index(self._a)

    def __repr__(self):
        return f"cupy.ndarray({self._a!r})"


def _binary(name):
    def method(self, other):
        return _wrap(getattr(self._a, name)(_unwrap(other)))
    return method


def _inplace(name):
    def method(self, other):
        getattr(self._a, name)(_unwrap(other))
        return self
    return method


def _unary(name):
    return lambda self: _wrap(getattr(self._a, name)())


for _op in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and", "or", "xor", "lshift",
            "rshift"):
    setattr(ndarray, f"__{_op}__", _binary(f"__{_op}__"))
    setattr(ndarray, f"__r{_op}__", _binary(f"__r{_op}__"))
    setattr(ndarray, f"__i{_op}__", _inplace(f"__i{_op}__"))
for _op in ("lt", "le", "gt", "ge", "eq", "ne"):
    setattr(ndarray, f"__{_op}__", _binary(f"__{_op}__"))
for _op in ("neg", "pos", "abs", "invert"):
    setattr(ndarray, f"__{_op}__", _unary(f"__{_op}__"))


def module(devices: int = 1) -> types.ModuleType:
    """A fresh `cupy` module; with devices=0 it is "installed" on a machine without a usable GPU."""
    cp = types.ModuleType("cupy")
    cp.ndarray = ndarray

    def asarray(a, dtype=None):
        if isinstance(a, ndarray):
            return a if dtype is None or a.dtype == np.dtype(dtype) else a.astype(dtype)
        return ndarray(np.array(_unwrap(a, allow_numpy=True), dtype=dtype))  # host -> device: a copy

    def asnumpy(a):
        return a.get() if isinstance(a, ndarray) else np.asarray(a)

    def get_device_count():
        if not devices:
            raise CUDARuntimeError("cudaErrorNoDevice: no CUDA-capable device is detected")
        return devices

    def array(a, dtype=None, copy=True):
        out = asarray(a, dtype)
        return out.copy() if copy and out is a else out

    cp.asarray, cp.array, cp.asnumpy = asarray, array, asnumpy
    cp.ElementwiseKernel = ElementwiseKernel
    cp.__version__ = "0+fake"
    pool = _MemoryPool()
    cp.get_default_memory_pool = lambda: pool
    runtime = types.SimpleNamespace(getDeviceCount=get_device_count, runtimeGetVersion=lambda: 12000,
                                    getDeviceProperties=lambda i: {"name": b"fake GPU (NumPy)", "totalGlobalMem": 0})
    cp.cuda = types.SimpleNamespace(runtime=runtime, Device=_Device, set_allocator=pool.set_allocator)

    def __getattr__(name):
        value = getattr(np, name)
        return _Namespace(value) if isinstance(value, types.ModuleType) else _wrap(value)
    cp.__getattr__ = __getattr__
    return cp


class _Device:
    """`with cupy.cuda.Device(i):` (one device: nothing to switch); `.synchronize()` (nothing to wait for)."""

    def __init__(self, index=0):
        self.id = index

    def synchronize(self):
        COUNTS["synchronize"] += 1

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class _MemoryPool:
    """CuPy's default memory pool as far as benchmarks/gpu_check.py reads it: the fake allocates nothing on a
    device, so every figure is 0."""

    def __init__(self):
        self.allocator = None

    def used_bytes(self):
        return 0

    def total_bytes(self):
        return 0

    def free_all_blocks(self):
        return None

    def malloc(self, size):
        return types.SimpleNamespace(size=size)

    def set_allocator(self, fn=None):
        self.allocator = fn


# ---------------------------------------------------------------- ElementwiseKernel, run as Python

_C_TYPES = {"float": np.float32, "double": np.float64, "bool": np.bool_, "int": np.int32, "long long": np.int64}
_PARAM = re.compile(r"^\s*(\w+)\s+(\w+)\s*$")
_STATEMENT = re.compile(r"^\s*(?:(float|double|bool|int|long long)\s+)?(\w+)\s*=\s*(.+);\s*$")


def _math(fn, float_dtype):
    return lambda *a: np.asarray(fn(*a)).astype(float_dtype)


def _special(name):
    def fn(x):  # the op's own NumPy kernel (SciPy's where installed, else its series), as C's erff/erfinvf
        from ir.ops import special
        return getattr(special, name)(np, np.asarray(x))
    return fn


def _lgamma(x):  # C's lgamma of a double, by an independent route: math.lgamma, +inf at its poles
    def one(v):
        try:
            return math.lgamma(v)
        except ValueError:
            return math.inf
    return np.vectorize(one, otypes=[np.float64])(np.asarray(x, np.float64))


_NAMES = {"tg_where": np.where, "tg_int64": lambda x: np.asarray(x).astype(np.int64),
          "__int_as_float": lambda bits: np.array(bits, np.uint32).view(np.float32),
          **{name: (lambda x, t=t: np.asarray(x).astype(t)) for name, t in
             (("float", np.float32), ("double", np.float64), ("bool", np.bool_), ("int", np.int32))}}
for _c, _fn in (("exp", np.exp), ("log", np.log), ("sqrt", np.sqrt), ("sin", np.sin), ("cos", np.cos),
                ("tanh", np.tanh), ("fabs", np.abs), ("log1p", np.log1p), ("pow", np.power),
                ("erf", _special("erf")), ("erfc", _special("erfc")), ("erfinv", _special("erfinv")),
                ("fmax", np.fmax), ("fmin", np.fmin), ("tan", np.tan), ("asin", np.arcsin), ("acos", np.arccos),
                ("atan", np.arctan), ("sinh", np.sinh), ("cosh", np.cosh), ("asinh", np.arcsinh),
                ("acosh", np.arccosh), ("atanh", np.arctanh), ("log2", np.log2), ("log10", np.log10),
                ("expm1", np.expm1), ("exp2", np.exp2), ("atan2", np.arctan2), ("hypot", np.hypot),
                ("copysign", np.copysign), ("fmod", np.fmod), ("floor", np.floor), ("ceil", np.ceil),
                ("trunc", np.trunc), ("rint", np.rint), ("lgamma", _lgamma)):
    _NAMES[_c] = _math(_fn, np.float64)
    _NAMES[_c + "f"] = _math(_fn, np.float32)


class ElementwiseKernel:
    """cupy.ElementwiseKernel(in_params, out_params, operation, name, preamble=...): the body, one
    `type name = expression;` statement a line, evaluated with NumPy (C's math functions by their names,
    functional casts as astype, `a ? b : c` written as the preamble's `tg_where` macro)."""

    def __init__(self, in_params, out_params, operation, name="kernel", preamble="", **kwargs):
        self.inputs = [_PARAM.match(p).groups() for p in in_params.split(",")]
        self.outputs = [_PARAM.match(p).groups() for p in out_params.split(",")]
        self.operation, self.name, self.preamble = operation, name, preamble
        self.statements = []
        for line in operation.strip().splitlines():
            match = _STATEMENT.match(line)
            if match is None:
                raise ValueError(f"fake ElementwiseKernel {name}: cannot read the line {line!r}")
            self.statements.append(match.groups())

    def __call__(self, *args):
        COUNTS["kernel"] += 1
        if len(args) != len(self.inputs):
            raise TypeError(f"Wrong number of arguments for {self.name!r}")
        scope = dict(_NAMES)
        for (dtype, name), a in zip(self.inputs, args, strict=True):
            value = _unwrap(a)
            if np.asarray(value).dtype != np.dtype(dtype):
                raise TypeError(f"{self.name}: {name} is {np.asarray(value).dtype}, the kernel takes {dtype}")
            scope[name] = value
        shape = np.broadcast_shapes(*(np.shape(scope[n]) for _, n in self.inputs))
        with np.errstate(all="ignore"):
            for ctype, name, expression in self.statements:
                value = eval(expression, {"__builtins__": {}}, scope)  # noqa: S307 - our own generated text
                scope[name] = value if ctype is None else np.asarray(value).astype(_C_TYPES[ctype])
        (dtype, name), = self.outputs
        out = np.broadcast_to(np.asarray(scope[name]).astype(dtype), shape).copy()
        return ndarray(out)


def install(monkeypatch, devices: int = 1) -> types.ModuleType:
    """Put a fresh fake `cupy` into sys.modules for one test; returns it."""
    import sys

    cp = module(devices)
    monkeypatch.setitem(sys.modules, "cupy", cp)
    COUNTS.clear()
    return cp
