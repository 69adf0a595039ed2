"""VJP rules of padding (ir/ops/resample.py): nn.pad and its adjoint, each linear in its tensor."""
from __future__ import annotations

from .registry import register_vjp


@register_vjp("nn.pad")
def nn_pad_vjp(b, call, out, g):
    """Forward: y = pad(data) (constant: a border of pad_value; otherwise each position a copy of one input)
    Backward: ddata = pad_backward(g): the crop of g (constant), or every copy's g summed back"""
    (data,) = call.args
    return [b.call("grad.pad_backward", g, pad_width=call.attrs["pad_width"], pad_mode=call.attrs["pad_mode"],
                   input_shape=data.type.shape)]


@register_vjp("grad.pad_backward")
def grad_pad_backward_vjp(b, call, out, g):
    """Forward: y = pad_backward(output_grad) (the adjoint of pad, linear)
    Backward: doutput_grad = pad(g) with a zero border"""
    return [b.call("nn.pad", g, pad_width=call.attrs["pad_width"], pad_mode=call.attrs["pad_mode"], pad_value=0.0)]
