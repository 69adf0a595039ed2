"""Elementwise fusion: maximal chains of elementwise ops become one `fused` binding.

A value joins its consumer's chain when the consumer is its only reader (nothing else, not the
result, needs it in memory), when no checkpoint marker lies between the two (a recompute region
stays where the Gradient pass put it) and when moving its computation down to the consumer does not
keep more input bytes alive than the value itself took. The chain is written into the `fused` op's
`expr` attribute (see `ir.ops.fused`); one-op chains stay as they are.

Opt-in for now: `TRACEGRAD_FUSE=1` in the environment (or `set_enabled(True)`, or `with fusion(True):`)
makes `ir.transform.cleanup()` (so `autodiff.value_and_grad`) fuse; otherwise the pass is the identity
unless built with `force=True`. A module holding fused bindings still differentiates: the Gradient
pass expands them first (`ir.transform.Unfuse`, so each sub-op's own VJP rule runs). Off by default:
on NumPy it does not pay (docs/benchmarks.md), and golden tests count the unfused ops. Pattern passes
that run after `cleanup()` (`optimize()`'s) do not see through a fused chain: fusion belongs last.
"""
from __future__ import annotations

import contextlib
import math
import os

import numpy as np

from ..nodes import Binding, Call, Constant, Function, Tuple, Var, free_vars
from ..ops.fused import Const, Leaf, Node, expr_text
from ..ops.registry import make_call
from ..types import TensorType
from .base import FunctionPass, replace_bindings

ELEMENTWISE = frozenset({
    "add", "subtract", "multiply", "divide", "power", "maximum", "minimum", "negative", "abs", "exp", "log",
    "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid", "nn.relu", "nn.silu", "nn.log_sigmoid", "nn.gelu",
    "less", "less_equal", "greater", "greater_equal", "equal", "not_equal", "where", "astype",
    # issue 22's
    "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "erf", "erfc", "erfinv", "log2",
    "log10", "log1p", "expm1", "exp2", "atan2", "hypot", "copysign", "log_add_exp", "xlogy", "fmax", "fmin",
    "mod", "floor_mod", "floor_divide", "heaviside", "sign", "trunc", "floor", "ceil", "round", "clamp",
    "lgamma", "digamma", "polygamma"})
DTYPES = frozenset({"float16", "float32", "float64", "bool"})  # integer division keeps its own checks

_enabled = os.environ.get("TRACEGRAD_FUSE", "0") not in ("0", "false", "off", "")


def enabled() -> bool:
    """Whether `cleanup()` fuses (the environment's TRACEGRAD_FUSE, default off, or `set_enabled`)."""
    return _enabled


def set_enabled(on: bool) -> bool:
    """Turn fusion on or off for every later `cleanup()`; returns the previous setting."""
    global _enabled
    previous, _enabled = _enabled, bool(on)
    return previous


@contextlib.contextmanager
def fusion(on: bool):
    """`with fusion(False): ...` runs a block with fusion switched, then restores the setting."""
    previous = set_enabled(on)
    try:
        yield
    finally:
        set_enabled(previous)


def _fusable(value) -> bool:
    if not isinstance(value, Call) or value.op not in ELEMENTWISE or not isinstance(value.type, TensorType):
        return False
    if value.type.dtype not in DTYPES:
        return False
    return all(isinstance(a, Var | Constant) and isinstance(a.type, TensorType) and a.type.dtype in DTYPES
               for a in value.args)


def _nbytes(t: TensorType) -> int:
    return math.prod(t.shape) * _ITEMSIZE[t.dtype]


_ITEMSIZE = {d: np.dtype(d).itemsize for d in DTYPES}


class _Chain:
    """A chain being built: its expression tree over the external inputs."""

    def __init__(self):
        self.inputs: list = []  # Vars and non-scalar Constants, in order of first use

    def leaf(self, expr) -> Leaf:
        for i, e in enumerate(self.inputs):
            if e is expr:
                return Leaf(i)
        self.inputs.append(expr)
        return Leaf(len(self.inputs) - 1)


