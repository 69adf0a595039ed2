"""The soft-target cross-entropy chain of a compiled step, as one op (NumPy executor only).

`-(t * log_softmax(z)).sum(axis=1).mean()`, the loss of hand-written training loops and of
`F.cross_entropy` with class probabilities, traces as four bindings after the log_softmax:
`multiply`, `sum(axis=1)`, `mean`, `negative`, each one dispatch and the sum a reduction over a
short inner axis. For 2-D operands of one shape that chain is exactly what
`nn.cross_entropy_with_logits(p, t)` means, `-sum(p * t) / N`, so `rewrite(fn)` replaces it by that
one binding (a multiply and one flat reduction; ir.runtime.specialize runs it as bare ufuncs). The
values equal the chain's to float rounding: the N*C products are summed in one pass instead of row
by row and then over rows.

Left as they are: other shapes (a class axis that is not the last of a 2-D pair, broadcasting
operands), integer or float16 dtypes, empty tensors, and any chain whose intermediate is read by
another binding or returned (its value must then exist).

>>> import numpy as np, tracer, ir
>>> p, t = tracer.spec((4, 3)), tracer.spec((4, 3))
>>> mod = tracer.trace(lambda p, t: -(t * tracer.log_softmax(p)).sum(axis=1).mean(), p, t)
>>> [b.value.op for b in rewrite(mod["main"]).bindings]
['nn.log_softmax', 'nn.cross_entropy_with_logits']
"""
from __future__ import annotations

from ..nodes import Call, Function, Var
from ..types import TensorType

_FLOATS = ("float32", "float64")


def rewrite(fn: Function) -> Function:
    """`fn` with each soft-target cross-entropy chain as one `nn.cross_entropy_with_logits` binding;
    `fn` itself when there is none (it is never modified)."""
    bindings = fn.bindings
    producer = {b.var: (i, b.value) for i, b in enumerate(bindings) if isinstance(b.value, Call)}
    uses = _use_counts(fn)
    replace, drop = {}, set()
    for i, b in enumerate(bindings):
        chain = _match(b.value, producer, uses)
        if chain is None:
            continue
        (p, t), interior = chain
        replace[i] = Call("nn.cross_entropy_with_logits", (p, t), {}, b.value.type)
        drop.update(interior)
    if not replace:
        return fn
    out = []
    for i, b in enumerate(bindings):
        if i in drop:
            continue
        out.append(type(b)(b.var, replace[i]) if i in replace else b)
    blocks = [type(fn.blocks[0])(out, fn.blocks[0].is_dataflow)]
    return Function(fn.params, blocks, fn.body, dict(fn.attrs))


def _use_counts(fn: Function) -> dict[Var, int]:
    """How often each var is read: by bindings (inline tuples and items included) and by the body."""
    counts: dict[Var, int] = {}

    def read(e) -> None:
        if isinstance(e, Var):
            counts[e] = counts.get(e, 0) + 1
        elif isinstance(e, Call):
            for a in e.args:
                read(a)
        elif hasattr(e, "fields"):
            for f in e.fields:
                read(f)
        elif hasattr(e, "tuple_value"):
            read(e.tuple_value)

    for b in fn.bindings:
        read(b.value)
    read(fn.body)
    return counts


def _single(var, producer, uses, op):
    """The (binding index, call) defining `var` when it is an `op` call read exactly once, else None."""
    if not isinstance(var, Var) or uses.get(var, 0) != 1:
        return None
    found = producer.get(var)
    return found if found is not None and found[1].op == op else None


def _match(call, producer, uses):
    """((p, t), interior binding indices) when `call` is negative(mean(sum(multiply(p, t), axis=1)))
    over 2-D float operands of one shape and dtype, else None."""
    if not isinstance(call, Call) or call.op != "negative" or not _scalar_float(call.type):
        return None
    mean = _single(call.args[0], producer, uses, "mean")
    if mean is None or mean[1].attrs.get("keepdims") or mean[1].attrs.get("axis") not in (None, (0,), (-1,)):
        return None
    total = _single(mean[1].args[0], producer, uses, "sum")
    if total is None or total[1].attrs.get("keepdims") or total[1].attrs.get("axis") not in ((1,), (-1,)):
        return None
    prod = _single(total[1].args[0], producer, uses, "multiply")
    if prod is None:
        return None
    p, t = prod[1].args
    tp, tt = p.type, t.type
    if not (isinstance(tp, TensorType) and isinstance(tt, TensorType) and tp.ndim == 2 and tp.shape == tt.shape
            and tp.dtype == tt.dtype == call.type.dtype and tp.dtype in _FLOATS and 0 not in tp.shape):
        return None
    return (p, t), (mean[0], total[0], prod[0])


def _scalar_float(t) -> bool:
    return isinstance(t, TensorType) and t.shape == () and t.dtype in _FLOATS


__all__ = ["rewrite"]
