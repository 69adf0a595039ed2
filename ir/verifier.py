"""The verifier: checks that a module is well formed before passes or the executor rely on it.

It checks SSA (every var defined once, before use), that each binding's type agrees with running
inference again, that every function has exactly one dataflow block, and that arguments are atomic
(vars, constants, tuples of them), which is what the executor and the passes expect.

A compiled step (autodiff.value_and_grad and its kin) verifies its optimized module only when `wanted()`:
TRACEGRAD_VERIFY=1 in the environment (the test suite sets it), since on a GPT step verifying cost as
much as a third of the passes. `verify` itself always checks.
"""
from __future__ import annotations

import os

import numpy as np

from .nodes import Binding, Call, Constant, Expr, Function, IRModule, Tuple, TupleGetItem, Var
from .ops.registry import make_call
from .printer import print_expr
from .structural import attrs_equal, attrs_key
from .transform.base import paused_gc
from .types import IRError, TensorType, TupleType


def wanted() -> bool:
    """Whether compiled steps verify the module they built: TRACEGRAD_VERIFY set (not "", "0", "false",
    "no" or "off"), read on each compile. Off by default; tests/conftest.py turns it on."""
    return os.environ.get("TRACEGRAD_VERIFY", "").strip().lower() not in ("", "0", "false", "no", "off")


def verify(mod: IRModule) -> None:
    """Raise IRError naming the function and binding when `mod` is malformed; return None otherwise.

    >>> import tracer
    >>> verify(tracer.trace(lambda x: tracer.exp(x), tracer.spec((2,))))
    """
    if not isinstance(mod, IRModule):
        raise TypeError(f"verify expects an ir.IRModule, got {type(mod).__name__}")
    inferred: dict = {}  # one inference per distinct (op, argument types, attributes), shared by the functions
    with paused_gc():
        for name, fn in mod.items():
            if not isinstance(fn, Function):
                raise IRError(f"verify: {name} is a {type(fn).__name__}, not an ir.Function")
            _FunctionChecker(name, inferred).check(fn)


class _Names:
    """Prints vars by their own name hints, for error messages."""

    def __getitem__(self, var: Var) -> str:
        return var.name


def _is_type(t) -> bool:
    return isinstance(t, TensorType) or isinstance(t, TupleType) and all(_is_type(f) for f in t.fields)


def _text(e: Expr) -> str:
    try:
        return print_expr(e, _Names())
    except Exception:  # an unknown op cannot be printed; the message still needs something readable
        return repr(e)


class _FunctionChecker:
    def __init__(self, name: str, inferred: dict):
        self.name = name
        self.inferred = inferred
        self.defined: set[Var] = set()
        self.at: tuple | None = None  # (index, binding) or ("return", body): printed only on failure

    def fail(self, message: str) -> IRError:
        return IRError(f"verify: function {self.name}{self._where()}: {message}")

    def _where(self) -> str:
        if self.at is None:
            return ""
        if self.at[0] == "return":
            return f", return value ({_text(self.at[1])})"
        i, b = self.at
        return f", binding {i} ({b.var.name} = {_text(b.value)})"

    def check(self, fn: Function) -> None:
        kinds = [("dataflow" if b.is_dataflow else "plain") for b in fn.blocks]
        if kinds != ["dataflow"]:
            raise self.fail(f"must have exactly one dataflow block, found {len(kinds)} {kinds}")
        for p in fn.params:
            if not isinstance(p, Var):
                raise self.fail(f"parameter {p!r} is not a Var")
            if p in self.defined:
                raise self.fail(f"parameter {p.name} appears twice")
            if not _is_type(p.type):
                raise self.fail(f"parameter {p.name} has type {p.type!r}, not an R.Tensor or R.Tuple of them")
            self.defined.add(p)
        for i, b in enumerate(fn.blocks[0].bindings):
            if not isinstance(b, Binding):
                raise self.fail(f"binding {i} is a {type(b).__name__}, not an ir.Binding")
            self.at = (i, b)
            self.binding(b.var, b.value)
        self.at = ("return", fn.body)
        self.atom(fn.body, allow_item=True)

    def binding(self, var: Var, value: Expr) -> None:
        if not isinstance(var, Var):
            raise self.fail(f"the bound target {var!r} is not a Var")
        if isinstance(value, Call):
            for a in value.args:
                self.atom(a, allow_item=True)
            # Inference reads only the op, the argument types and the attributes: a deep model repeats the
            # same few calls layer after layer, and the adjoint repeats the forward, so each is inferred once.
            key = (value.op, tuple(a.type for a in value.args), attrs_key(value.attrs))
            known = self.inferred.get(key)
            if known is None:
                try:
                    again = make_call(value.op, value.args, value.attrs)
                except (IRError, TypeError) as e:
                    raise self.fail(f"inference rejects the call: {e}") from None
                known = self.inferred[key] = (again.type, attrs_equal(again.attrs, value.attrs), again.attrs)
            inferred_type, normalized, expected = known
            if inferred_type != value.type:
                raise self.fail(f"the call carries type {value.type}, inference says {inferred_type}")
            if not normalized:
                raise self.fail(f"attributes {value.attrs} are not normalized (expected {expected}); "
                                "build calls with ir.make_call")
        else:  # a tuple field may appear anywhere an argument may, nested too (`lv[0][1]`), as in TVMScript
            self.atom(value, allow_item=True)
        if var.type != value.type:
            raise self.fail(f"{var.name} is declared {var.type}, its value has type {value.type}")
        if var in self.defined:
            raise self.fail(f"{var.name} is bound twice (or is a parameter)")
        self.defined.add(var)

    def atom(self, e: Expr, allow_item: bool) -> None:
        """Vars (defined), constants, tuples of these; tuple items where not a call's argument."""
        if isinstance(e, Var):
            if e not in self.defined:
                raise self.fail(f"{e.name} is used but not defined before this point")
        elif isinstance(e, Constant):
            data = e.data
            if not isinstance(data, np.ndarray):
                raise self.fail(f"constant of type {e.type} holds a {type(data).__name__}, not a NumPy array")
            if (data.shape, str(data.dtype)) != (e.type.shape, e.type.dtype):
                raise self.fail(f"constant of type {e.type} holds data of shape {data.shape}, dtype {data.dtype}")
        elif isinstance(e, Tuple):
            for f in e.fields:
                self.atom(f, allow_item)
            if e.type != TupleType(tuple(f.type for f in e.fields)):
                raise self.fail(f"tuple carries type {e.type}, its fields say {[str(f.type) for f in e.fields]}")
        elif isinstance(e, TupleGetItem) and allow_item:
            self.item(e, allow_item)
        elif isinstance(e, Call | TupleGetItem):
            raise self.fail(f"argument {_text(e)} is not atomic; bind it to a variable first")
        else:
            raise self.fail(f"{e!r} is not an IR expression")

    def item(self, e: TupleGetItem, allow_item: bool) -> None:
        self.atom(e.tuple_value, allow_item)
        t = e.tuple_value.type
        if not isinstance(t, TupleType) or not 0 <= e.index < len(t.fields):
            raise self.fail(f"index {e.index} is out of range for a value of type {t}")
        if e.type != t.fields[e.index]:
            raise self.fail(f"tuple item carries type {e.type}, field {e.index} has type {t.fields[e.index]}")
