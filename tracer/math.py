"""Elementwise functions and the arithmetic operators, with NumPy-style dtype promotion."""
from __future__ import annotations

import numpy as np

import ir
from ir.ops.elementwise import IntegerPowerError

from .tensor import Tensor, TraceError, apply


def as_tensor(x) -> Tensor:
    if isinstance(x, Tensor):
        return x
    return Tensor(x)


def promote_types(type1, type2) -> str:
    """torch.promote_types: the smallest dtype both convert to without losing their kind. Unlike NumPy, an
    integer with a float gives that float (int64 with float32 is float32), and uint8 with int8 gives int16.

    >>> promote_types("int64", "float32"), promote_types("uint8", "int8"), promote_types("bool", "int16")
    ('float32', 'int16', 'int16')
    """
    a = np.dtype(ir.types.check_dtype(str(type1).replace("torch.", ""), "promote_types"))
    b = np.dtype(ir.types.check_dtype(str(type2).replace("torch.", ""), "promote_types"))
    if a.kind == "f" and b.kind != "f":
        return str(a)
    if b.kind == "f" and a.kind != "f":
        return str(b)
    return str(np.promote_types(a, b))


def _category(dtype) -> int:
    """torch's categories: bool < integer < floating."""
    kind = np.dtype(dtype).kind
    return 0 if kind == "b" else 2 if kind == "f" else 1


def _combine(higher, lower):
    """torch's combine_categories: the higher-priority group's dtype, unless the lower group is of a higher
    category (then the two promote)."""
    if higher is None:
        return lower
    if lower is None or _category(higher) == 2:
        return higher
    if _category(higher) == 0 or _category(lower) == 2:
        return promote_types(higher, lower)
    return higher


_DEFAULT = {"b": "bool", "i": "int64", "u": "int64", "f": "float32"}


def _result_dtype(dims, zeros, wrapped_kinds) -> str:
    """torch's result_type: tensors with dimensions first, then 0-d tensors, then Python numbers (each number
    of its category's default dtype: float32, int64, bool); a lower group counts only when its category is
    higher (a float64 0-d tensor with a float32 tensor stays float32; with an int tensor it gives float64)."""
    def group(dtypes):
        out = None
        for d in dtypes:
            out = d if out is None else promote_types(out, d)
        return out
    wrapped = group(_DEFAULT[k] for k in wrapped_kinds)
    return _combine(group(dims), _combine(group(zeros), wrapped)) or "bool"


def result_type(*operands) -> str:
    """torch.result_type: the dtype an arithmetic op on these operands (tensors, Python numbers) computes in.

    >>> import tracer
    >>> x = tracer.tensor([1, 2])
    >>> tracer.result_type(x, 2.5), tracer.result_type(tracer.ones((2,)), tracer.tensor(1.0, "float64"))
    ('float32', 'float32')
    """
    if not operands:
        raise TypeError("result_type: expected at least one operand")
    tensors = [v for v in operands if isinstance(v, Tensor) and not v._weak]
    weak = [_kind(v) for v in operands if not isinstance(v, Tensor) or v._weak]
    return _result_dtype([t.dtype for t in tensors if t.ndim], [t.dtype for t in tensors if not t.ndim], weak)


def promote(*values) -> list[Tensor]:
    """Tensors of one dtype, by torch's type promotion (result_type): tensors with dimensions decide, then 0-d
    tensors, then every other operand (Python or NumPy scalar, array, list), which is weak: it counts only when
    its kind is higher (a float operand makes an integer or bool tensor float32, an int one makes a bool tensor
    int64), so nothing is silently truncated. With no Tensor at all, arrays and lists are the tensors."""
    if all(isinstance(v, Tensor) for v in values) and len({v.dtype for v in values}) == 1:
        return list(values)  # the common case: nothing to promote
    if not any(isinstance(v, Tensor) for v in values):
        values = [v if isinstance(v, _SCALARS) else Tensor(v) for v in values]
    tensors = [v for v in values if isinstance(v, Tensor) and not v._weak]
    weak = {_kind(v) for v in values if not isinstance(v, Tensor) or v._weak}
    # Only Python numbers passed to a compiled step (weak tensors), no tensor: an operator between them
    # (`s * 0.5`, where Python would compute) keeps Python's 64-bit types and stays weak; a function of
    # them (`maximum(s, 0.1)`, which eagerly makes tensors of the numbers) takes the eager defaults.
    python_only = not tensors and any(isinstance(v, Tensor) for v in values)
    arithmetic = python_only and _python_arithmetic.active
    if python_only:
        dtype = np.result_type(*[v.dtype for v in values if isinstance(v, Tensor)])
        if dtype.kind in "biu" and "f" in weak:
            dtype = np.dtype("float64" if arithmetic else "float32")
        elif dtype.kind == "b" and weak & {"i", "u"}:
            dtype = np.dtype("int64")
        elif not arithmetic and dtype == np.float64:
            dtype = np.dtype("float32")
        dtype = str(dtype)
    else:
        dtype = _result_dtype([t.dtype for t in tensors if t.ndim], [t.dtype for t in tensors if not t.ndim], weak)
    out = []
    for v in values:
        if isinstance(v, Tensor):
            out.append(v if v.dtype == dtype else astype(v, dtype))
            if python_only and not arithmetic and out[-1]._weak:
                out[-1] = _strong(out[-1])
        elif isinstance(v, _SCALARS):
            out.append(Tensor(_scalar_array(v, dtype)))
            out[-1]._weak = arithmetic
        else:
            t = Tensor(v)
            out.append(t if t.dtype == dtype else astype(t, dtype))
    return out


