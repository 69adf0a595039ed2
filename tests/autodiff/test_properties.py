"""Property-based: random programs on random shapes, gradients against float64 finite differences."""
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import autodiff
import tracer

# Every op grows at most linearly, so values stay where float64 finite differences can resolve them
# (exp or squaring, composed six times, can reach 1e12, where a central difference is pure noise).
UNARY = [tracer.tanh, tracer.sin, tracer.sigmoid, lambda x: tracer.exp(tracer.tanh(x)), lambda x: x * tracer.tanh(x),
         lambda x: tracer.sqrt(x * x + 1.0), tracer.gelu, lambda x: -x, tracer.silu]
BINARY = [tracer.add, tracer.subtract, tracer.multiply, lambda a, b: a / (b * b + 1.0), tracer.maximum,
          lambda a, b: tracer.where(a > b, a * b, a - b)]


@st.composite
def programs(draw):
    ndim = draw(st.integers(0, 3))
    shape = tuple(draw(st.lists(st.integers(1, 3), min_size=ndim, max_size=ndim)))
    # the second input broadcasts: some of its dims are 1 and it may have fewer of them
    drop = draw(st.integers(0, ndim))
    other = tuple(1 if draw(st.booleans()) else d for d in shape[drop:])
    steps = draw(st.lists(st.tuples(st.booleans(), st.integers(0, 100)), min_size=1, max_size=6))
    reduce_axis = draw(st.one_of(st.none(), st.integers(-ndim, ndim - 1))) if ndim else None
    seed = draw(st.integers(0, 2**16))
    return shape, other, steps, reduce_axis, seed


def build(steps, reduce_axis):
    def f(a, b):
        h = a
        for binary, k in steps:
            h = BINARY[k % len(BINARY)](h, b) if binary else UNARY[k % len(UNARY)](h)
        if reduce_axis is not None:
            h = tracer.mean(h, axis=reduce_axis, keepdims=bool(reduce_axis % 2))
        return (h * h).sum()
    return f


@settings(max_examples=40, deadline=None)
@given(programs())
def test_random_programs_match_finite_differences(program):
    shape, other, steps, reduce_axis, seed = program
    rng = np.random.default_rng(seed)
    a = tracer.tensor(rng.uniform(-1.5, 1.5, shape))
    b = tracer.tensor(rng.uniform(-1.5, 1.5, other))
    # float64 throughout; maximum/where kinks are measure-zero for continuous random inputs
    assert autodiff.gradcheck(build(steps, reduce_axis), a, b, rtol=1e-4, atol=1e-6)
