"""The backward chains of softmax, layer_norm and tanh-GELU (and attention's masked softmax) as one
`fused` binding each, run by a numba row kernel (ir.runtime.numba_vjp); NumPy executor, float32, numba only.

The VJP rules emit these as primitive chains (autodiff/rules/nn.py, elementwise.py): the layer norm's input
gradient is 20 bindings with four row sums, the GELU's 18 full-size products. `rewrite(fn)` (called by the
executor when it compiles a function) finds each chain and replaces it by a standard `fused` binding whose
`expr` is the chain itself: the op's reference kernel evaluates it op by op, so the IR means what it meant
and prints, parses and runs anywhere (`fused` exprs may name any op). `kernel(call)`, asked by
ir.runtime.specialize for every `fused` binding, recognises the same chains in an expr and gives the numba
kernel. The recognised chains:

- `y * (g - sum(g * y))` over the last axis (softmax's VJP), optionally inside `where(mask, fill, .)` or
  `where(mask, ., fill)` (attention's masked scores);
- `softmax(where(mask, fill, x))` over the last axis (attention's masked forward);
- the layer norm's dx, `rstd * (d - mean(d) - xhat * mean(d * xhat))` with d = g * gamma and xhat, rstd
  recomputed from x, and its dgamma, `collapse_sum_to(g * xhat)`, over the same trailing axes;
- `g * (0.5 * (1 + t) + 0.5 * x * ((1 - t * t) * dinner))`, the tanh GELU's VJP.

`kernel(call)` also gives numba kernels for two plain bindings: a float32 tanh `nn.gelu` (the same GELU as
its VJP kernel) and `grad.take_backward` over axis 0 (the embedding gradient, np.add.at's bits).

A mask is a bool tensor of the full shape or a tile of the trailing axes (a causal (T, T) mask). Left as
they are: float64 (NumPy's exp is exact to the last bit), other dtypes, arrays below numba_gen.MIN_SIZE,
broadcast operands other than gamma and the mask, and chains whose intermediates are read elsewhere. While
numba loads in the background (ir.runtime.numba_hook's tiers) the chains stay and their kernels are
prepared; the executor makes the function again once numba is ready.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from ..nodes import Call, Constant, Function, Tuple, Var
from ..ops.fused import Const, Leaf, Node, _infer_cached
from ..types import TensorType
from . import numba_hook
from .cross_entropy import _use_counts

_COMMUTATIVE = frozenset({"add", "multiply"})

# ---------------------------------------------------------------- the chains, as patterns
# a str: any tensor (the same one wherever the name recurs); ("const", name): a scalar constant;
# ("=", name, pattern): a sub-chain read more than once (the same binding each time); else (op, *args)

SOFTMAX_VJP = ("multiply", "y", ("subtract", "g", ("sum", ("multiply", "g", "y"))))
_C = ("=", "c", ("subtract", "x", ("multiply", ("sum", "x"), ("const", "inv"))))
_RSTD = ("=", "rstd", ("rsqrt", ("add", ("multiply", ("sum", ("multiply", _C, _C)), ("const", "inv")),
                                 ("const", "eps"))))
_XHAT = ("=", "xhat", ("multiply", _C, _RSTD))
_D = ("=", "d", ("multiply", "g", "gamma"))
LN_DX = ("multiply", _RSTD, ("subtract", ("subtract", _D, ("multiply", ("sum", _D), ("const", "inv"))),
                             ("multiply", _XHAT, ("multiply", ("sum", ("multiply", _D, _XHAT)), ("const", "inv")))))
LN_DGAMMA = ("collapse_sum_to", ("multiply", "g", _XHAT))
_X2 = ("=", "x2", ("multiply", "x", "x"))
_INNER = ("multiply", ("const", "k"), ("add", "x", ("multiply", ("const", "a"), ("multiply", _X2, "x"))))
_T = ("=", "t", ("tanh", _INNER))
_SLOPE = ("multiply", ("subtract", ("const", "one"), ("multiply", _T, _T)),
          ("multiply", ("const", "k"), ("add", ("const", "one"), ("multiply", ("const", "a3"), _X2))))
GELU_VJP = ("multiply", "g", ("add", ("multiply", ("const", "half"), ("add", ("const", "one"), _T)),
                              ("multiply", ("multiply", ("const", "half"), "x"), _SLOPE)))

# (name, pattern): the larger first (a masked VJP before the bare one)
PATTERNS = (
    ("softmax_vjp_fill", ("where", "mask", ("const", "fill"), SOFTMAX_VJP)),
    ("softmax_vjp_keep", ("where", "mask", SOFTMAX_VJP, ("const", "fill"))),
    ("softmax_vjp", SOFTMAX_VJP),
    ("masked_softmax_fill", ("nn.softmax", ("where", "mask", ("const", "fill"), "x"))),
    ("masked_softmax_keep", ("nn.softmax", ("where", "mask", "x", ("const", "fill")))),
    ("layer_norm_dx", LN_DX),
    ("gelu_tanh_vjp", GELU_VJP),
)
_GELU_CONSTS = {"k": math.sqrt(2.0 / math.pi), "a": 0.044715, "a3": 3 * 0.044715, "one": 1.0, "half": 0.5}


def _canonical(op, attrs, ndim):
    """attrs with axes as negative numbers (the form an expr is written in), or None when they are not the
    chain's (a sum without keepdims or not over trailing axes, a softmax not over the last axis). ndim None:
    attrs of an expr, which must be in that form already."""
    if op == "sum":
        if not attrs.get("keepdims") or attrs.get("axis") is None:
            return None
        axis = tuple(attrs["axis"]) if ndim is None else tuple(sorted(a % ndim - ndim for a in attrs["axis"]))
        return {"axis": axis, "keepdims": True} if axis and axis == tuple(range(-len(axis), 0)) else None
    if op == "nn.softmax":
        axis = attrs["axis"] if ndim is None else attrs["axis"] % ndim - ndim
        return {"axis": -1} if axis == -1 else None
    return dict(attrs)


class _Graph:
    """The IR side: a var is a call node when a binding of this function defines it (and is not yet taken)."""

    def __init__(self, fn: Function, taken: set):
        self.producer = {b.var: (i, b.value) for i, b in enumerate(fn.bindings) if isinstance(b.value, Call)}
        self.taken = taken

    def view(self, e):
        if isinstance(e, Constant):
            return ("const", float(e.data)) if e.data.ndim == 0 and e.data.dtype.kind == "f" else ("leaf",)
        found = self.producer.get(e) if isinstance(e, Var) else None
        if found is None or found[0] in self.taken:
            return ("leaf",)
        call = found[1]
        if call.op in ("sum", "nn.softmax") and not isinstance(call.args[0].type, TensorType):
            return ("leaf",)
        ndim = call.args[0].type.ndim if call.op in ("sum", "nn.softmax") else None
        attrs = _canonical(call.op, call.attrs, ndim) if ndim is not None else dict(call.attrs)
        return ("call", call.op, call.args, attrs, found[0])

    def attrs(self, var) -> dict:
        """The attrs of the call defining var, as its expr writes them."""
        return self.view(var)[3]

    @staticmethod
    def capturable(e) -> bool:
        return isinstance(e, Var) or (isinstance(e, Constant) and e.data.ndim > 0)

    @staticmethod
    def same(a, b):
        return a is b


class _Tree:
    """The expr side: a `fused` binding's chain (ir.ops.fused's Node, Leaf, Const)."""

    @staticmethod
    def view(e):
        if isinstance(e, Const):
            return ("const", float(e.value)) if np.dtype(e.dtype).kind == "f" else ("leaf",)
        if isinstance(e, Leaf):
            return ("leaf",)
        return ("call", e.op, e.args, _canonical(e.op, e.attrs, None), None)

    @staticmethod
    def capturable(e) -> bool:
        return isinstance(e, Leaf)

    @staticmethod
    def same(a, b):
        if isinstance(a, Leaf) or isinstance(b, Leaf):
            return isinstance(a, Leaf) and isinstance(b, Leaf) and a.index == b.index
        return a is b or _node_text(a) == _node_text(b)


@functools.lru_cache(maxsize=4096)
def _node_text(node) -> str:
    return node.text()


def match(pattern, e, graph, env=None):
    """The bindings of `pattern` at `e` ({name: expr or constant value, "_calls": matched call keys, "_k": the
    number of trailing axes summed}), or None."""
    env = {"_calls": ()} if env is None else env
    return _match(pattern, e, graph, dict(env))


def _match(p, e, graph, env):
    if isinstance(p, str):
        if p in env:
            return env if graph.same(env[p], e) else None
        if not graph.capturable(e):
            return None
        env[p] = e
        return env
    kind = p[0]
    if kind == "const":
        v = graph.view(e)
        if v[0] != "const" or (p[1] in env and env[p[1]] != v[1]):
            return None
        env[p[1]] = v[1]
        return env
    if kind == "=":
        if p[1] in env:
            return env if graph.same(env[p[1]], e) else None
        env = _match(p[2], e, graph, env)
        if env is not None:
            env[p[1]] = e
        return env
    v = graph.view(e)
    if v[0] != "call" or v[1] != kind or len(v[2]) != len(p) - 1 or v[3] is None:
        return None
    if kind == "sum":
        k = len(v[3]["axis"])
        if env.get("_k", k) != k:
            return None
        env["_k"] = k
    orders = [v[2]] if kind not in _COMMUTATIVE else [v[2], v[2][::-1]]
    for args in orders:
        trial = dict(env)
        for sub, a in zip(p[1:], args, strict=True):
            trial = _match(sub, a, graph, trial)
            if trial is None:
                break
        else:
            trial["_calls"] = trial["_calls"] + (v[4],)
            return trial
    return None


# ---------------------------------------------------------------- which chains a kernel runs


def check(name: str, env: dict, types: dict, out: TensorType) -> dict | None:
    """The kernel's parameters for chain `name` with these leaf types ({leaf name: TensorType}) and result
    type, or None when the kernel does not cover them."""
    from . import numba_gen

    if out.dtype != "float32" or not out.shape or 0 in out.shape:
        return None
    if any(not isinstance(t, TensorType) for t in types.values()):
        return None
    floats = [t for n, t in types.items() if n != "mask"]
    if any(t.dtype != "float32" for t in floats):
        return None
    if name.startswith(("softmax_vjp", "masked_softmax")):
        if env.get("_k", 1) != 1:  # the kernel sums rows of the last axis only
            return None
        full = [types[n] for n in ("y", "g", "x") if n in types]
        if any(t.shape != out.shape for t in full) or math.prod(out.shape) < numba_gen.MIN_SIZE:
            return None
        kind = 0
        if "mask" in types:
            mask = types["mask"]
            if mask.dtype != "bool" or numba_gen._form(mask.shape, out.shape) not in ("full", "tile"):
                return None
            kind = 1 if name.endswith("_fill") else 2
        return {"kind": kind, "fill": env.get("fill", 0.0)}
    if name in ("layer_norm_dx", "layer_norm_dgamma"):
        x = types["x"]
        k = env["_k"]
        if k > x.ndim or types["g"].shape != x.shape or math.prod(x.shape) < numba_gen.MIN_SIZE:
            return None
        n = math.prod(x.shape[x.ndim - k:])
        if env["inv"] != float(np.float32(1.0 / n)) or not env["eps"] >= 0.0:
            return None
        block = _strip(x.shape[x.ndim - k:])
        if name == "layer_norm_dx":
            if out.shape != x.shape or _strip(types["gamma"].shape) != block:
                return None
        elif _strip(out.shape) != block:
            return None
        return {"n": n, "eps": env["eps"]}
    if name == "gelu_tanh_vjp":
        if types["x"].shape != out.shape or types["g"].shape != out.shape or math.prod(out.shape) < numba_gen.MIN_SIZE:
            return None
        if any(env[c] != float(np.float32(v)) for c, v in _GELU_CONSTS.items()):
            return None
        return {}
    return None


def _strip(shape) -> tuple:
    shape = tuple(shape)
    while shape and shape[0] == 1:
        shape = shape[1:]
    return shape


_LEAVES = {"softmax_vjp": ("y", "g"), "masked_softmax": ("x", "mask"), "layer_norm_dx": ("x", "gamma", "g"),
           "layer_norm_dgamma": ("x", "g"), "gelu_tanh_vjp": ("x", "g")}


def _leaves(name: str, env: dict) -> tuple[str, ...]:
    base = name.removesuffix("_fill").removesuffix("_keep")
    names = _LEAVES[base]
    return names + ("mask",) if base == "softmax_vjp" and "mask" in env else names


# ---------------------------------------------------------------- the IR rewrite


def rewrite(fn: Function) -> Function:
    """`fn` with each recognised chain as one `fused` binding; `fn` itself when there is none."""
    bindings = fn.bindings
    if not any(isinstance(b.value, Call) and b.value.op in ("multiply", "where", "nn.softmax") for b in bindings):
        return fn
    uses = _use_counts(fn)
    users: dict[Var, list[int]] = {}
    for i, b in enumerate(bindings):
        if isinstance(b.value, Call):
            for a in b.value.args:
                if isinstance(a, Var):
                    users.setdefault(a, []).append(i)
    taken: set[int] = set()
    graph = _Graph(fn, taken)
    replace: dict[int, Call] = {}
    for i in range(len(bindings) - 1, -1, -1):
        b = bindings[i]
        if i in taken or not isinstance(b.value, Call) or not isinstance(b.var.type, TensorType):
            continue
        for name, pattern in PATTERNS:
            if pattern[0] != b.value.op:
                continue
            found = _rewrite_one(name, pattern, b, graph, bindings, uses, users)
            if found is not None:
                for j, call in found[0].items():
                    replace[j] = call
                taken.update(found[1])
                break
    if not replace:
        return fn
    if not numba_hook.ready():  # numba still loads: its kernels are prepared, the chains stay for now
        for call in replace.values():
            kernel(call)
        return fn
    out = [type(b)(b.var, replace[i]) if i in replace else b
           for i, b in enumerate(bindings) if i in replace or i not in taken]
    return Function(fn.params, [type(fn.blocks[0])(out, fn.blocks[0].is_dataflow)], fn.body, dict(fn.attrs))


def _rewrite_one(name, pattern, b, graph, bindings, uses, users):
    """({binding index: its fused call}, binding indices the chain takes) for a match rooted at b, or None."""
    env = match(pattern, b.var, graph)
    if env is None:
        return None
    roots = {graph.producer[b.var][0]: (name, pattern, env, b)}
    if name == "layer_norm_dx":  # dgamma reads xhat too: both chains become fused bindings, or neither
        dgamma = _dgamma(env, graph, bindings, uses, users)
        if dgamma is None:
            return None
        roots[dgamma[0]] = dgamma[1:]
    calls = set()
    for _, _, e, _ in roots.values():
        calls.update(e["_calls"])
    if not _private(calls, set(roots), bindings, uses):
        return None
    made = {}
    for j, (n, _, e, root) in roots.items():
        call = _fused(n, e, root, graph)
        if call is None:
            return None
        made[j] = call
    return made, calls


def _dgamma(env, graph, bindings, uses, users):
    for u in users.get(env["xhat"], ()):
        prod = bindings[u]
        if uses.get(prod.var, 0) != 1 or prod.value.op != "multiply":
            continue
        for r in users.get(prod.var, ()):
            root = bindings[r]
            if root.value.op == "collapse_sum_to" and isinstance(root.var.type, TensorType):
                seeded = {k: env[k] for k in ("x", "g", "gamma", "c", "rstd", "xhat", "inv", "eps", "_k")}
                e2 = match(LN_DGAMMA, root.var, graph, {"_calls": (), **seeded})
                if e2 is not None:
                    return r, "layer_norm_dgamma", LN_DGAMMA, e2, root
    return None


def _private(calls: set, roots: set, bindings, uses) -> bool:
    """Every binding of the chain but its roots is read only inside the chain."""
    inside: dict[Var, int] = {}
    for j in calls:
        for a in bindings[j].value.args:
            if isinstance(a, Var):
                inside[a] = inside.get(a, 0) + 1
    return all(uses.get(bindings[j].var, 0) == inside.get(bindings[j].var, 0) for j in calls - roots)


def _fused(name, env, root, graph):
    """The `fused` call computing the matched chain (its leaves in the kernel's order), or None when the
    kernel would not take these types."""
    leaves = _leaves(name, env)
    types = {n: env[n].type for n in leaves}
    if check(name, env, types, root.var.type) is None:
        return None
    index = {id(env[n]): k for k, n in enumerate(leaves)}
    expr = _text(root.var, graph, index)
    fields = tuple(env[n] for n in leaves)
    try:
        if _infer_cached(expr, tuple(f.type for f in fields)) != root.var.type:
            return None
    except Exception:  # noqa: BLE001 - a chain the fused grammar cannot state stays as it is
        return None
    return Call("fused", (Tuple(fields),), {"expr": expr}, root.var.type)


def _text(e, graph, index, memo=None) -> str:
    """The expr text of the matched chain at e, in the IR's operand order (a value read twice is written twice:
    an expr is a tree)."""
    memo = {} if memo is None else memo
    if id(e) in index:
        return Leaf(index[id(e)]).text()
    if isinstance(e, Constant):
        return Const(float(e.data), str(e.data.dtype)).text()
    text = memo.get(e)
    if text is None:
        call = graph.producer[e][1]
        parts = [_text(a, graph, index, memo) for a in call.args] + [f"{k}={v!r}" for k, v in graph.attrs(e).items()]
        text = memo[e] = f"{call.op}({', '.join(parts)})"
    return text


# ---------------------------------------------------------------- the kernel for a fused binding


def kernel(call):
    """The numba kernel (`run(xs, out=None)`) of a `fused` binding whose expr is a recognised chain, else None;
    None also while numba loads (ir.runtime.numba_hook's tiers: the kernel is prepared for the re-make)."""
    plan = _plan(call)
    if plan is None:
        return None
    if not numba_hook.ready():
        numba_hook.prepare(("vjp_chains", plan[0], repr(call.attrs), repr(plan[2])), functools.partial(_load, plan))
        return None
    from .numba_vjp import runner
    return runner(*plan)


def _load(plan):
    from .numba_vjp import runner
    xs = tuple(np.zeros(t.shape, t.dtype) for t in plan[2])
    runner(*plan)(*(xs if plan[0] in _DIRECT else (xs,)))


_DIRECT = ("gelu_tanh", "take_backward")  # kernels of a binding's arrays, not of a fused tuple


@functools.lru_cache(maxsize=1024)
def _tree(expr: str):
    from ..ops.fused import parse_expr
    return parse_expr(expr)


def _plan(call):
    """(chain name, input indices, their types, result type, kernel parameters) of a `fused` binding, of a
    float32 tanh `nn.gelu` binding (the forward of the same GELU, its one array) or of a `grad.take_backward`
    over axis 0 (its data and indices), or None."""
    from . import numba_gen

    out = call.type
    if call.op == "grad.take_backward" and isinstance(out, TensorType) and out.shape:
        data, indices = (a.type for a in call.args)
        if (not isinstance(data, TensorType) or not isinstance(indices, TensorType) or call.attrs["axis"] % out.ndim
                or data.dtype not in ("float32", "float64") or indices.dtype not in ("int32", "int64")
                or not indices.shape or 0 in out.shape or math.prod(data.shape) < max(numba_gen.MIN_SIZE, 1)):
            return None
        return ("take_backward", [0, 1], [data, indices], out, {"mode": call.attrs["mode"]})
    if not isinstance(out, TensorType) or out.dtype != "float32" or len(call.args) != 1:
        return None
    if call.op == "nn.gelu":
        x = call.args[0].type
        if (call.attrs.get("approximate") != "tanh" or not isinstance(x, TensorType) or x != out or not out.shape
                or math.prod(out.shape) < numba_gen.MIN_SIZE):
            return None
        return ("gelu_tanh", [0], [x], out, {})
    fields = getattr(call.args[0].type, "fields", None)
    if fields is None:
        return None
    tree = _tree(call.attrs["expr"])
    if not isinstance(tree, Node) or tree.op not in ("multiply", "where", "nn.softmax", "collapse_sum_to"):
        return None
    for name, pattern in PATTERNS + (("layer_norm_dgamma", LN_DGAMMA),):
        env = match(pattern, tree, _Tree)
        if env is None:
            continue
        leaves = _leaves(name, env)
        idx = [env[n].index for n in leaves]
        if any(i >= len(fields) for i in idx):
            return None
        types = [fields[i] for i in idx]
        params = check(name, env, dict(zip(leaves, types, strict=True)), out)
        return None if params is None else (name, idx, types, out, params)
    return None


__all__ = ["PATTERNS", "check", "kernel", "match", "rewrite"]
