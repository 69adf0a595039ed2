"""Review findings in the executor: results never alias the compiled constants, and Python values
(scalars, lists), which carry no dtype of their own, are taken in the parameter's dtype."""
import numpy as np
import pytest

import ir
import tracer


def test_writing_into_a_result_does_not_change_the_next_call():
    def fn(x):
        c = tracer.tensor([1.0, 2.0])
        return c, tracer.reshape(c, (2, 1)), tracer.stop_gradient(tracer.tensor([3.0])), x
    mod = tracer.trace(fn, tracer.spec((2,)))
    run = ir.Executor(mod)["main"]
    x = np.zeros(2, "float32")
    first = run(x)
    for out in first[:3]:
        out[...] = 100.0
    again = run(x)
    assert again[0].tolist() == [1.0, 2.0] and again[1].tolist() == [[1.0], [2.0]] and again[2].tolist() == [3.0]
    assert "R.const([1.0, 2.0]" in str(mod)  # the module's own constant is untouched too
    assert first[3] is x  # an argument handed back is still the caller's own array, not a copy


@pytest.mark.parametrize("arg, expected", [([1.0, 2.0], [2.0, 4.0]), ([1, 2], [2.0, 4.0]), ((1.5, 2), [3.0, 4.0])])
def test_python_lists_take_the_parameter_dtype(arg, expected):
    run = ir.Executor(tracer.trace(lambda x: x * 2, tracer.spec((2,))))["main"]
    out = run(arg)
    assert out.dtype == "float32" and out.tolist() == expected


def test_python_scalars_take_the_parameter_dtype():
    run = ir.Executor(tracer.trace(lambda x: x * 2, tracer.spec((), "float16")))["main"]
    assert run(1.5).dtype == "float16" and run(1.5).tolist() == 3.0
    run = ir.Executor(tracer.trace(lambda x: x * 2, tracer.spec((), "int32")))["main"]
    assert run(3).dtype == "int32" and run(3).tolist() == 6


@pytest.mark.parametrize("arg, spec, message", [
    (1.5, tracer.spec((), "int32"), "a Python float cannot be an int32 argument"),   # would truncate
    ([1.0, 2.0], tracer.spec((3,)), r"expects shape \(3,\) and dtype float32, got shape \(2,\)"),
    (None, tracer.spec((2,)), "expects an array of shape \\(2,\\) and dtype float32, got NoneType"),
    (2**40, tracer.spec((), "int32"), "does not fit int32"),
])
def test_python_values_that_do_not_fit_are_refused(arg, spec, message):
    run = ir.Executor(tracer.trace(lambda x: x + x, spec))["main"]
    with pytest.raises((TypeError, ValueError), match=message):
        run(arg)


def test_numpy_arrays_keep_their_strict_dtype_check():
    run = ir.Executor(tracer.trace(lambda x: x * 2, tracer.spec((2,))))["main"]
    with pytest.raises(ValueError, match="dtype float32, got shape \\(2,\\) and dtype float64"):
        run(np.ones(2))


def test_nested_tuple_results_holding_a_constant_are_copied():
    x = ir.Var("x", ir.TensorType((2,)))
    b = ir.Builder()
    inner = b.tuple([x, ir.const([1.0, 2.0])])
    outer = b.tuple([inner, x])
    run = ir.Executor(ir.IRModule({"main": b.function([x], outer)}))["main"]
    (_, c), _ = run(np.zeros(2, "float32"))
    c[0] = 100.0
    assert run(np.zeros(2, "float32"))[0][1].tolist() == [1.0, 2.0]
