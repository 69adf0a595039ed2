"""Bitwise ops and operators, as torch's: `& | ^ ~ << >>` and bitwise_and/or/xor/not,
bitwise_left_shift/right_shift on integer and bool tensors (shifts: integer only).

Operands promote as other binary ops do (bool & int32 is int32, a bool tensor | a Python int is int64); a
floating operand is a TypeError naming the op, the same eagerly and inside a trace.

>>> import tracer
>>> m = tracer.tensor([True, False, True])
>>> (~m).numpy().tolist(), (m & tracer.tensor([True, True, False])).numpy().tolist()
([False, True, False], [True, False, False])
"""
from __future__ import annotations

from ir.types import INT_DTYPES

from .inplace import _checked_kind
from .math import _python_operator, _reflect, as_tensor, promote
from .tensor import Tensor, apply

_INTEGER = INT_DTYPES


def _check(name: str, dtype: str, shifts: bool) -> None:
    if dtype in _INTEGER or (dtype == "bool" and not shifts):
        return
    kinds = "integer" if shifts else "integer or bool"
    raise TypeError(f"{name}: expects {kinds} tensors, got dtype {dtype} (as torch, {name} is not defined for "
                    f"{dtype} tensors)")


def _binary(op: str, name: str, shifts: bool = False):
    def fn(input, other) -> Tensor:  # noqa: A002 (torch's names)
        a, b = promote(input, other)
        _check(name, a.dtype, shifts)
        return apply(op, [a, b])
    fn.__name__ = name
    fn.__doc__ = f"Elementwise {name} with broadcasting (IR op {op})."
    return fn


bitwise_and = _binary("bitwise_and", "bitwise_and")
bitwise_or = _binary("bitwise_or", "bitwise_or")
bitwise_xor = _binary("bitwise_xor", "bitwise_xor")
bitwise_left_shift = _binary("left_shift", "bitwise_left_shift", shifts=True)
bitwise_right_shift = _binary("right_shift", "bitwise_right_shift", shifts=True)
bitwise_left_shift.__doc__ += " Shifting by a negative count or the bit width or more gives 0, as torch's."
bitwise_right_shift.__doc__ += " Shifting by a negative count or the bit width or more gives the sign fill."


def bitwise_not(input) -> Tensor:  # noqa: A002
    """~input: each bit flipped (logical not for a bool tensor)."""
    x = as_tensor(input)
    _check("bitwise_not", x.dtype, False)
    return apply("bitwise_not", [x])


__all__ = ["bitwise_and", "bitwise_left_shift", "bitwise_not", "bitwise_or", "bitwise_right_shift", "bitwise_xor"]

_FUNCTIONS = {"and": bitwise_and, "or": bitwise_or, "xor": bitwise_xor, "lshift": bitwise_left_shift,
              "rshift": bitwise_right_shift}
OPERATORS = {"__invert__": bitwise_not}
for _short, _fn in _FUNCTIONS.items():
    OPERATORS[f"__{_short}__"] = _python_operator(_fn, f"__{_short}__")
    OPERATORS[f"__r{_short}__"] = _python_operator(_reflect(_fn), f"__r{_short}__")


def _inplace(fn, name: str):
    def method(self, other):
        return _checked_kind(self, fn(self, other), name)
    method.__name__ = name
    method.__doc__ = f"In-place {fn.__name__}, keeping self's object and dtype."
    return method


METHODS = {name: globals()[name] for name in __all__}
METHODS |= {f"{name}_": _inplace(fn, f"{name}_") for name, fn in list(METHODS.items()) if name != "bitwise_not"}
METHODS["bitwise_not_"] = lambda self: _checked_kind(self, bitwise_not(self), "bitwise_not_")
METHODS |= {f"__i{short}__": _inplace(fn, f"__i{short}__") for short, fn in _FUNCTIONS.items()}
