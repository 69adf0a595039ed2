"""Which values lie inside checkpoint regions."""
import numpy as np

import autodiff
import ir
import tracer
from ir.analysis import checkpoint_interior


def _interior_ops(mod):
    bindings = mod["main"].bindings
    inside = checkpoint_interior(bindings)
    return [b.value.op for b in bindings if b.var in inside]


def test_region_values_are_interior_and_markers_are_kept():
    def f(x):
        with tracer.checkpoint():
            h = tracer.tanh(x * 2.0)
        return (h * h).sum()
    assert _interior_ops(tracer.trace(f, tracer.spec((3,)))) == ["multiply", "tanh"]


def test_reads_of_a_region_input_after_the_region_are_not_interior():
    # grad inside a trace inlines a backward pass that reads the region's inputs after it closed
    def inner(x):
        with tracer.checkpoint():
            h = tracer.sin(x) * x
        return h.sum()

    def outer(x):
        return (autodiff.grad(inner, wrt=x)(x) ** 2.0).sum()
    mod = tracer.trace(outer, tracer.spec((3,), "float64"))
    bindings = mod["main"].bindings
    last_end = max(i for i, b in enumerate(bindings)
                   if isinstance(b.value, ir.Call) and b.value.op == "grad.end_checkpoint")
    inside = checkpoint_interior(bindings)
    assert inside and not any(b.var in inside for b in bindings[last_end + 1:])
    x = tracer.tensor(np.array([0.2, -0.7, 1.1]))
    assert autodiff.gradcheck(outer, x)
