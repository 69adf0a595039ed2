"""Elementwise functions and the arithmetic operators, with NumPy-style dtype promotion."""
from __future__ import annotations

import numpy as np

from .tensor import Tensor, apply


def as_tensor(x, like: Tensor | None = None) -> Tensor:
    if isinstance(x, Tensor):
        return x
    return Tensor(x)


def promote(*values) -> list[Tensor]:
    """Tensors of one dtype: Python scalars take the tensors' dtype (a float scalar makes an integer
    tensor float32, as PyTorch does); tensors of different dtypes promote as NumPy does, by astype."""
    tensors = [v for v in values if isinstance(v, Tensor)]
    if not tensors:
        return [Tensor(v) for v in values]
    dtype = np.result_type(*[t.dtype for t in tensors])
    if dtype.kind in "biu" and any(isinstance(v, float) for v in values):
        dtype = np.dtype("float32")
    elif dtype.kind == "b" and any(isinstance(v, int) and not isinstance(v, bool) for v in values):
        dtype = np.dtype("int64")
    dtype = str(dtype)
    out = []
    for v in values:
        if isinstance(v, Tensor):
            out.append(v if v.dtype == dtype else astype(v, dtype))
        elif isinstance(v, (bool, int, float, np.number, np.bool_)):
            out.append(Tensor(np.asarray(v, dtype=dtype)))
        else:
            t = Tensor(v)
            out.append(t if t.dtype == dtype else astype(t, dtype))
    return out


def astype(x, dtype: str) -> Tensor:
    x = as_tensor(x)
    return x if x.dtype == dtype else apply("astype", [x], dtype=dtype)


def _binary(op):
    def fn(x1, x2) -> Tensor:
        return apply(op, promote(x1, x2))
    fn.__name__ = op
    fn.__doc__ = f"Elementwise {op} with broadcasting."
    return fn


add, subtract, multiply, divide = (_binary(n) for n in ("add", "subtract", "multiply", "divide"))
maximum, minimum, power = (_binary(n) for n in ("maximum", "minimum", "power"))
less, less_equal, greater = (_binary(n) for n in ("less", "less_equal", "greater"))
greater_equal, equal, not_equal = (_binary(n) for n in ("greater_equal", "equal", "not_equal"))


def _unary(op, public=None):
    def fn(x) -> Tensor:
        return apply(op, [as_tensor(x)])
    fn.__name__ = public or op
    fn.__doc__ = f"Elementwise {public or op}."
    return fn


negative, abs, exp, log, sqrt, rsqrt = (_unary(n) for n in ("negative", "abs", "exp", "log", "sqrt", "rsqrt"))
sin, cos, tanh, sigmoid = (_unary(n) for n in ("sin", "cos", "tanh", "sigmoid"))
relu, silu = _unary("nn.relu", "relu"), _unary("nn.silu", "silu")


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


OPERATORS = {
    "__add__": add, "__radd__": _reflect(add), "__sub__": subtract, "__rsub__": _reflect(subtract),
    "__mul__": multiply, "__rmul__": _reflect(multiply), "__truediv__": divide,
    "__rtruediv__": _reflect(divide), "__pow__": power, "__rpow__": _reflect(power),
    "__neg__": negative, "__abs__": abs, "__lt__": less, "__le__": less_equal, "__gt__": greater,
    "__ge__": greater_equal, "__eq__": equal, "__ne__": not_equal,
}
METHODS = {
    "exp": exp, "log": log, "sqrt": sqrt, "rsqrt": rsqrt, "abs": abs, "sin": sin, "cos": cos, "tanh": tanh,
    "sigmoid": sigmoid, "relu": relu, "gelu": gelu, "silu": silu, "astype": astype, "maximum": maximum,
    "minimum": minimum, "pow": power,
}
