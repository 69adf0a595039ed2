"""VJP rules of the conv family: conv2d, conv3d, pooling, and their backward helpers.

conv2d is bilinear in (data, weight) and the pooling gradients are linear in the output gradient,
so every backward helper has a VJP made of the same few ops: second-order gradients work.
"""
from __future__ import annotations

from .registry import register_vjp

_CONV = ("strides", "padding", "dilation", "groups")
_POOL = ("pool_size", "strides", "padding", "dilation", "ceil_mode")
_AVG = _POOL + ("count_include_pad",)


def _attrs(call, names):
    return {k: call.attrs[k] for k in names}


# ---------------------------------------------------------------- conv2d, conv3d


def _conv_ops(call):
    """(conv, input_backward, weight_backward) of the call's dimensionality."""
    nd = "3d" if "conv3d" in call.op else "2d"
    return f"nn.conv{nd}", f"grad.conv{nd}_input_backward", f"grad.conv{nd}_weight_backward"


@register_vjp("nn.conv3d")
@register_vjp("nn.conv2d")
def nn_conv2d_vjp(b, call, out, g):
    """Forward: y = conv2d(data, weight) (conv3d alike)
    Backward: ddata = conv2d_input_backward(g, weight), dweight = conv2d_weight_backward(g, data)"""
    data, weight = call.args
    _, input_backward, weight_backward = _conv_ops(call)
    attrs = _attrs(call, _CONV)
    return [b.call(input_backward, g, weight, input_shape=data.type.shape, **attrs),
            b.call(weight_backward, g, data, weight_shape=weight.type.shape, **attrs)]


@register_vjp("grad.conv3d_input_backward")
@register_vjp("grad.conv2d_input_backward")
def grad_conv2d_input_backward_vjp(b, call, out, g):
    """Forward: y = conv2d_input_backward(output_grad, weight) (the adjoint of conv2d(., weight); the transposed conv)
    Backward: doutput_grad = conv2d(g, weight), dweight = conv2d_weight_backward(output_grad, g)"""
    output_grad, weight = call.args
    conv, _, weight_backward = _conv_ops(call)
    attrs = _attrs(call, _CONV)
    # <g, y> = <conv2d(g, weight), output_grad>, bilinear in (g, weight)
    return [b.call(conv, g, weight, **attrs),
            b.call(weight_backward, output_grad, g, weight_shape=weight.type.shape, **attrs)]


@register_vjp("grad.conv3d_weight_backward")
@register_vjp("grad.conv2d_weight_backward")
def grad_conv2d_weight_backward_vjp(b, call, out, g):
    """Forward: y = conv2d_weight_backward(output_grad, data) (the adjoint of conv2d(data, .))
    Backward: doutput_grad = conv2d(data, g), ddata = conv2d_input_backward(output_grad, g)"""
    output_grad, data = call.args
    conv, input_backward, _ = _conv_ops(call)
    attrs = _attrs(call, _CONV)
    # <g, y> = <conv2d(data, g), output_grad>, bilinear in (data, g)
    return [b.call(conv, data, g, **attrs),
            b.call(input_backward, output_grad, g, input_shape=data.type.shape, **attrs)]


# ---------------------------------------------------------------- pooling


@register_vjp("nn.max_pool2d")
def nn_max_pool2d_vjp(b, call, out, g):
    """Forward: y = max over each window of data
    Backward: ddata = max_pool2d_backward(g, data): g to the first maximum of each window (its last NaN)"""
    (data,) = call.args
    return [b.call("grad.max_pool2d_backward", g, data, **_attrs(call, _POOL))]


@register_vjp("grad.max_pool2d_backward")
def grad_max_pool2d_backward_vjp(b, call, out, g):
    """Forward: y = output_grad scattered to the argmax of each window of data (linear in output_grad)
    Backward: doutput_grad = max_pool2d_gather(g, data), none to data (piecewise constant in it)"""
    _, data = call.args
    return [b.call("grad.max_pool2d_gather", g, data, **_attrs(call, _POOL)), None]


@register_vjp("grad.max_pool2d_gather")
def grad_max_pool2d_gather_vjp(b, call, out, g):
    """Forward: y = x read at the argmax of each window of data (linear in x)
    Backward: dx = max_pool2d_backward(g, data), none to data (piecewise constant in it)"""
    _, data = call.args
    return [b.call("grad.max_pool2d_backward", g, data, **_attrs(call, _POOL)), None]


@register_vjp("nn.avg_pool2d")
def nn_avg_pool2d_vjp(b, call, out, g):
    """Forward: y = sum over each window of data / the window's divisor (its taps, padding counted or not)
    Backward: ddata = avg_pool2d_backward(g): g / the divisor to every tap of the window"""
    (data,) = call.args
    return [b.call("grad.avg_pool2d_backward", g, input_shape=data.type.shape, **_attrs(call, _AVG))]


@register_vjp("grad.avg_pool2d_backward")
def grad_avg_pool2d_backward_vjp(b, call, out, g):
    """Forward: y = avg_pool2d_backward(output_grad) (the adjoint of avg_pool2d, linear)
    Backward: doutput_grad = avg_pool2d(g)"""
    return [b.call("nn.avg_pool2d", g, **_attrs(call, _AVG))]


from . import resample  # noqa: E402,F401  (padding's rules; importing conv registers them)