def _scalar_array(v, dtype: str) -> np.ndarray:
    """A Python number as a 0-d array of `dtype`, wrapping an out-of-range integer as torch does (uint8 - 1)."""
    if isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)) and np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        if not info.min <= v <= info.max:
            return np.asarray(int(v) % (1 << info.bits), "uint64").astype(dtype)
    return np.asarray(v, dtype=dtype)


_SCALARS = (bool, int, float, np.number, np.bool_)


class _PythonArithmetic:
    active = False


_python_arithmetic = _PythonArithmetic()


def _strong(t: Tensor) -> Tensor:
    """The same traced value, no longer promoting as a Python number."""
    return Tensor(t)


def _python_operator(fn, symbol: str):
    """An operator that, between Python numbers passed to a compiled step and Python numbers, computes
    as Python would (64-bit, weak); any other operands go to fn as they are."""
    def operator(self, other):
        if not (self._weak and (isinstance(other, _SCALARS) or (isinstance(other, Tensor) and other._weak))):
            return fn(self, other)
        if symbol in ("__pow__", "__rpow__") and np.dtype(self.dtype).kind in "iu" and _kind(other) in "iu":
            raise TraceError("int ** int on numbers passed to the step: Python's result type depends on the sign "
                             "of the exponent, so the numbers are baked in")
        _python_arithmetic.active = True
        try:
            return fn(self, other)
        finally:
            _python_arithmetic.active = False
    operator.__name__ = getattr(fn, "__name__", symbol)
    return operator


def _kind(v) -> str:
    """The dtype kind ("b", "i", "u", "f", ...) of a weak operand; Tensor() rejects the unsupported ones."""
    if isinstance(v, Tensor):  # a Python number traced as an input of a compiled step
        return np.dtype(v.dtype).kind
    if isinstance(v, (bool, np.bool_)):
        return "b"
    if isinstance(v, (int, np.integer)):
        return "i"
    if isinstance(v, (float, np.floating)):
        return "f"
    dtype = getattr(v, "dtype", None)  # arrays, NumPy's or CuPy's
    return np.dtype(dtype).kind if dtype is not None else np.asarray(v).dtype.kind


def astype(x, dtype: str) -> Tensor:
    """x converted to `dtype` (x itself when it already has it), as NumPy's astype."""
    x = as_tensor(x)
    return x if x.dtype == dtype else apply("astype", [x], dtype=dtype)


def _binary(op):
    def fn(x1, x2) -> Tensor:
        return apply(op, promote(x1, x2))
    fn.__name__ = op
    fn.__doc__ = f"Elementwise {op} with broadcasting."
    return fn


add, subtract, multiply = (_binary(n) for n in ("add", "subtract", "multiply"))
maximum, minimum = (_binary(n) for n in ("maximum", "minimum"))


def power(x1, x2) -> Tensor:
    """Elementwise x1 ** x2 with broadcasting, as torch.pow: an integer tensor to a negative integer tensor power
    is 0 (1 for a base of 1, 1 or -1 by parity for -1); to a negative Python integer it raises IntegerPowerError
    (a RuntimeError and a ValueError), as torch refuses it.

    >>> import tracer
    >>> (tracer.tensor([2, 1, -1]) ** tracer.tensor([-1, -2, -3])).tolist()
    [0, 1, -1]
    """
    if (isinstance(x1, Tensor) and np.dtype(x1.dtype).kind in "biu" and isinstance(x2, (int, np.integer))
            and not isinstance(x2, (bool, np.bool_)) and x2 < 0):
        raise IntegerPowerError(f"power: Integers to negative integer powers are not allowed ({x1.dtype} "
                                f"tensor ** {x2}); use a float exponent ({float(x2)})")
    return apply("power", promote(x1, x2))


less, less_equal, greater = (_binary(n) for n in ("less", "less_equal", "greater"))
greater_equal, equal, not_equal = (_binary(n) for n in ("greater_equal", "equal", "not_equal"))


