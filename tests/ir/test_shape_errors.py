"""Shape and dtype errors of the reduction, linalg, manipulate and create ops: each names the op, the
argument and the shapes involved."""
import numpy as np
import pytest

import ir
import tracer
from ir import TensorType, Var, make_call


def v(*shape, dtype="float32"):
    return Var("x", TensorType(shape, dtype))


def _fails(op, args, attrs, *fragments):
    with pytest.raises(ir.IRError) as info:
        make_call(op, args, attrs)
    message = str(info.value)
    assert message.startswith(f"{op}: "), message
    for f in fragments:
        assert f in message, (f, message)


@pytest.mark.parametrize("op, args, attrs, fragments", [
    ("sum", [v(2, 3)], {"axis": [2]}, ["axis 2 out of range for a tensor of 2 dimension(s)"]),
    ("sum", [v(2, 3)], {"axis": [1, -1]}, ["repeated axis"]),
    ("sum", [v(2, dtype="bool")], {}, ["must be numeric, got dtype bool"]),
    ("mean", [v(2, dtype="int32")], {}, ["argument x must be a floating tensor, got dtype int32"]),
    ("variance", [v(2, dtype="int64")], {}, ["floating tensor"]),
    ("max", [v(0, 3)], {"axis": [0]}, ["shape (0, 3)", "empty axis"]),
    ("argmax", [v(2, 0)], {"axis": 1}, ["shape (2, 0)", "empty axis"]),
    ("argmax", [v(2, 3)], {"axis": -3}, ["axis -3 out of range"]),
    ("matmul", [v(2, 3), v(4, 5)], {}, ["x1 of shape (2, 3) and x2 of shape (4, 5)", "3 vs 4"]),
    ("matmul", [v(2, 3, 4), v(5, 4, 2)], {}, ["x1 of shape (2, 3, 4) and x2 of shape (5, 4, 2)", "(2,) and (5,)"]),
    ("matmul", [v(), v(3)], {}, ["x1 of shape () and x2 of shape (3,)", "at least one dimension"]),
    ("matmul", [v(3), v(3, dtype="float64")], {}, ["x1: float32, x2: float64"]),
    ("reshape", [v(2, 3)], {"shape": (4, 2)}, ["x of shape (2, 3) (6 elements) into shape (4, 2) (8 elements)"]),
    ("reshape", [v(2, 3)], {"shape": (-1, 2)}, ["negative dimension"]),
    ("permute_dims", [v(2, 3, 4)], {"axes": (0, 0, 1)}, ["axes [0, 0, 1] is not a permutation of the 3 axes"]),
    ("permute_dims", [v(2, 3)], {"axes": (0,)}, ["not a permutation"]),
    ("broadcast_to", [v(2, 3)], {"shape": (3, 3)}, ["cannot broadcast x of shape (2, 3) to shape (3, 3)"]),
    ("broadcast_to", [v(2, 3)], {"shape": (3,)}, ["shape (2, 3) to shape (3,)"]),
    ("collapse_sum_to", [v(2, 3)], {"shape": (2,)}, ["shape (2,) does not broadcast to data of shape (2, 3)"]),
    ("expand_dims", [v(2)], {"axis": [0, 0]}, ["repeated axis"]),
    ("expand_dims", [v(2)], {"axis": [2]}, ["axis 2 out of range for a tensor of 2 dimension(s)"]),
    ("squeeze", [v(1, 3)], {"axis": [1]}, ["cannot squeeze axis 1 of x of shape (1, 3): its size is 3, not 1"]),
    ("split", [v(5, 2)], {"indices_or_sections": [3, 1]}, ["[3, 1] must be non-decreasing", "shape (5, 2)"]),
    ("split", [v(5, 2)], {"indices_or_sections": [6]}, ["within 0..5"]),
    ("split", [v()], {"indices_or_sections": [0]}, ["0-d"]),
    ("strided_slice", [v(4)], {"axes": [0], "begin": [-1], "end": [4], "strides": [1]},
     ["axis 0: begin -1, end 4, stride 1 is not a normalized slice of a dimension of size 4"]),
    ("strided_slice", [v(4)], {"axes": [0], "begin": [0], "end": [-1], "strides": [1]}, ["not a normalized slice"]),
    ("strided_slice", [v(4)], {"axes": [0], "begin": [4], "end": [0], "strides": [-1]}, ["begin 4, end 0"]),
    ("strided_slice", [v(4)], {"axes": [0], "begin": [0], "end": [2], "strides": [0]}, ["stride 0"]),
    ("strided_slice", [v(4, 2)], {"axes": [0, 1], "begin": [0], "end": [2], "strides": [1]},
     ["one entry per sliced axis"]),
    ("grad.strided_slice_backward", [v(3)], {"shape": (4,), "axes": [0], "begin": [0], "end": [2], "strides": [1]},
     ["data of shape (3,) does not match the slice of shape (2,) taken from (4,)"]),
    ("take", [v(3, 2), v(2)], {"axis": 0}, ["indices must be int32 or int64 (or a narrower integer), got float32"]),
    ("take", [v(3, 2), v(2, dtype="int64")], {"axis": 2}, ["axis 2 out of range"]),
    ("take", [v(), v(2, dtype="int64")], {}, ["0-d"]),
    ("grad.take_backward", [v(2, 3), v(4, dtype="int64")], {"shape": (5, 3), "axis": 0},
     ["data of shape (2, 3) does not match take from shape (5, 3) with indices of shape (4,)", "(4, 3)"]),
    ("tril", [v(3)], {}, ["x must have at least 2 dimensions, got shape (3,)"]),
    ("zeros", [], {"shape": (2, -1)}, ["shape (2, -1) has a negative dimension"]),
])
def test_inference_errors(op, args, attrs, fragments):
    _fails(op, args, attrs, *fragments)


