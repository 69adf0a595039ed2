"""Review findings in the Tensor surface: tracer.tensor of a traced value, np.array copies, and float
axes or sizes, which must be refused rather than truncated."""
import numpy as np
import pytest

import ir
import tracer


def test_tensor_of_a_traced_tensor_is_that_value():
    x = np.arange(3, dtype="float32")
    same = ir.Executor(tracer.trace(lambda t: tracer.tensor(t) + 1, x))["main"](x)
    assert same.tolist() == [1.0, 2.0, 3.0]
    cast = ir.Executor(tracer.trace(lambda t: tracer.tensor(t, "float64"), x))["main"](x)
    assert cast.dtype == "float64" and cast.tolist() == [0.0, 1.0, 2.0]  # was a 0-d NaN constant


@pytest.mark.parametrize("call, message", [
    (lambda x: x.sum(axis=0.9), "sum: attribute axis expects axes"),          # was axis 0
    (lambda x: x.sum(axis=(1.5,)), "sum: attribute axis expects axes"),
    (lambda x: tracer.zeros((2.7,)), "zeros: attribute shape expects shape"),  # was shape (2,)
    (lambda x: x.reshape(3.0, 2), "reshape: attribute shape expects shape"),
    (lambda x: tracer.expand_dims(x, 0.5), "expand_dims: attribute axis expects ints"),
    (lambda x: tracer.transpose(x, 0.5, 1), "transpose: dim0 must be an int, got 0.5"),
])
def test_float_axes_and_sizes_are_refused_not_truncated(call, message):
    with pytest.raises(TypeError, match=message):
        call(tracer.tensor(np.zeros((2, 3), "float32")))


def test_axes_and_sizes_take_numpy_integers_and_ranges():
    x = tracer.tensor(np.ones((2, 3), "float32"))
    assert x.sum(axis=np.int64(1)).shape == (2,) and x.sum(axis=range(2)).shape == ()
    assert tracer.zeros(np.array([2, 3])).shape == (2, 3) and x.reshape(np.int32(3), 2).shape == (3, 2)


def test_spec_and_tensor_type_refuse_float_dimensions():
    with pytest.raises(TypeError, match=r"shape \(2.5,\) must be a sequence of ints"):
        tracer.spec((2.5,))
    with pytest.raises(TypeError, match="must be a sequence of ints"):
        ir.TensorType((2, True))
    assert tracer.spec((np.int64(2),)).shape == (2,)


def test_np_array_of_a_tensor_is_a_copy():
    t = tracer.tensor([1.0, 2.0])
    np.array(t)[0] = 5.0
    np.array(t, dtype="float32")[1] = 7.0
    assert t.numpy().tolist() == [1.0, 2.0]
    assert np.asarray(t) is t.numpy()  # asarray may share, as for an ndarray
    assert np.array(t, dtype="float64").dtype == "float64"


def test_a_tensor_made_in_one_trace_is_captured_by_the_next():
    made = {}

    def first(x):
        made["w"] = tracer.tensor([1.0, 2.0])
        return x + made["w"]
    assert [p.name for p in tracer.trace(first, tracer.spec((2,)))["main"].params] == ["x"]  # a constant there
    second = tracer.trace(lambda x: x * made["w"], tracer.spec((2,)))
    assert len(second["main"].params) == 2  # a parameter here, fed its current value each call
    import autodiff  # the gradient with respect to it was silently zero while it was a baked constant
    g = autodiff.grad(lambda x: (x * made["w"]).sum(), wrt=made["w"])(tracer.tensor([3.0, 4.0]))
    assert g.numpy().tolist() == [3.0, 4.0]