def divide(x1, x2) -> Tensor:
    """True division, as PyTorch's `/`: integer and bool operands give a float32 result.

    (The IR's `divide` keeps Relax's truncating integer division; this function never emits it.)

    >>> import tracer
    >>> (tracer.tensor([7, -7]) / 2).numpy().tolist()
    [3.5, -3.5]
    """
    a, b = promote(x1, x2)
    if a.dtype not in ir.types.FLOAT_DTYPES:
        # Python numbers passed to a compiled step (weak tensors) divide as Python's do: into float64
        python = _python_arithmetic.active
        a, b = astype(a, "float64" if python else "float32"), astype(b, "float64" if python else "float32")
    return apply("divide", [a, b])


def floor_divide(x1, x2) -> Tensor:
    """floor(x1 / x2), as Python's and PyTorch's `//`; an integer division by zero raises ZeroDivisionError.

    >>> import tracer
    >>> (tracer.tensor([7, -7]) // 2).numpy().tolist()
    [3, -4]
    """
    return apply("floor_divide", promote(x1, x2))


def remainder(x1, x2) -> Tensor:
    """x1 - floor(x1 / x2) * x2, with the sign of x2, as Python's and PyTorch's `%` (IR op floor_mod).

    >>> import tracer
    >>> (tracer.tensor([7, -7]) % 3).numpy().tolist()
    [1, 2]
    """
    return apply("floor_mod", promote(x1, x2))


def _to_float(x) -> Tensor:
    """An integer or bool tensor as float32 (torch's default float dtype), for the ops torch computes in float
    for integer input (exp, sqrt, sin, ...: torch.exp(int tensor) is float32); a float tensor as it is."""
    x = as_tensor(x)
    return x if x.dtype in ir.types.FLOAT_DTYPES else astype(x, "float32")


def _unary(op, public=None, floating=False):
    def fn(x) -> Tensor:
        return apply(op, [_to_float(x) if floating else as_tensor(x)])
    fn.__name__ = public or op
    fn.__doc__ = f"Elementwise {public or op}."
    return fn


negative, abs = _unary("negative"), _unary("abs")
exp, log, sqrt, rsqrt = (_unary(n, floating=True) for n in ("exp", "log", "sqrt", "rsqrt"))
sin, cos, tanh, sigmoid = (_unary(n, floating=True) for n in ("sin", "cos", "tanh", "sigmoid"))
relu, silu = _unary("nn.relu", "relu"), _unary("nn.silu", "silu")


def log_sigmoid(x) -> Tensor:
    """log(sigmoid(x)), finite and accurate for every logit (PyTorch's F.logsigmoid).

    >>> import tracer
    >>> [round(v, 3) for v in tracer.log_sigmoid(tracer.tensor([-200.0, 0.0])).numpy().tolist()]
    [-200.0, -0.693]
    """
    return apply("nn.log_sigmoid", [as_tensor(x)])


def gelu(x, approximate: str = "none") -> Tensor:
    """GELU, exact (erf) by default or its tanh approximation, as torch.nn.functional.gelu."""
    return apply("nn.gelu", [as_tensor(x)], approximate=approximate)


def where(condition, x1, x2) -> Tensor:
    """Elementwise `x1 if condition else x2`, broadcasting all three."""
    a, b = promote(x1, x2)
    return apply("where", [as_tensor(condition), a, b])


def stop_gradient(x) -> Tensor:
    """The same values, with no gradient flowing back through them."""
    return apply("grad.stop_gradient", [as_tensor(x)])


def _reflect(fn):
    return lambda self, other: fn(other, self)


def _comparison(fn, symbol):
    """== / != refuse None: an elementwise comparison with None has no meaning, and Python's fallback
    (identity) would silently give one bool for the whole tensor."""
    def operator(self, other):
        if other is None:
            raise TypeError(f"tensor {symbol} None: a Tensor cannot be compared with None; "
                            f"test `t is None` (or `is not None`) instead")
        return fn(self, other)
    return operator


OPERATORS = {name: _python_operator(fn, name) for name, fn in {
    "__add__": add, "__radd__": _reflect(add), "__sub__": subtract, "__rsub__": _reflect(subtract),
    "__mul__": multiply, "__rmul__": _reflect(multiply), "__truediv__": divide,
    "__rtruediv__": _reflect(divide), "__pow__": power, "__rpow__": _reflect(power),
    "__floordiv__": floor_divide, "__rfloordiv__": _reflect(floor_divide), "__mod__": remainder,
    "__rmod__": _reflect(remainder),
}.items()}
OPERATORS |= {
    "__neg__": negative, "__abs__": abs, "__lt__": less, "__le__": less_equal, "__gt__": greater,
    "__ge__": greater_equal, "__eq__": _comparison(equal, "=="), "__ne__": _comparison(not_equal, "!="),
}
METHODS = {
    "exp": exp, "log": log, "sqrt": sqrt, "rsqrt": rsqrt, "abs": abs, "sin": sin, "cos": cos, "tanh": tanh,
    "sigmoid": sigmoid, "relu": relu, "gelu": gelu, "silu": silu, "astype": astype, "maximum": maximum,
    "minimum": minimum, "pow": power, "floor_divide": floor_divide, "remainder": remainder,
}
