"""Every error the nn and conv families promise: raised at once, naming the op, argument and shapes."""
import numpy as np
import pytest

import ir
import tracer as T
from ir import IRError, TensorType, Var


def _call(op, types, **attrs):
    return ir.make_call(op, [Var(f"a{i}", t) for i, t in enumerate(types)], attrs)


def f32(*shape):
    return TensorType(shape, "float32")


@pytest.mark.parametrize("op, types, attrs, message", [
    ("nn.softmax", [f32()], {}, "at least one dimension"),
    ("nn.softmax", [TensorType((3,), "int64")], {}, "must be a floating tensor"),
    ("nn.log_softmax", [f32(2, 3)], {"axis": 2}, "axis 2 out of range"),
    ("nn.layer_norm", [f32(2, 3, 4), f32(3), f32(3)], {"axes": [1]}, "must be the last 1 axes"),
    ("nn.layer_norm", [f32(2, 3), f32(4), f32(3)], {"axes": [-1]}, "argument gamma of shape (4,)"),
    ("nn.layer_norm", [f32(2, 3), f32(3), TensorType((3,), "float64")], {"axes": [-1]}, "share one dtype"),
    ("nn.layer_norm", [f32(2, 3), f32(3), f32(3)], {"axes": []}, "at least one axis"),
    ("nn.conv2d", [f32(1, 3, 5, 5), f32(4, 2, 3, 3)], {}, "expects 2 input channels"),
    ("nn.conv2d", [f32(1, 4, 5, 5), f32(3, 2, 3, 3)], {"groups": 2}, "groups=2 must divide"),
    ("nn.conv2d", [f32(1, 1, 2, 2), f32(1, 1, 3, 3)], {}, "does not fit argument data"),
    ("nn.conv2d", [f32(1, 1, 5, 5), f32(1, 1, 3, 3)], {"strides": [1]}, "strides must be 2 integers"),
    ("nn.conv2d", [f32(1, 1, 5, 5), f32(1, 1, 3, 3)], {"padding": [1, 1]}, "padding must be 4 integers"),
    ("nn.conv2d", [f32(1, 5, 5), f32(1, 1, 3, 3)], {}, "data must be NCHW"),
    ("nn.conv2d", [f32(1, 1, 5, 5), TensorType((1, 1, 3, 3), "float64")], {}, "share one dtype"),
    ("nn.max_pool2d", [f32(1, 1, 4, 4)], {"pool_size": [2, 2], "padding": [2, 0, 2, 0]}, "covers only padding"),
    ("nn.avg_pool2d", [f32(1, 1, 2, 2)], {"pool_size": [3, 3]}, "does not fit"),
    ("nn.avg_pool2d", [f32(4, 4)], {"pool_size": [2, 2]}, "must be NCHW"),
    ("nn.nll_loss", [f32(3, 4), f32(3)], {}, "targets must be an integer tensor"),
    ("nn.nll_loss", [f32(3, 4), TensorType((4,), "int64")], {}, "expected targets of shape (3,)"),
    ("nn.nll_loss", [f32(3, 4), TensorType((3,), "int64")], {"reduction": "avg"}, "reduction must be one of"),
    ("nn.cross_entropy_with_logits", [f32(3, 4), f32(4, 3)], {}, "must have one shape and dtype"),
    ("grad.nll_loss_backward", [f32(3), f32(3, 4), TensorType((3,), "int64")], {}, "must be R.Tensor((), "),
    ("grad.conv2d_input_backward", [f32(1, 1, 2, 2), f32(1, 1, 3, 3)], {"input_shape": (1, 1, 5, 5)},
     "output_grad of shape (1, 1, 2, 2) must have the conv2d output shape (1, 1, 3, 3)"),
    ("grad.conv2d_weight_backward", [f32(1, 1, 2, 2), f32(1, 1, 5, 5)], {"weight_shape": (1, 1, 3, 3)},
     "must have the conv2d output shape"),
    ("grad.max_pool2d_backward", [f32(1, 1, 3, 3), f32(1, 1, 4, 4)], {"pool_size": [2, 2], "strides": [2, 2]},
     "must have the pooled shape (1, 1, 2, 2)"),
    ("grad.avg_pool2d_backward", [f32(1, 1, 3, 3)], {"pool_size": [2, 2], "strides": [2, 2], "input_shape": (1, 1, 4, 4)},
     "must have the pooled shape"),
    ("grad.max_pool2d_gather", [f32(1, 1, 4, 3), f32(1, 1, 4, 4)], {"pool_size": [2, 2]}, "must have the shape of"),
])
def test_inference_errors(op, types, attrs, message):
    with pytest.raises(IRError, match=op.replace(".", r"\.") + ":") as info:
        _call(op, types, **attrs)
    assert message in str(info.value)


def test_nll_loss_target_out_of_range_is_not_a_silent_wrap():
    logp = T.tensor(np.zeros((2, 3), "float32"))
    with pytest.raises(IndexError, match="target -1 out of range for 3 classes"):
        T.nll_loss(logp, np.array([0, -1]))
    with pytest.raises(IndexError, match="target 3 out of range"):
        T.nll_loss(logp, np.array([3, 0]))


@pytest.mark.parametrize("kwargs, error, message", [
    ({"padding": (1, 2, 3)}, ValueError, "conv2d: padding must be an int, (pad_h, pad_w) or (top, left, bottom, right)"),
    ({"stride": 1.5}, ValueError, "conv2d: stride must be an int or a pair"),
    ({"groups": 2.0}, TypeError, "conv2d: groups must be an int"),
    ({"bias": np.zeros(3, "float32")}, ValueError, "conv2d: bias must have shape (2,)"),
])
def test_conv2d_argument_errors(kwargs, error, message):
    x, w = np.zeros((1, 1, 4, 4), "float32"), np.zeros((2, 1, 3, 3), "float32")
    with pytest.raises(error) as info:
        T.conv2d(T.tensor(x), T.tensor(w), **kwargs)
    assert message in str(info.value)


def test_pool_and_softmax_argument_errors():
    x = T.zeros((1, 1, 4, 4))
    with pytest.raises(ValueError, match="max_pool2d: kernel_size must be an int or a pair"):
        T.max_pool2d(x, (2, 2, 2))
    with pytest.raises(TypeError, match="softmax: axis must be an int"):
        T.softmax(x, axis=(0, 1))
    with pytest.raises(ValueError, match="layer_norm: x must have at least one dimension"):
        T.layer_norm(T.tensor(np.float32(1.0)))
