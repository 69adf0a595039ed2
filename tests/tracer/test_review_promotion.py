"""Review findings in tracer promotion: weak operands (NumPy scalars, arrays, lists) take the tensors'
dtype only when that does not truncate them, eager and traced alike."""
import numpy as np
import pytest

import ir
import tracer


def _eager_and_traced(fn, x):
    eager = fn(tracer.tensor(x)).numpy()
    traced = ir.Executor(tracer.trace(fn, x), check_types=True)["main"](x)
    return eager, traced


@pytest.mark.parametrize("other, dtype, value", [
    (np.float32(2.5), "float32", 3.5),          # a NumPy float scalar with an int tensor: float, as torch
    (np.float16(2.5), "float32", 3.5),
    (np.array([2.5, 2.5]), "float32", 3.5),     # a float array with an int tensor: never truncated
    ([2.5, 2.5], "float32", 3.5),
])
def test_float_operand_makes_an_int_tensor_float(other, dtype, value):
    x = np.ones(2, "int32")
    for out in _eager_and_traced(lambda t: t + other, x):
        assert out.dtype == dtype and out.tolist() == [value, value]
    for out in _eager_and_traced(lambda t: other + t, x):
        assert out.dtype == dtype and out.tolist() == [value, value]


@pytest.mark.parametrize("other", [np.int64(2), np.int32(2), np.array([2, 2])])
def test_int_operand_makes_a_bool_tensor_int(other):
    x = np.array([True, False])
    for out in _eager_and_traced(lambda t: t + other, x):
        assert out.dtype == "int64" and out.tolist() == [3, 2]


def test_weak_operands_of_the_same_kind_take_the_tensor_dtype():
    x = np.ones(2, "float16")
    for out in _eager_and_traced(lambda t: t + np.float64(1.0) + np.ones(2) + [1.0, 1.0], x):
        assert out.dtype == "float16" and out.tolist() == [4.0, 4.0]


def test_scalars_alone_promote_to_one_dtype():
    cond = np.array([True, False])
    for out in _eager_and_traced(lambda c: tracer.where(c, 1.0, 0), cond):
        assert out.dtype == "float32" and out.tolist() == [1.0, 0.0]
    assert tracer.maximum(2, 3.5).dtype == "float32" and tracer.maximum(2, 3.5).item() == 3.5
    assert tracer.add(True, 2).dtype == "int64"
