"""The gradient of a fused q/k/v projection in one copy instead of two (NumPy executor).

Attention's q, k and v come out of one (B, T, 3C) projection, so its gradient is a concat over the last axis
of the three heads' gradients, each merged back from (B, H, T, D) as `reshape(permute_dims(g, (0, 2, 1, 3)),
(B, T, C))`: the reshape of the transposed array copies it (three (16, 64, 128) copies per layer in the GPT,
about 45 us each at 1 thread) and the concat copies all three once more. `rewrite(fn)` (called by the
executor when it compiles a function) replaces

    concat((reshape(p1), ..., reshape(pn)), axis=-1)     each reshape merging trailing axes of its p

by `reshape(stack((p1, ..., pn), axis=k), shape)` (k = the concat's last axis): the stack copies each pi
into its place once, and the reshape of the stacked array is a view. The same elements in the same places,
so the same bits; standard ops, so the IR still prints, parses and runs anywhere. The reshapes are taken
only where the concat is their one reader; the pi need all have one shape and dtype.
"""
from __future__ import annotations

import math

from ..nodes import Binding, Call, Function, Tuple, Var
from ..types import TensorType
from .cross_entropy import _use_counts


def _merged(r: Var, call, ndim: int):
    """The tensor a reshape binding `call` (defining r) merges the trailing axes of into r's last axis, or None."""
    if call is None or call.op != "reshape" or len(call.args) != 1 or not isinstance(call.args[0], Var):
        return None
    p = call.args[0].type
    k = ndim - 1
    if not isinstance(p, TensorType) or p.ndim <= ndim or p.shape[:k] != r.type.shape[:k]:
        return None
    return call.args[0] if math.prod(p.shape[k:]) == r.type.shape[-1] else None


def rewrite(fn: Function) -> Function:
    """`fn` with each such concat as a stack and a reshape; `fn` itself when there is none."""
    bindings = fn.bindings
    if not any(isinstance(b.value, Call) and b.value.op == "concat" for b in bindings):
        return fn
    uses = _use_counts(fn)
    producer = {b.var: (i, b.value) for i, b in enumerate(bindings) if isinstance(b.value, Call)}
    drop: set[int] = set()
    replace: dict[int, list[Binding]] = {}
    for i, b in enumerate(bindings):
        v, out = b.value, b.var.type
        if not isinstance(v, Call) or v.op != "concat" or not isinstance(out, TensorType) or out.ndim == 0:
            continue
        if len(v.args) != 1 or not isinstance(v.args[0], Tuple) or v.attrs.get("axis", 0) % out.ndim != out.ndim - 1:
            continue
        fields = v.args[0].fields
        if len(fields) < 2 or not all(isinstance(f, Var) and uses.get(f, 0) == 1 for f in fields):
            continue
        if len(set(fields)) != len(fields):
            continue
        found = [producer.get(f) for f in fields]
        if any(x is None for x in found):
            continue
        ps = [_merged(f, call, out.ndim) for f, (_, call) in zip(fields, found, strict=True)]
        if any(p is None for p in ps) or len({(p.type.shape, p.type.dtype) for p in ps}) != 1:
            continue
        k = out.ndim - 1
        shape = ps[0].type.shape
        stacked = Var(f"{b.var.name}_stacked", TensorType(shape[:k] + (len(ps),) + shape[k:], out.dtype), b.var.loc)
        replace[i] = [Binding(stacked, Call("stack", (Tuple(ps),), {"axis": k}, stacked.type)),
                      Binding(b.var, Call("reshape", (stacked,), {"shape": tuple(out.shape)}, out))]
        drop.update(j for j, _ in found)
    if not replace:
        return fn
    new = []
    for i, b in enumerate(bindings):
        if i in replace:
            new.extend(replace[i])
        elif i not in drop:
            new.append(b)
    return Function(fn.params, [type(fn.blocks[0])(new, fn.blocks[0].is_dataflow)], fn.body, dict(fn.attrs))


__all__ = ["rewrite"]
