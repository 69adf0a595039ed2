"""`fused`: a chain of elementwise ops evaluated as one op, without full-size intermediate arrays.

The op takes one tuple of tensors and an attribute `expr`, the chain as a nested call in the ops'
own names: inputs are `x0, x1, ...`, scalar constants `const(0.5, "float32")`, attributes keywords:

    R.fused((x, y), expr='multiply(nn.relu(x0), add(x1, const(1.0, "float32")))')

Each sub-op keeps its own inference (so errors name it) and its own kernel. On NumPy a chain runs
through NumPy's own ufuncs, each writing into a temporary the chain already owns (`out=`), so n ops
allocate about one array and the values equal the unfused path bit for bit. Where numexpr is installed
(the `fast` extra) and runs more than one thread, a chain of arithmetic, comparisons and where is one
numexpr pass; numexpr's own exp/tanh/log (scalar libm without Intel's VML) measured about 5x slower
than NumPy's SIMD loops here, so chains with those stay on NumPy. On CuPy the ops run one by one.
`ir.transform.FuseElementwise` makes these bindings; nothing else needs to know about them.
"""
from __future__ import annotations

import ast
import functools
import math

import numpy as np

from ..types import IRError, TensorType
from .registry import Attr, declare, get_op, normalize_attrs

try:  # optional: the `fast` extra
    import numexpr
except ImportError:  # pragma: no cover - depends on the environment
    numexpr = None

# Results below this many elements go op by op through the kernels (in-place bookkeeping costs more than it saves).
SMALL = 1 << 15


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


_INPLACE_BINARY = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply, "maximum": np.maximum,
                   "minimum": np.minimum}
_INPLACE_UNARY = {"negative": np.negative, "abs": np.abs, "exp": np.exp, "log": np.log, "sqrt": np.sqrt,
                  "sin": np.sin, "cos": np.cos, "tanh": np.tanh}


def _inplace(node, xs):
    """(value, owned): the chain through NumPy, each ufunc writing into a temporary it owns (`out=`) where
    the shape and dtype allow, so a chain of n ops allocates about one array instead of n. Same ufuncs,
    same values as the unfused kernels, bit for bit."""
    if isinstance(node, Leaf):
        return xs[node.index], False
    if isinstance(node, Const):
        return node.array(), False
    args = [_inplace(a, xs) for a in node.args]
    values = [a for a, _ in args]
    ufunc = _INPLACE_BINARY.get(node.op) or _INPLACE_UNARY.get(node.op)
    if ufunc is not None and values[0].dtype.kind == "f" and all(v.dtype == values[0].dtype for v in values):
        shape = np.broadcast_shapes(*(v.shape for v in values))
        for value, owned in args:
            if owned and value.shape == shape:
                return ufunc(*values, out=value), True
    out = get_op(node.op).kernel(np, *values, **node.attrs)
    return out, not any(np.may_share_memory(out, x) for x in xs)  # a kernel may hand back (a view of) an input


_NE = {"add": "({0} + {1})", "subtract": "({0} - {1})", "multiply": "({0} * {1})", "divide": "({0} / {1})",
       "negative": "(-{0})", "abs": "abs({0})", "sqrt": "sqrt({0})",
       "rsqrt": "(1 / sqrt({0}))",
       "maximum": "where(({0} >= {1}) | ({0} != {0}), {0}, {1})",
       "minimum": "where(({0} <= {1}) | ({0} != {0}), {0}, {1})",
       "nn.relu": "where({0} < 0, 0, {0})",
       "less": "({0} < {1})", "less_equal": "({0} <= {1})", "greater": "({0} > {1})",
       "greater_equal": "({0} >= {1})", "equal": "({0} == {1})", "not_equal": "({0} != {1})",
       "where": "where({0}, {1}, {2})"}
_NE_DTYPES = {"float32", "float64", "bool"}


def _numexpr_text(node, consts):
    """The chain in numexpr's syntax; None when a sub-op has no numexpr form."""
    if isinstance(node, Leaf):
        return f"x{node.index}"
    if isinstance(node, Const):
        if node.dtype not in _NE_DTYPES:
            return None
        consts[f"c{len(consts)}"] = node.array()  # a 0-d array keeps its dtype (a literal would be float64)
        return f"c{len(consts) - 1}"
    form = _NE.get(node.op)
    if form is None:
        return None
    args = [_numexpr_text(a, consts) for a in node.args]
    return None if None in args else form.format(*args)


@functools.lru_cache(maxsize=4096)
def _numexpr_plan(expr: str):
    if numexpr is None:
        return None
    consts: dict = {}
    text = _numexpr_text(parse_expr(expr), consts)
    return None if text is None else (text, consts)


def _fused_kernel(xp, xs, expr):
    node = parse_expr(expr)
    shape = np.broadcast_shapes(*(x.shape for x in xs))
    size = math.prod(shape)
    if xp is not np:
        return xp.asarray(_evaluate(xp, node, list(xs)))
    if size < SMALL or not shape:
        out = np.asarray(_evaluate(xp, node, list(xs)))
        # always a buffer of its own (as ir.reuse's FRESH ops), never a view of an input
        return out.copy() if any(np.may_share_memory(out, x) for x in xs) else out
    plan = _numexpr_plan(expr) if all(x.dtype.name in _NE_DTYPES for x in xs) else None
    if plan is not None and numexpr.get_num_threads() > 1:
        dtype = _result_dtype(expr, tuple(x.dtype.name for x in xs))
        text, consts = plan
        out = np.empty(shape, dtype)
        numexpr.evaluate(text, local_dict={**{f"x{i}": x for i, x in enumerate(xs)}, **consts}, out=out,
                         casting="same_kind")
        return out
    out, owned = _inplace(node, list(xs))
    return np.asarray(out) if owned else np.array(out)


@functools.lru_cache(maxsize=4096)
def _result_dtype(expr: str, dtypes: tuple) -> str:
    return _types(parse_expr(expr), [TensorType((), d) for d in dtypes]).dtype


declare("fused", ("*tensors",), (Attr("expr", "str"),), infer=_infer, kernel=_fused_kernel, differentiable=False,
        doc="A chain of elementwise ops evaluated as one (made by ir.transform.FuseElementwise).")
