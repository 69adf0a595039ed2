"""Helpers of the optimize() pass and kernel tests: a cleaned-up adjoint of a traced function, and its op names."""
import numpy as np

import ir
import tracer
from autodiff import Gradient


def ops(fn) -> list[str]:
    return [b.value.op for b in fn.bindings if isinstance(b.value, ir.Call)]


def adjoint(fn, *args) -> ir.IRModule:
    """main and the cleaned-up main_adjoint of fn, differentiated with respect to its float arguments; its
    ops stay ops when fusion is on (TRACEGRAD_FUSE=1), as optimize() sees them."""
    mod = tracer.trace(fn, *args)
    params = [p for p in mod["main"].params if p.type.is_float]
    return ir.transform.Unfuse()(ir.transform.cleanup()(Gradient("main", require_grads=params)(mod)))


def weighted_adjoint(fn, ins, rng) -> ir.IRModule:
    """The cleaned-up adjoint module of sum(fn(*ins) * r), r drawn once from `rng`: every input's gradient is
    non-trivial."""
    out_shape = np.shape(fn(*[tracer.tensor(a) for a in ins]).numpy())
    r = rng.standard_normal(out_shape)

    def loss(*xs):
        y = fn(*xs)
        return (y * tracer.tensor(r.astype(y.dtype))).sum()
    mod = tracer.trace(loss, *ins)
    params = [p for p in mod["main"].params if p.type.is_float]
    return ir.transform.cleanup()(Gradient("main", require_grads=params)(mod))
