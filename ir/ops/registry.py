"""The op registry: each op is declared once with its inputs, attributes, inference and kernel.

A kernel is written once against an array module `xp` (numpy or cupy): `kernel(xp, *arrays,
**attrs)`. Inference maps argument types and normalized attributes to the result type and raises
IRError naming the op, the argument and the shapes when the arguments do not fit.
"""
from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ..nodes import Call, Expr
from ..types import IRError, TensorType, TupleType, Type, check_dtype

REQUIRED = object()

# Attribute kinds and how a value of each kind is normalized.
# "number" keeps an int an int (a fill value of 2**62 + 1 must not round through float64).
# "sections" is Relax's indices_or_sections: an int stays an int (a number of sections), a list is indices.
ATTR_KINDS = ("int", "float", "number", "bool", "str", "dtype", "shape", "ints", "axes", "opt_int", "seed",
              "sections")


@dataclass(frozen=True)
class Attr:
    name: str
    kind: str
    default: Any = REQUIRED


@dataclass(frozen=True)
class Op:
    name: str
    inputs: tuple[str, ...]
    attrs: tuple[Attr, ...]
    infer: Callable[..., Type]
    kernel: Callable[..., Any]
    differentiable: bool = True
    doc: str = ""
    # Relax attributes that tracegrad fixes to one behaviour: name -> the values the parser accepts
    # (e.g. conv2d's data_layout="NCHW"); the printer omits them, as they are Relax's defaults.
    fixed: dict = field(default_factory=dict)

    def error(self, message: str) -> IRError:
        return IRError(f"{self.name}: {message}")

    @property
    def tuple_input(self) -> bool:
        """True when the op takes one tuple of tensors (concat, stack)."""
        return len(self.inputs) == 1 and self.inputs[0].startswith("*")


OPS: dict[str, Op] = {}


def declare(name: str, inputs=("x",), attrs=(), *, infer, kernel, differentiable=True, doc="", fixed=None) -> Op:
    """Register an op; every op of tracegrad goes through here exactly once."""
    if name in OPS:
        raise IRError(f"op {name!r} declared twice")
    for a in attrs:
        assert a.kind in ATTR_KINDS, (name, a)
    op = Op(name, tuple(inputs), tuple(attrs), infer, kernel, differentiable, doc, dict(fixed or {}))
    OPS[name] = op
    return op


def provide_kernel(name: str, kernel) -> None:
    """Install a faster kernel for an op declared with a reference one (the runtime's fused chains).

    The op's signature, inference and meaning stay as declared; bindings name ops by name, so every
    later call uses the new kernel."""
    OPS[name] = replace(get_op(name), kernel=kernel)


def get_op(name: str) -> Op:
    """The declared op called `name` (as printed, without "R."); an IRError naming it otherwise."""
    try:
        return OPS[name]
    except KeyError:
        raise IRError(f"unknown op {name!r}") from None


def _integer(value) -> int:
    """An int from an int or NumPy integer; floats (which would truncate) and bools are refused."""
    if isinstance(value, bool | np.bool_):
        raise TypeError
    return operator.index(value)


def normalize_attr(op: Op, attr: Attr, value: Any) -> Any:
    kind = attr.kind
    try:
        if kind == "int":
            return _integer(value)
        if kind == "float":
            if isinstance(value, str):
                raise TypeError
            return float(value)
        if kind == "number":
            if isinstance(value, float | np.floating):
                return float(value)
            return int(value) if isinstance(value, bool | np.bool_) else _integer(value)
        if kind == "bool":
            if not isinstance(value, bool):
                raise TypeError
            return value
        if kind == "str":
            if not isinstance(value, str):
                raise TypeError
            return value
        if kind == "dtype":
            return check_dtype(value, f"{op.name}: attribute {attr.name}")
        if kind in ("shape", "ints", "axes"):
            if value is None and kind == "axes":
                return None
            if isinstance(value, int | np.integer):
                value = (value,)
            return tuple(_integer(v) for v in value)
        if kind == "sections":
            return _integer(value) if isinstance(value, int | np.integer) else tuple(_integer(v) for v in value)
        if kind == "opt_int":
            return None if value is None else _integer(value)
        if kind == "seed":
            return value
    except (TypeError, ValueError):
        pass
    raise TypeError(f"{op.name}: attribute {attr.name} expects {kind}, got {value!r}")


def normalize_attrs(op: Op, attrs: dict) -> dict:
    unknown = set(attrs) - {a.name for a in op.attrs}
    if unknown:
        raise TypeError(f"{op.name}: unknown attribute(s) {sorted(unknown)}; it takes {[a.name for a in op.attrs]}")
    out = {}
    for a in op.attrs:
        if a.name in attrs:
            out[a.name] = normalize_attr(op, a, attrs[a.name])
        elif a.default is REQUIRED:
            raise TypeError(f"{op.name}: missing attribute {a.name}")
        else:
            out[a.name] = a.default
    return out


def make_call(name: str, args, attrs: dict | None = None) -> Call:
    """Build a Call with normalized attributes and its inferred type."""
    op = get_op(name)
    args = tuple(args)
    if op.tuple_input:
        if len(args) != 1 or not isinstance(args[0].type, TupleType):
            raise op.error(f"expects one tuple of tensors as argument {op.inputs[0][1:]}")
    elif len(args) != len(op.inputs):
        raise op.error(f"expects {len(op.inputs)} argument(s) {op.inputs}, got {len(args)}")
    for arg in args:
        if not isinstance(arg, Expr):
            raise TypeError(f"{op.name}: argument {arg!r} is not an IR expression")
    attrs = normalize_attrs(op, dict(attrs or {}))
    arg_types = list(args[0].type.fields) if op.tuple_input else [a.type for a in args]
    return Call(name, args, attrs, op.infer(op, arg_types, **attrs))


def tensor_arg(op: Op, types: list[Type], i: int) -> TensorType:
    t = types[i]
    if not isinstance(t, TensorType):
        raise op.error(f"argument {op.inputs[min(i, len(op.inputs) - 1)]} must be a tensor, got {t}")
    return t