def test_tuple_input_errors():
    _fails("concat", [ir.Tuple([v(2, 3), v(2, 4)])], {"axis": 0},
           "tensors[1] of shape (2, 4) does not match tensors[0] of shape (2, 3) outside axis 0")
    _fails("concat", [ir.Tuple([v(2), v(2, dtype="int64")])], {}, "share one dtype", "float32", "int64")
    _fails("concat", [ir.Tuple([v(), v()])], {}, "0-d")
    _fails("concat", [ir.Tuple([])], {}, "at least one tensor")
    _fails("stack", [ir.Tuple([v(2, 3), v(3, 2)])], {}, "tensors[1] of shape (3, 2) differs from tensors[0] of "
           "shape (2, 3)")
    _fails("stack", [ir.Tuple([v(2), v(2)])], {"axis": 2}, "axis 2 out of range")


def test_attribute_kind_errors():
    with pytest.raises(TypeError, match="keepdims expects bool"):
        make_call("sum", [v(2)], {"keepdims": 1})
    with pytest.raises(TypeError, match="missing attribute shape"):
        make_call("reshape", [v(2)], {})


def test_tracer_surfaces_the_same_errors():
    a, b = tracer.zeros((2, 3)), tracer.zeros((4, 5))
    with pytest.raises(ValueError, match=r"matmul: x1 of shape \(2, 3\) and x2 of shape \(4, 5\)"):
        a @ b
    with pytest.raises(ValueError, match=r"matmul: x1 of shape \(2, 3\) and x2 of shape \(4, 5\)"):
        tracer.trace(lambda x, y: x @ y, tracer.spec((2, 3)), tracer.spec((4, 5)))
    with pytest.raises(ValueError, match=r"sum: axis 2 out of range"):
        a.sum(axis=2)


def test_tracer_argument_errors():
    x = tracer.zeros((2, 3))
    with pytest.raises(ValueError, match=r"reshape: cannot reshape x of shape \(2, 3\) \(6 elements\) into "
                                         r"\(4, -1\)"):
        x.reshape(4, -1)
    with pytest.raises(ValueError, match="one -1"):
        x.reshape(-1, -1)
    with pytest.raises(ValueError, match=r"reshape: cannot reshape x of shape \(2, 3\) \(6 elements\) into shape "
                                         r"\(4, 2\)"):
        x.reshape(4, 2)
    with pytest.raises(ValueError, match="split: axis 1 of size 3 does not divide into 2 equal sections"):
        tracer.split(x, 2, axis=1)
    with pytest.raises(ValueError, match="split: indices .* must be increasing"):
        tracer.split(x, [2, 1], axis=1)
    with pytest.raises(ValueError, match="transpose: axis 2 out of range for a tensor of 2"):
        x.transpose(0, 2)
    with pytest.raises(ValueError, match="split: cannot split a 0-d tensor"):
        tracer.split(tracer.tensor(np.float32(1)), 1)
