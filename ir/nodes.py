"""IR nodes: expressions, bindings, the one-dataflow-block Function and the IRModule.

Vars are compared by identity and named only when printed (the printer makes names unique), so
passes can create vars freely and golden text stays stable.
"""
from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

import numpy as np

from .types import IRError, TensorType, TupleType, Type

# The module printer (ir.printer.print_module), installed by ir.printer when it loads: printing depends on
# the nodes, not the other way round, so this module imports nothing of it.
_PRINTER: list = [lambda mod, show_source=False: f"<IRModule with {list(mod)}; import ir to print it>"]


class Expr:
    """Base of every IR expression; each carries its inferred `type`."""

    type: Type


@dataclass(frozen=True)
class Source:
    """Where a binding comes from: the user's file and line that made it, and its role.

    role is "forward" (a value the user's code computes), "gradient" (a backward value; file and
    line are those of the forward binding it differentiates) or "recompute" (a checkpointed forward
    value computed again for the backward pass). Locations are metadata: structural equality and the
    plain text form ignore them.

    >>> str(Source("/home/me/model.py", 23))
    'model.py:23'
    """

    file: str | None = None
    line: int | None = None
    role: str = "forward"

    @property
    def where(self) -> str:
        """The file's base name and the line: 'model.py:23' ('?' when unknown)."""
        return f"{os.path.basename(self.file)}:{self.line}" if self.file else "?"

    def __str__(self) -> str:
        return self.where if self.role == "forward" else f"{self.where} ({self.role})"


class Var(Expr):
    """A value; `loc` is the Source of the binding that defines it (None when unknown).

    The location lives on the var, not the Binding object, so every pass that rebuilds a binding
    around the same var (simplify, CSE, marker insertion) keeps it without knowing about it.
    """

    __slots__ = ("name", "type", "loc")

    def __init__(self, name: str, type: Type, loc: Source | None = None):
        self.name = name
        self.type = type
        self.loc = loc

    def __repr__(self) -> str:
        return f"Var({self.name}: {self.type})"


class Constant(Expr):
    """A constant array (its type read from the array's shape and dtype)."""

    __slots__ = ("data", "type")

    def __init__(self, data):
        data = np.asarray(data)
        self.data = data
        self.type = TensorType(data.shape, str(data.dtype))

    def __repr__(self) -> str:
        return f"Constant({self.data!r})"


class Call(Expr):
    """An op applied to arguments; build through `ir.make_call` so attrs and type are checked."""

    __slots__ = ("op", "args", "attrs", "type")

    def __init__(self, op: str, args: tuple[Expr, ...], attrs: dict, type: Type):
        self.op = op
        self.args = tuple(args)
        self.attrs = attrs
        self.type = type

    def __repr__(self) -> str:
        return f"Call({self.op}, {self.args}, {self.attrs})"


class Tuple(Expr):
    """A tuple of expressions, typed as a TupleType of their types."""

    __slots__ = ("fields", "type")

    def __init__(self, fields):
        self.fields = tuple(fields)
        self.type = TupleType(tuple(f.type for f in self.fields))


class TupleGetItem(Expr):
    """Field `index` of a tuple-typed expression."""

    __slots__ = ("tuple_value", "index", "type")

    def __init__(self, tuple_value: Expr, index: int):
        t = tuple_value.type
        if not isinstance(t, TupleType):
            raise IRError(f"TupleGetItem: indexing a value of type {t}, which is not a tuple")
        if not -len(t.fields) <= index < len(t.fields):
            raise IRError(f"TupleGetItem: index {index} out of range for a tuple of {len(t.fields)} fields")
        self.tuple_value = tuple_value
        self.index = index % len(t.fields)
        self.type = t.fields[self.index]


@dataclass
class Binding:
    var: Var
    value: Expr

    @property
    def loc(self) -> Source | None:
        """The Source of this binding (stored on its var)."""
        return self.var.loc


def role_of(var: Var) -> str:
    """The role of the binding defining var: "forward" (also when it has no Source), "gradient" or "recompute"."""
    return var.loc.role if var.loc is not None else "forward"


