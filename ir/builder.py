"""The one builder through which the tracer, the VJP rules and the passes produce IR."""
from __future__ import annotations

import numpy as np

from .nodes import Binding, Block, Call, Constant, Expr, Function, Tuple, TupleGetItem, Var
from .ops.registry import make_call
from .structural import attrs_key
from .types import TensorType, Type

# (op, argument types, attrs_key) -> (normalized attributes, result type) of calls already built
_INFERRED: dict[tuple, tuple] = {}
_INFERRED_MAX = 4096


class Builder:
    """Appends typed SSA bindings to one dataflow block.

    `locate`, when given, is called for every emitted binding, and the `ir.Source` it returns is
    stored on the new var (the tracer passes one that finds the user's line).

    >>> from ir import Builder, TensorType, Var
    >>> x = Var("x", TensorType((2, 3)))
    >>> b = Builder()
    >>> y = b.call("sum", b.call("exp", x), axis=None)
    >>> y.type
    TensorType(shape=(), dtype='float32')
    """

    def __init__(self, locate=None):
        self.bindings: list[Binding] = []
        self.locate = locate  # () -> Source | None: where each emitted binding comes from (the tracer's hook)

    def emit(self, value: Expr, name: str = "lv") -> Var:
        var = Var(name, value.type, self.locate() if self.locate is not None else None)
        self.bindings.append(Binding(var, value))
        return var

    def call(self, op: str, *args, name: str = "lv", **attrs) -> Var:
        """Emit `op(*args, **attrs)`; list/tuple arguments become tuple expressions."""
        args = [as_expr(a) for a in args]
        # make_call's checks and inference read only the op, the argument types and the attributes: the
        # VJP rules emit the same few calls layer after layer, so each distinct one is inferred once
        key = (op, tuple([a.type for a in args]), attrs_key(attrs))
        known = _INFERRED.get(key)
        if known is None:
            call = make_call(op, args, attrs)
            if len(_INFERRED) >= _INFERRED_MAX:
                _INFERRED.clear()
            _INFERRED[key] = (call.attrs, call.type)
        else:
            call = Call(op, tuple(args), dict(known[0]), known[1])
        return self.emit(call, name)

    def tuple(self, fields, name: str = "lv") -> Var:
        return self.emit(Tuple(fields), name)

    def get_item(self, value: Expr, index: int, name: str = "lv") -> Var:
        return self.emit(TupleGetItem(value, index), name)

    def zeros(self, type: Type, name: str = "lv") -> Expr:
        """Zeros of a tensor type, or a tuple of zeros for a tuple type."""
        if isinstance(type, TensorType):
            return self.call("zeros", shape=type.shape, dtype=type.dtype, name=name)
        return self.tuple([self.zeros(f, name) for f in type.fields], name)

    def function(self, params: list[Var], body: Expr, attrs: dict | None = None) -> Function:
        return Function(list(params), [Block(self.bindings)], body, dict(attrs or {}))


def const(value, dtype: str = "float32") -> Constant:
    """A Constant holding `value` as an array of `dtype`."""
    return Constant(np.asarray(value, dtype=dtype))


def as_expr(value) -> Expr:
    """`value` as an IR expression: an Expr as it is, a list or tuple as an ir.Tuple (wrap numbers with const)."""
    if isinstance(value, Expr):
        return value
    if isinstance(value, (list, tuple)):
        return Tuple(as_expr(v) for v in value)
    raise TypeError(f"cannot use {value!r} as an IR expression; wrap constants with ir.const")

