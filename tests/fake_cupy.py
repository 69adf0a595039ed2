"""A stand-in for CuPy, so that tracegrad's CuPy branches run on a machine without CuPy or a GPU.

NumPy computes underneath; on top sit the CuPy rules those branches depend on:
- arrays are of class `cupy.ndarray`, not NumPy arrays; `.get()` copies one back to NumPy;
- an array refuses implicit conversion to NumPy (`np.asarray(a)` raises TypeError, as CuPy's does), and
  NumPy functions called on one dispatch to the module's, as CuPy's `__array_ufunc__`/`__array_function__` do;
- the module's functions refuse NumPy array arguments (TypeError, as CuPy's do); `asarray` moves them;
- `cuda.runtime.getDeviceCount()` reports the GPUs, or raises CUDARuntimeError when there are none.

Install it with `monkeypatch.setitem(sys.modules, "cupy", fake_cupy.module(devices=1))`.
tests/test_cuda.py runs the real thing on a GPU.
"""
from __future__ import annotations

import operator
import types

import numpy as np


class CUDARuntimeError(RuntimeError):
    """What CuPy raises when no driver or device is there (a RuntimeError, as CuPy's)."""


def _unwrap(x, allow_numpy=False):
    if isinstance(x, ndarray):
        return x._a
    if isinstance(x, np.ndarray) and not allow_numpy:
        raise TypeError(f"Unsupported type {type(x)}: a NumPy array passed where a CuPy array is needed")
    if isinstance(x, (tuple, list)):
        return type(x)(_unwrap(v, allow_numpy) for v in x)
    return x


def _wrap(x):
    if isinstance(x, np.ndarray):
        return ndarray(x)
    if isinstance(x, np.generic):  # CuPy's reductions give 0-d arrays, not scalars
        return ndarray(np.asarray(x))
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

    def __getattr__(self, name):  # ufunc methods: xp.add.at(...)
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
    __slots__ = ("_a",)
    __hash__ = None

    def __init__(self, a: np.ndarray):
        self._a = a

    base = property(lambda self: None)  # each wrapper owns its buffer, as far as the executor can tell

    def get(self) -> np.ndarray:
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

    cp.asarray, cp.array, cp.asnumpy = asarray, asarray, asnumpy
    cp.cuda = types.SimpleNamespace(runtime=types.SimpleNamespace(getDeviceCount=get_device_count))

    def __getattr__(name):
        value = getattr(np, name)
        return _Namespace(value) if isinstance(value, types.ModuleType) else _wrap(value)
    cp.__getattr__ = __getattr__
    return cp
