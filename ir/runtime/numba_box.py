"""Boxing of the arrays a whole-function numba program returns (ir.runtime.numba_program), without numba's
per-array unpickling.

numba's boxer of an array result (numba.core.boxing.box_array, through PythonAPI.nrt_adapt_ndarray_to_python)
embeds the array's Python type (np.ndarray) as a pickle and unpickles it at EVERY call: numba's C helper
builds two bytes objects and an int, calls numba.core.serialize._numba_unpickle, whose memo is keyed by
them, and keeps the new reference it returns (np.ndarray's reference count grows by one per boxed array).
For the tiny MLP's step (7 results) that is about 0.5 us an array. `boxing()` has numba box arrays as it
does, but with the type read from the compiled function's environment constants, where numba already keeps
the array's dtype: the same call of NRT_adapt_ndarray_to_python_acqref (same type, dtype, ndim, writeable
flag; a MemInfo base owning the data), so the same arrays, one list read instead of the unpickling, and no
reference leaked. Both are pickled with the cached machine code (np.ndarray by reference), so a later
process loads the same. ir.runtime.numba_emit's header says so in the program's source, so that a kernel
file compiled with numba's own boxer is not loaded in its place.
"""
from __future__ import annotations

import contextlib


def _box_array(typ, val, c):
    from llvmlite import ir as llvm
    from numba.core import cgutils, types
    from numba.np import numpy_support

    if not c.context.enable_nrt:  # numba's boxer returns the parent array then; never for njit functions
        return _numba_box_array()(typ, val, c)
    env, pyapi, builder = c.env_manager, c.pyapi, c.builder
    dtype = env.read_const(env.add_const(numpy_support.as_dtype(typ.dtype)))
    pytype = env.read_const(env.add_const(typ.box_type))  # a borrowed reference, as the helper takes it
    i32 = llvm.IntType(32)
    fnty = llvm.FunctionType(pyapi.pyobj, [pyapi.voidptr, pyapi.pyobj, i32, i32, pyapi.pyobj])
    fn = pyapi._get_function(fnty, name="NRT_adapt_ndarray_to_python_acqref")
    ndim = c.context.get_constant(types.int32, typ.ndim)
    writable = c.context.get_constant(types.int32, int(typ.mutable))
    ptr = cgutils.alloca_once_value(builder, val)
    out = builder.call(fn, [builder.bitcast(ptr, pyapi.voidptr), pytype, ndim, writable, dtype])
    c.context.nrt.decref(builder, typ, val)  # the helper acquired its own reference (as numba's boxer does)
    return out


def _numba_box_array():
    from numba.core import boxing

    return boxing.box_array


# the numba releases whose boxer and NRT_adapt_ndarray_to_python_acqref (its C signature) `_box_array` was read
# from and tested on (0.68 only); on any other, numba's own boxer (a changed C signature would crash, not raise)
TESTED = ((0, 68), (0, 68))


def supported(version: str) -> bool:
    """Whether numba `version` ("0.68.1") lies in TESTED's range of releases."""
    try:
        release = tuple(int(part) for part in version.split(".")[:2])
    except ValueError:
        return False
    return TESTED[0] <= release <= TESTED[1]


@contextlib.contextmanager
def boxing():
    """While inside, numba functions compiled (on any thread: numba's compiler lock is held) box array results
    with `_box_array`; numba's own boxer again after. Outside TESTED's releases, numba's own boxer throughout."""
    import numba

    if not supported(numba.__version__):
        yield
        return
    from numba.core import boxing as _registered  # noqa: F401 - numba's boxers registered first
    from numba.core import types
    from numba.core.compiler_lock import global_compiler_lock
    from numba.core.pythonapi import _boxers

    with global_compiler_lock:
        before = _boxers.functions[types.Array]
        _boxers.functions[types.Array] = _box_array
        try:
            yield
        finally:
            _boxers.functions[types.Array] = before


__all__ = ["boxing"]