class FuseElementwise(FunctionPass):
    """Rewrite chains of elementwise ops into `fused` bindings (identity when fusion is off, unless `force`).

    >>> import ir, tracer
    >>> mod = tracer.trace(lambda x: (x * 2.0 + 1.0).exp(), tracer.spec((4,)))
    >>> [b.value.op for b in FuseElementwise(force=True)(mod)["main"].bindings]
    ['fused']
    """

    def __init__(self, func_names=None, force: bool = False):
        super().__init__(func_names)
        self.force = force

    def __call__(self, mod):
        return super().__call__(mod) if self.force or enabled() else mod

    def transform_function(self, fn: Function) -> Function:
        if len(fn.blocks) != 1:
            return fn
        bindings = fn.bindings
        uses: dict[Var, int] = {}
        last: dict[Var, int] = {}
        for i, b in enumerate(bindings):
            for v in free_vars(b.value):
                uses[v] = uses.get(v, 0) + 1
                last[v] = i
        for v in free_vars(fn.body):
            uses[v] = uses.get(v, 0) + 2  # a result is never an intermediate
            last[v] = len(bindings)
        markers = [i for i, b in enumerate(bindings) if isinstance(b.value, Call) and b.value.op.startswith("grad.")]
        params = set(fn.params)
        pos = {b.var: i for i, b in enumerate(bindings)}
        trees: dict[Var, tuple] = {}  # var -> (tree over its chain's inputs, those inputs)
        absorbed: set[Var] = set()

        def joins(v, i) -> bool:
            j = pos.get(v)
            if j is None or v not in trees or uses.get(v) != 1 or any(j < m < i for m in markers):
                return False
            extended = {id(x): x for x in trees[v][1] if isinstance(x, Var) and x not in params and last[x] < i}
            if sum(_nbytes(x.type) for x in extended.values()) <= _nbytes(v.type):
                return True
            # longer-lived inputs cost nothing when nothing else is computed meanwhile
            return i - j <= 64 and all(k in members or bindings[k].var in absorbed for k in range(j + 1, i))

        members: set[int] = set()  # positions of the bindings in the chain being built

        def build(expr, chain, i):
            if isinstance(expr, Constant) and expr.data.ndim == 0:
                return Const(expr.data.item(), str(expr.data.dtype))
            if isinstance(expr, Var) and joins(expr, i):
                absorbed.add(expr)
                members.add(pos[expr])
                tree, inputs = trees[expr]
                return _relabel(tree, inputs, chain)
            return chain.leaf(expr)

        out = []
        for i, b in enumerate(bindings):
            if not _fusable(b.value):
                out.append(b)
                continue
            chain = _Chain()
            members.clear()
            node = Node(b.value.op, tuple(build(a, chain, i) for a in b.value.args), b.value.attrs)
            trees[b.var] = (node, list(chain.inputs))
            for x in chain.inputs:
                if isinstance(x, Var):
                    last[x] = max(last.get(x, i), i)
            out.append(b)
        rewritten = []
        for b in out:
            if b.var in absorbed:
                continue
            tree = trees.get(b.var)
            if tree is not None and _count(tree[0]) > 1:
                call = make_call("fused", [Tuple(tree[1])], {"expr": expr_text(tree[0])})
                b = Binding(b.var, call)
            rewritten.append(b)
        return replace_bindings(fn, rewritten, fn.body)


def _count(node) -> int:
    return 1 + sum(_count(a) for a in node.args) if isinstance(node, Node) else 0


def _relabel(node, inputs, chain):
    if isinstance(node, Leaf):
        return chain.leaf(inputs[node.index])
    if isinstance(node, Const):
        return node
    return Node(node.op, tuple(_relabel(a, inputs, chain) for a in node.args), node.attrs)
