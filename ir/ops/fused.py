"""`fused`: a chain of elementwise ops evaluated as one op, without full-size intermediate arrays.

The op takes one tuple of tensors and an attribute `expr`, the chain as a nested call in the ops'
own names: inputs are `x0, x1, ...`, scalar constants `const(0.5, "float32")`, attributes keywords:

    R.fused((x, y), expr='multiply(nn.relu(x0), add(x1, const(1.0, "float32")))')

Each sub-op keeps its own inference (so errors name it) and its own kernel. This module is the op as
IR: the expression's grammar, its inference, and the reference kernel (the chain op by op at full
size, the value every faster path equals). The runtime (`ir.runtime.fused_cpu`, `ir.runtime.fused_cuda`)
installs the kernels that run a chain without full-size temporaries. `ir.transform.FuseElementwise`
makes these bindings; `ir.transform.Unfuse` expands them again (the Gradient pass does, so a fused
module differentiates).
"""
from __future__ import annotations

import ast
import functools
import math

import numpy as np

from ..types import IRError, TensorType
from .registry import Attr, declare, get_op, normalize_attrs


class Node:
    """One sub-op of a fused chain: `op(*args, **attrs)`; args are Nodes, Leaf or Const."""

    __slots__ = ("op", "args", "attrs")

    def __init__(self, op: str, args: tuple, attrs: dict):
        self.op, self.args, self.attrs = op, tuple(args), dict(attrs)

    def text(self) -> str:
        parts = [a.text() for a in self.args] + [f"{k}={v!r}" for k, v in self.attrs.items()]
        return f"{self.op}({', '.join(parts)})"


class Leaf:
    """Input k of the fused op (`xk`)."""

    __slots__ = ("index",)

    def __init__(self, index: int):
        self.index = index

    def text(self) -> str:
        return f"x{self.index}"


class Const:
    """A scalar constant with its dtype."""

    __slots__ = ("value", "dtype")

    def __init__(self, value, dtype: str):
        self.value, self.dtype = value, dtype

    def text(self) -> str:
        v = self.value
        if isinstance(v, float) and not math.isfinite(v):
            v = repr(str(v))  # 'inf', '-inf', 'nan': read back through float()
            return f"const(float({v}), {self.dtype!r})"
        return f"const({v!r}, {self.dtype!r})"

    def array(self):
        return np.asarray(self.value, dtype=self.dtype)


def expr_text(node) -> str:
    """The `expr` attribute of a chain.

    >>> expr_text(Node("add", (Leaf(0), Const(1.0, "float32")), {}))
    "add(x0, const(1.0, 'float32'))"
    """
    return node.text()


@functools.lru_cache(maxsize=4096)
def parse_expr(text: str):
    """The chain of an `expr` attribute; IRError naming `fused` when it is not one."""
    try:
        tree = ast.parse(text, mode="eval").body
    except SyntaxError as e:
        raise IRError(f"fused: attribute expr is not an expression: {text!r} ({e.msg})") from None
    return _node(tree, text)


def _name(node) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _name(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None


def _literal(node, text):
    try:
        if isinstance(node, ast.Call) and _name(node.func) == "float" and len(node.args) == 1:
            return float(ast.literal_eval(node.args[0]))
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError):
        raise IRError(f"fused: expected a literal in expr, got {ast.unparse(node)!r} in {text!r}") from None


def _node(node, text):
    if isinstance(node, ast.Name) and node.id[:1] == "x" and node.id[1:].isdigit():
        return Leaf(int(node.id[1:]))
    if not isinstance(node, ast.Call) or _name(node.func) is None:
        raise IRError(f"fused: expected an op call, an input xK or const(...) in expr, got "
                      f"{ast.unparse(node)!r} in {text!r}")
    name = _name(node.func)
    if name == "const":
        if len(node.args) != 2 or node.keywords:
            raise IRError(f"fused: expected const(value, dtype) in expr {text!r}")
        return Const(_literal(node.args[0], text), _literal(node.args[1], text))
    op = get_op(name)
    if op.tuple_input or len(node.args) != len(op.inputs):
        raise IRError(f"fused: {name} in expr takes {len(op.inputs)} argument(s), got {len(node.args)}")
    attrs = normalize_attrs(op, {k.arg: _literal(k.value, text) for k in node.keywords})
    return Node(name, tuple(_node(a, text) for a in node.args), attrs)


def _types(node, types):
    if isinstance(node, Leaf):
        if node.index >= len(types):
            raise IRError(f"fused: expr reads x{node.index} but the op has {len(types)} input(s)")
        return types[node.index]
    if isinstance(node, Const):
        return TensorType((), node.dtype)
    op = get_op(node.op)
    return op.infer(op, [_types(a, types) for a in node.args], **node.attrs)


def _infer(op, types, expr):
    for i, t in enumerate(types):
        if not isinstance(t, TensorType):
            raise op.error(f"input x{i} must be a tensor, got {t}")
    if not isinstance(parse_expr(expr), Node):
        raise op.error(f"expr must apply at least one op to the inputs, got {expr!r}")
    return _infer_cached(expr, tuple(types))


@functools.lru_cache(maxsize=8192)
def _infer_cached(expr: str, types: tuple):
    # a compiled step infers each fused binding several times (pass, verifier, parser): once per signature
    return _types(parse_expr(expr), list(types))


# ---------------------------------------------------------------- evaluation


def _evaluate(xp, node, xs):
    if isinstance(node, Leaf):
        return xs[node.index]
    if isinstance(node, Const):
        return node.array()
    return get_op(node.op).kernel(xp, *[_evaluate(xp, a, xs) for a in node.args], **node.attrs)


def evaluate_unfused(xp, expr: str, xs):
    """The chain op by op through each op's kernel, at full size (the reference the fused paths equal)."""
    return xp.asarray(_evaluate(xp, parse_expr(expr), list(xs)))


def _reference_kernel(xp, xs, expr):
    out = evaluate_unfused(xp, expr, xs)
    # a buffer of its own (as ir.runtime.reuse's FRESH ops), never (a view of) an input
    return out.copy() if xp is np and any(np.may_share_memory(out, x) for x in xs) else out


declare("fused", ("*tensors",), (Attr("expr", "str"),), infer=_infer, kernel=_reference_kernel,
        differentiable=False, doc="A chain of elementwise ops evaluated as one (made by ir.transform.FuseElementwise).")
