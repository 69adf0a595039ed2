"""The table of VJP rules, one per differentiable op.

A rule has one signature everywhere: `rule(b, call, out, g) -> list`, where `b` is the ir.Builder to
emit into, `call` the forward ir.Call (its `args` are the forward inputs), `out` the forward result
var and `g` the incoming gradient (an expr of `out`'s type; for tuple-valued ops an ir.Tuple with a
field per output). It returns one entry per `call.args`: an expr for that input's gradient, None
when no gradient flows to it, or, for an argument that is an inline tuple (concat's), a list with an
entry per field. A gradient may keep the broadcast (output) shape: the Gradient pass sums it back
to the input's shape and accumulates contributions, once, centrally.
"""
from __future__ import annotations

from collections.abc import Callable

VJPS: dict[str, Callable] = {}


def register_vjp(op_name: str):
    """Decorator: register `fn(b, call, out, g)` as the VJP rule of op `op_name` (once per op)."""
    def wrap(fn):
        if op_name in VJPS:
            raise ValueError(f"VJP rule for {op_name!r} registered twice")
        VJPS[op_name] = fn
        return fn
    return wrap
