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

from collections.abc import Callable

from ..nodes import Call, Function, Tuple, Var, free_vars
from ..types import TensorType
from . import fused_cpu as fused

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


def _lifetimes(fn: Function):
    """(returned vars, last reading binding per var, vars read somewhere that may keep their buffer,
    vars made by a FRESH op)."""
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
    return returned, last, shared, made_fresh


def _receivers(fn: Function):
    """Yield (binding index, its call, its result type, predicate: may this operand's buffer receive the result)."""
    returned, last, shared, made_fresh = _lifetimes(fn)
    for i, b in enumerate(fn.bindings):
        v, t = b.value, b.var.type
        if isinstance(v, Call) and isinstance(t, TensorType):
            yield i, v, t, lambda a, i=i, t=t: (isinstance(a, Var) and a in made_fresh and last.get(a) == i
                                                and a not in returned and a not in shared and a.type == t)


def plan_reuse(fn: Function) -> dict[int, tuple[str, Var]]:
    """{binding index: (ufunc name, operand var)}: binding i computes `ufunc(*args, out=<var's buffer>)`.

    The var dies at binding i, is not returned, is no parameter, was made by a `FRESH` op, and every
    binding that reads it is a `FRESH` call taking it as a direct argument (nothing keeps a view of it).
    """
    plan: dict[int, tuple[str, Var]] = {}
    for i, v, t, receives in _receivers(fn):
        if v.op not in UFUNCS:
            continue
        name, float_only = UFUNCS[v.op]
        if float_only and not t.is_float:
            continue
        for a in v.args:
            if receives(a):
                plan[i] = (name, a)
                break
    return plan


def plan_fused_reuse(fn: Function) -> dict[int, tuple[Callable, Var]]:
    """{binding index: (run, input var)} for `fused` bindings, NumPy only: `run(xs)` (xs: the binding's
    tuple) evaluates the chain free to overwrite that input's buffer (`ir.runtime.fused_cpu.into`): the var
    meets `plan_reuse`'s conditions and the chain reads it once, so a chain whose input dies there
    allocates one array less. An executor calls `run` as the binding's kernel and must keep the var's
    buffer out of its free pool until the call (the tuple holds it).

    >>> import ir
    >>> mod = ir.parse('''
    ... @R.function
    ... def main(x: R.Tensor((4,), "float32")):
    ...     with R.dataflow():
    ...         a: R.Tensor((4,), "float32") = R.exp(x)
    ...         y: R.Tensor((4,), "float32") = R.fused((a, x), expr="tanh(add(x0, x1))")
    ...         R.output(y)
    ...     return y
    ... ''')
    >>> {i: v.name for i, (run, v) in plan_fused_reuse(mod["main"]).items()}
    {1: 'a'}
    """
    plan: dict[int, tuple[Callable, Var]] = {}
    for i, v, _, receives in _receivers(fn):
        if v.op != "fused" or not isinstance(v.args[0], Tuple):
            continue
        expr = v.attrs["expr"]
        for k, a in enumerate(v.args[0].fields):
            if receives(a) and fused.leaf_count(expr, k) == 1:
                plan[i] = (fused.into(expr, k), a)
                break
    return plan


__all__ = ["FRESH", "UFUNCS", "plan_fused_reuse", "plan_reuse"]