def mark_derived(bindings: Iterable[Binding], origin: Var | None, role: str) -> None:
    """Give every binding without a Source the location of `origin` under `role`: a pass that emits
    bindings on behalf of a forward binding (its gradient, its recomputation) points them at that
    binding's user line."""
    loc = origin.loc if origin is not None else None
    source = Source(loc.file if loc else None, loc.line if loc else None, role)
    for b in bindings:
        if b.var.loc is None:
            b.var.loc = source


@dataclass
class Block:
    """A binding block; tracegrad functions have exactly one, and it is a dataflow block."""

    bindings: list[Binding]
    is_dataflow: bool = True


@dataclass
class Function:
    params: list[Var]
    blocks: list[Block]
    body: Expr
    attrs: dict = field(default_factory=dict)

    @property
    def ret_type(self) -> Type:
        return self.body.type

    @property
    def bindings(self) -> list[Binding]:
        """The bindings of the single dataflow block (IRError if there is not exactly one)."""
        if len(self.blocks) != 1 or not self.blocks[0].is_dataflow:
            kinds = [("dataflow" if b.is_dataflow else "plain") for b in self.blocks]
            raise IRError(f"function must have exactly one dataflow block, found {len(self.blocks)} {kinds}")
        return self.blocks[0].bindings


class IRModule(Mapping):
    """An immutable mapping from function names to Functions."""

    def __init__(self, functions: Mapping[str, Function] | None = None):
        self._functions = dict(functions or {})

    def __getitem__(self, name: str) -> Function:
        try:
            return self._functions[name]
        except KeyError:
            raise KeyError(f"no function named {name!r} in the module (it has {list(self._functions)})") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._functions)

    def __len__(self) -> int:
        return len(self._functions)

    def with_function(self, name: str, fn: Function) -> IRModule:
        return IRModule({**self._functions, name: fn})

    def script(self, show_source: bool = False) -> str:
        """The TVMScript text (as str(mod)); show_source=True ends each binding with a
        `# file.py:LINE` comment naming the user line it comes from (the parser ignores comments)."""
        return _PRINTER[0](self, show_source=show_source)

    def __str__(self) -> str:
        return _PRINTER[0](self)

    __repr__ = __str__


def free_vars(expr: Expr) -> Iterator[Var]:
    """The vars an expression reads directly."""
    if isinstance(expr, Var):
        yield expr
    elif isinstance(expr, Call):
        for a in expr.args:  # arguments are atoms: vars directly, tuples and items rarely
            if isinstance(a, Var):
                yield a
            elif not isinstance(a, Constant):
                yield from free_vars(a)
    elif isinstance(expr, Tuple):
        for f in expr.fields:
            yield from free_vars(f)
    elif isinstance(expr, TupleGetItem):
        yield from free_vars(expr.tuple_value)


def substitute(expr: Expr, mapping: Mapping[Var, Expr]) -> Expr:
    """expr with vars replaced; types are kept (mapping must preserve types). Expressions are never
    mutated, so a part that no replacement touches is returned as it is, not copied."""
    if not mapping:
        return expr
    if isinstance(expr, Var):
        return mapping.get(expr, expr)
    if isinstance(expr, Call):
        args = expr.args
        new = None
        for i, a in enumerate(args):
            if isinstance(a, Var):
                r = mapping.get(a, a)
            elif isinstance(a, Constant):
                continue
            else:
                r = substitute(a, mapping)
            if r is not a:
                if new is None:
                    new = list(args)
                new[i] = r
        return expr if new is None else Call(expr.op, tuple(new), expr.attrs, expr.type)
    if isinstance(expr, Tuple):
        fields = expr.fields
        new = [substitute(f, mapping) for f in fields]
        return expr if all(n is f for n, f in zip(new, fields, strict=True)) else Tuple(new)
    if isinstance(expr, TupleGetItem):
        inner = substitute(expr.tuple_value, mapping)
        return expr if inner is expr.tuple_value else TupleGetItem(inner, expr.index)
    return expr
