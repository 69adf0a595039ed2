"""The executor's generated straight-line function: same results and stats as the counting interpreter."""
import numpy as np
import pytest

import ir
import tracer
from autodiff import Gradient
from tests.cases import all_cases

CASES = all_cases()


def _same(a, b):
    if isinstance(a, tuple):
        assert isinstance(b, tuple) and len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            _same(x, y)
        return
    assert type(a) is type(b) and a.shape == b.shape and a.dtype == b.dtype
    np.testing.assert_array_equal(a, b)


def _twice(compiled, inputs):
    """The first call counts (interpreted), the second runs the generated function."""
    first = compiled(*inputs)
    peak = compiled.stats.peak_bytes
    compiled.stats.peak_bytes = -1
    second = compiled(*inputs)
    assert compiled.stats.peak_bytes == peak
    return first, second


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_generated_forward_and_adjoint_match_the_interpreter(case):
    mod = tracer.trace(lambda *xs: case.fn(*xs, **case.kwargs), *case.inputs)
    if case.grad and isinstance(mod["main"].body.type, ir.TensorType) and mod["main"].body.type.is_float:
        scalar = tracer.trace(lambda *xs: (case.fn(*xs, **case.kwargs) * 1.5).sum(), *case.inputs)
        floats = [p for p in scalar["main"].params if p.type.is_float]
        mod = ir.transform.cleanup()(Gradient("main", require_grads=floats)(scalar))
    ex = ir.Executor(mod)
    for name in mod.keys():
        if "random" in name:
            continue
        compiled = ex[name]
        first, second = _twice(compiled, case.inputs)
        if any(bd.value.op.startswith("random") for bd in mod[name].bindings if isinstance(bd.value, ir.Call)):
            continue  # fresh draws each call
        _same(first, second)


def test_source_is_straight_line_with_dels():
    mod = tracer.trace(lambda x, y: tracer.exp(x) * y + 1.0, tracer.spec((3,)), tracer.spec((3,)))
    src = ir.Executor(mod)["main"].source
    assert src.startswith("def main(v0, v1):")
    assert "for " not in src and "del v0" in src
    assert src.count("\n") == len(src.splitlines())


def test_a_new_argument_layout_is_counted_again():
    mod = tracer.trace(lambda x: (tracer.reshape(x, (6,)) * 2.0, x), tracer.spec((2, 3)))
    f = ir.Executor(mod)["main"]
    x = np.ones((2, 3), "float32")
    f(x)
    f(x)
    contiguous = f.stats.peak_bytes
    # a transposed argument: reshape copies, so more bytes are held; the fast path must not reuse the old count
    t = np.ones((3, 2), "float32").T
    np.testing.assert_array_equal(f(t)[0], np.full(6, 2.0, "float32"))
    assert f.stats.peak_bytes > contiguous
    f(t)
    assert f.stats.peak_bytes > contiguous
    # a slice of a bigger buffer counts that buffer
    big = np.ones((4, 3), "float32")[:2]
    f(big)
    assert f.stats.peak_bytes == contiguous + 24


def test_returned_constant_is_copied_on_the_fast_path():
    mod = tracer.trace(lambda x: (x, tracer.tensor(np.array([1.0, 2.0], "float32"))), tracer.spec((2,)))
    f = ir.Executor(mod)["main"]
    x = np.zeros(2, "float32")
    f(x)
    _, c = f(x)
    c[0] = 99.0
    assert f(x)[1][0] == 1.0


def test_a_scalar_result_nobody_reads():
    def f(x):
        x.sum()  # traced, never read: dropped right away
        return tracer.exp(x)
    mod = tracer.trace(f, tracer.spec((3,)))
    g = ir.Executor(mod)["main"]
    x = np.zeros(3, "float32")
    first, second = _twice(g, [x])
    _same(first, second)
