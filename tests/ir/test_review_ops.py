"""Review findings in op inference and kernels: what inference accepts, the kernel must run and return
the promised type; what it cannot run must be refused by inference, naming the op and the argument."""
import numpy as np
import pytest

import ir
import tracer
from ir import TensorType, Var, make_call


def run(op, arrays, **attrs):
    """Inference, then the kernel, checking the kernel returns exactly the inferred type."""
    call = make_call(op, [Var(f"a{i}", TensorType(a.shape, str(a.dtype))) for i, a in enumerate(arrays)], attrs)
    out = np.asarray(ir.get_op(op).kernel(np, *arrays, **call.attrs))
    assert (out.shape, str(out.dtype)) == (call.type.shape, call.type.dtype)
    return out


@pytest.mark.parametrize("op", ["negative", "subtract", "divide", "power"])
def test_bool_arithmetic_numpy_cannot_do_is_refused_by_inference(op):
    x = Var("x", TensorType((2,), "bool"))
    with pytest.raises(ir.IRError, match=rf"^{op}: .*bool.*astype"):
        make_call(op, [x] * len(ir.get_op(op).inputs))


@pytest.mark.parametrize("op, expected", [("add", [True, True]), ("multiply", [True, False]),
                                          ("maximum", [True, True]), ("minimum", [True, False])])
def test_bool_arithmetic_numpy_can_do_still_works(op, expected):
    assert run(op, [np.array([True, True]), np.array([True, False])]).tolist() == expected


def test_int64_division_truncates_exactly():
    a = np.array([2**62 + 1, -7, 7, -7, 6], "int64")
    b = np.array([1, 2, -2, -2, 3], "int64")
    assert run("divide", [a, b]).tolist() == [2**62 + 1, -3, -3, 3, 2]  # float division lost the +1


@pytest.mark.parametrize("indices", [[-4], [3], [0, 5]])
def test_take_out_of_range_raises_instead_of_wrapping(indices):
    x = np.arange(3, dtype="float32")
    with pytest.raises(IndexError, match=r"take: index -?\d+ is out of range for axis 0 of size 3"):
        run("take", [x, np.array(indices)], axis=0)
    with pytest.raises(IndexError, match="out of range"):
        tracer.tensor(x)[indices]


def test_take_from_an_empty_axis_with_no_indices_is_empty():
    assert run("take", [np.zeros((0, 2), "float32"), np.zeros((0,), "int64")], axis=0).shape == (0, 2)


@pytest.mark.parametrize("op", ["nn.softmax", "nn.log_softmax"])
def test_softmax_over_an_empty_axis_is_empty(op):
    assert run(op, [np.zeros((0, 3), "float32")], axis=0).shape == (0, 3)
    assert run(op, [np.zeros((2, 0), "float16")], axis=-1).shape == (2, 0)


@pytest.mark.parametrize("data, weight", [((0, 3, 5, 5), (4, 3, 3, 3)), ((2, 3, 5, 5), (0, 3, 3, 3)),
                                          ((0, 4, 5, 5), (2, 2, 3, 3))])
def test_conv2d_with_an_empty_batch_or_no_filters(data, weight):
    groups = data[1] // weight[1]
    x, w = np.ones(data, "float32"), np.ones(weight, "float32")
    y = run("nn.conv2d", [x, w], groups=groups)
    g = np.ones(y.shape, "float32")
    run("grad.conv2d_input_backward", [g, w], groups=groups, input_shape=data)
    run("grad.conv2d_weight_backward", [g, x], groups=groups, weight_shape=weight)


def test_max_pool_backward_with_an_empty_batch():
    x = np.ones((0, 2, 4, 4), "float32")
    y = run("nn.max_pool2d", [x], pool_size=(2, 2))
    run("grad.max_pool2d_backward", [np.ones(y.shape, "float32"), x], pool_size=(2, 2))
    run("grad.max_pool2d_gather", [x, x], pool_size=(2, 2))


def test_strided_slice_of_a_0d_tensor_names_the_axis():
    x = Var("x", TensorType(()))
    with pytest.raises(ir.IRError, match="strided_slice: axes entry 0 out of range for a tensor of 0 dim"):
        make_call("strided_slice", [x], dict(axes=[0], begin=[0], end=[1], strides=[1]))


@pytest.mark.parametrize("attrs", [dict(axis=[0.5]), dict(axis=[True])])
def test_integer_attributes_refuse_floats_and_bools(attrs):
    x = Var("x", TensorType((2, 3)))
    with pytest.raises(TypeError, match="sum: attribute axis expects axes"):
        make_call("sum", [x], attrs)
    with pytest.raises(TypeError, match="reshape: attribute shape expects shape"):
        make_call("reshape", [x], dict(shape=(2.5, 3)))
    with pytest.raises(TypeError, match="nn.softmax: attribute axis expects int"):
        make_call("nn.softmax", [x], dict(axis=1.0))


def test_integer_attributes_take_numpy_integers():
    x = Var("x", TensorType((2, 3)))
    assert make_call("reshape", [x], dict(shape=(np.int64(3), np.int32(2)))).type.shape == (3, 2)


def test_full_keeps_large_integer_fill_values_exact():
    assert tracer.full((1,), 2**62 + 1, "int64").numpy().tolist() == [2**62 + 1]
    x = tracer.tensor(np.zeros(1, "int64"))
    assert tracer.full_like(x, 2**62 + 1).numpy().tolist() == [2**62 + 1]
