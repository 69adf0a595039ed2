"""Structural equality: same program up to the names of variables.

Vars are matched as a bijection fixed where each is defined (parameters by position, then bindings
in order); a var met before any definition (free in a bare expression) is paired on first use.
Function attrs are not compared: the printer does not write them, and parse(str(mod)) must equal mod.
"""
from __future__ import annotations

import math

import numpy as np

from .nodes import Binding, Block, Call, Constant, Expr, Function, IRModule, Tuple, TupleGetItem, Var


def structural_equal(a, b) -> bool:
    """True when a and b (two IRModules, two Functions or two Exprs) differ at most in var names.

    >>> from ir import TensorType, Var, make_call
    >>> x, y = Var("x", TensorType((2,))), Var("y", TensorType((2,)))
    >>> structural_equal(make_call("exp", [x]), make_call("exp", [y]))
    True
    >>> structural_equal(make_call("exp", [x]), make_call("log", [x]))
    False
    """
    return _Matcher().equal(a, b)


class _Matcher:
    def __init__(self):
        self.fwd: dict[Var, Var] = {}
        self.back: dict[Var, Var] = {}

    def equal(self, a, b) -> bool:
        if isinstance(a, IRModule) and isinstance(b, IRModule):
            return set(a) == set(b) and all(_Matcher().function(a[k], b[k]) for k in a)
        if isinstance(a, Function) and isinstance(b, Function):
            return self.function(a, b)
        if isinstance(a, Expr) and isinstance(b, Expr):
            return self.expr(a, b)
        return False

    def define(self, a: Var, b: Var) -> bool:
        if a.type != b.type or a in self.fwd or b in self.back:
            return False
        self.fwd[a], self.back[b] = b, a
        return True

    def function(self, a: Function, b: Function) -> bool:
        if len(a.params) != len(b.params) or len(a.blocks) != len(b.blocks):
            return False
        if not all(self.define(p, q) for p, q in zip(a.params, b.params, strict=True)):
            return False
        return all(self.block(x, y) for x, y in zip(a.blocks, b.blocks, strict=True)) and self.expr(a.body, b.body)

    def block(self, a: Block, b: Block) -> bool:
        if a.is_dataflow != b.is_dataflow or len(a.bindings) != len(b.bindings):
            return False
        return all(self.binding(x, y) for x, y in zip(a.bindings, b.bindings, strict=True))

    def binding(self, a: Binding, b: Binding) -> bool:
        return self.expr(a.value, b.value) and self.define(a.var, b.var)

    def expr(self, a: Expr, b: Expr) -> bool:
        if type(a) is not type(b) or a.type != b.type:
            return False
        if isinstance(a, Var):
            if a in self.fwd or b in self.back:
                return self.fwd.get(a) is b
            return self.define(a, b)
        if isinstance(a, Constant):
            return _array_equal(a.data, b.data)
        if isinstance(a, Call):
            return (a.op == b.op and len(a.args) == len(b.args) and attrs_equal(a.attrs, b.attrs)
                    and all(self.expr(x, y) for x, y in zip(a.args, b.args, strict=True)))
        if isinstance(a, Tuple):
            return len(a.fields) == len(b.fields) and all(
                self.expr(x, y) for x, y in zip(a.fields, b.fields, strict=True))
        if isinstance(a, TupleGetItem):
            return a.index == b.index and self.expr(a.tuple_value, b.tuple_value)
        return a is b


def _array_equal(a: np.ndarray, b: np.ndarray) -> bool:
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype.kind != "f":
        return bool(np.array_equal(a, b))
    # NaN equals NaN (whatever its sign bit); -0.0 and 0.0 differ (1 / x tells them apart)
    if not np.array_equal(a, b, equal_nan=True):
        return False
    zero = a == 0
    return bool(np.array_equal(np.signbit(a[zero]), np.signbit(b[zero])))


def attrs_equal(a, b) -> bool:
    """Attribute values equal in kind and value; NaN equals NaN, -0.0 does not equal 0.0 nor True 1."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(attrs_equal(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return type(a) is type(b) and len(a) == len(b) and all(attrs_equal(x, y) for x, y in zip(a, b, strict=True))
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return math.isnan(b) if math.isnan(a) else a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    return a == b


def attrs_key(attrs: dict) -> tuple:
    """A hashable key of a call's attributes, equal only for values of the same kinds and spellings
    (True is not 1, -0.0 is not 0.0, a tuple is not a list, keys in the same order): calls of one op on
    the same argument types with equal keys normalize and infer alike, so inference can be done once.

    >>> attrs_key({"axis": (1,), "keepdims": True}) == attrs_key({"axis": [1], "keepdims": True})
    False
    """
    return tuple([(k, _value_key(v)) for k, v in attrs.items()]) if attrs else ()


def _value_key(v):
    if isinstance(v, list | tuple):
        return type(v), tuple([_value_key(x) for x in v])
    return type(v), repr(v)
