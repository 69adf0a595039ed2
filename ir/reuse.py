"""Buffer reuse: an elementwise op writes its result into the buffer of an operand that dies there.

`plan_reuse` picks, for each instruction of a compiled function, a dying operand whose buffer can
receive the result through the ufunc's `out=`: same shape and dtype as the result, produced by an op
that always returns a buffer of its own (never a view of its inputs), read by nothing that could
keep a view of it, not an argument (the caller's array), not a constant and not returned. The
result is then that very buffer, so the executor holds no new bytes for it: `peak_bytes` never grows
and falls wherever a chain of elementwise ops would have held two buffers at once.

>>> import numpy as np, tracer, ir
>>> mod = tracer.trace(lambda x: tracer.exp(tracer.exp(x) * 2.0), tracer.spec((1024,)))
>>> ex = ir.Executor(mod)
>>> _ = ex["main"](np.zeros(1024, "float32"))
>>> ex.stats.peak_bytes  # x, one buffer for exp, multiply and exp in turn, the constant 2.0
8196
"""
from __future__ import annotations

from .nodes import Call, Function, Tuple, Var, free_vars
from .types import TensorType

# op -> (NumPy/CuPy ufunc computing exactly the op's kernel, only for floating dtypes)
UFUNCS = {
    "add": ("add", False), "subtract": ("subtract", False), "multiply": ("multiply", False),
    "divide": ("true_divide", True), "power": ("power", True), "maximum": ("maximum", False),
    "minimum": ("minimum", False), "negative": ("negative", False), "abs": ("absolute", False),
    "exp": ("exp", True), "log": ("log", True), "sqrt": ("sqrt", True), "sin": ("sin", True),
    "cos": ("cos", True), "tanh": ("tanh", True),
}

# ops whose result is always a buffer of its own, never a view of an operand
# (`fused` too: its kernel always returns a buffer of its own, and keeps no view of the tuple it reads)
FRESH = frozenset(UFUNCS) | {"matmul", "where", "nn.relu", "sigmoid", "rsqrt", "nn.silu", "nn.gelu",
                             "nn.log_sigmoid", "less", "less_equal", "greater", "greater_equal", "equal",
                             "not_equal", "fused"}


def plan_reuse(fn: Function) -> dict[int, tuple[str, Var]]:
    """{binding index: (ufunc name, operand var)}: binding i computes `ufunc(*args, out=<var's buffer>)`.

    The var dies at binding i, is not returned, is no parameter, was made by a `FRESH` op, and every
    binding that reads it is a `FRESH` call taking it as a direct argument (nothing keeps a view of it).
    """
    bindings = fn.bindings
    returned = set(free_vars(fn.body))
    last: dict[Var, int] = {}
    shared: set[Var] = set()  # read somewhere that may keep its buffer alive (a tuple, an item, a view op)
    for i, b in enumerate(bindings):
        v = b.value
        direct = set(v.args) if isinstance(v, Call) and v.op in FRESH else set()
        if isinstance(v, Call) and v.op == "fused" and isinstance(v.args[0], Tuple):
            direct = set(v.args[0].fields)  # the fields of its inline tuple are read, never kept
        for u in free_vars(v):
            last[u] = i
            if u not in direct:
                shared.add(u)
    made_fresh = {b.var for b in bindings if isinstance(b.value, Call) and b.value.op in FRESH}
    plan: dict[int, tuple[str, Var]] = {}
    for i, b in enumerate(bindings):
        v, t = b.value, b.var.type
        if not (isinstance(v, Call) and v.op in UFUNCS and isinstance(t, TensorType)):
            continue
        name, float_only = UFUNCS[v.op]
        if float_only and not t.is_float:
            continue
        for a in v.args:
            if (isinstance(a, Var) and a in made_fresh and last.get(a) == i and a not in returned
                    and a not in shared and a.type == t):
                plan[i] = (name, a)
                break
    return plan


__all__ = ["FRESH", "UFUNCS", "plan_reuse"]
