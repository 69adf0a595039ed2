"""torch's in-place forms of the elementwise and triangular ops tracegrad computes elsewhere: `x.exp_()`,
`x.triu_(1)`, `x.masked_fill_(mask, v)`, ... Each computes the op out of place and writes the result into x
(tracer/inplace.py's write: eagerly the same buffer, inside a trace a rebinding), so it keeps x's object and
dtype, and, as torch, refuses a result of a higher kind (`int_tensor.exp_()`: exp gives float)."""
from __future__ import annotations

from . import math as _m
from . import shape as _shape
from .inplace import _checked_kind


def _inplace(fn, name: str):
    def method(self, *args, **kwargs):
        return _checked_kind(self, fn(self, *args, **kwargs), name)
    method.__name__ = name
    method.__doc__ = f"In-place {name[:-1]}: self = {name[:-1]}(self, ...), keeping self's object and dtype."
    return method


def _masked_fill(self, mask, value):
    from .torch_methods import masked_fill  # torch_methods installs masked_fill; imported late (no cycle)
    return masked_fill(self, mask, value)


_OPS = {"abs": _m.abs, "neg": _m.negative, "negative": _m.negative, "exp": _m.exp, "log": _m.log, "sqrt": _m.sqrt,
        "rsqrt": _m.rsqrt, "sin": _m.sin, "cos": _m.cos, "tanh": _m.tanh, "sigmoid": _m.sigmoid, "relu": _m.relu,
        "triu": _shape.triu, "tril": _shape.tril, "masked_fill": _masked_fill}
METHODS = {f"{name}_": _inplace(fn, f"{name}_") for name, fn in _OPS.items()}
