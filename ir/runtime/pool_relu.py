"""relu's backward after max_pool2d's backward (or a convolution's input gradient), as one op (NumPy executor).

`max_pool2d(relu(x))`, the conv blocks of pytorch/examples' mnist and of most CNNs, differentiates into
`where(less_equal(r, 0), 0, grad.max_pool2d_backward(g, r))` with r = relu(x): relu's rule reads its own
output, which is the pool's input. `rewrite(fn)` replaces the three bindings by one
`grad.relu_max_pool2d_backward(g, r)`, whose kernel (ir.runtime.conv_kernels) applies the mask tap by tap
while it writes the pool's gradient: one pass over the (N, C, H, W) gradient and no bool mask of that size
instead of the pool's pass, the comparison's and the where's (on mnist's (64, 64, 24, 24) about 5 ms and 1,100
page faults a step). In the same way `where(less_equal(r, 0), 0, grad.conv2d_input_backward(g, w))` (the conv
after a relu) becomes `grad.relu_conv2d_input_backward(g, w, r)`, whose kernel writes the zeros into the
convolution's own result instead of a new array; and in the forward, `relu(add(conv2d(x, w), b))` (a conv layer,
its bias and relu) becomes `nn.conv2d_bias_relu(x, w, b)`, whose kernel adds the bias and takes the relu of
each chunk of the convolution's result while it is in cache. The values are the same, bit for bit: each op
means exactly the bindings it replaces.

Left as they are: a mask or pool gradient read by another binding or returned, a zero that is not a 0-d +0.0
of the gradient's dtype, a comparison of another array than the pool's input, dtypes other than float32/64.
"""
from __future__ import annotations

import numpy as np

from ..nodes import Call, Constant, Function, Var
from ..types import TensorType
from .cross_entropy import _use_counts

_FLOATS = ("float32", "float64")


def _zero(e, dtype) -> bool:
    """A 0-d constant +0.0 of `dtype`."""
    return (isinstance(e, Constant) and e.data.shape == () and str(e.data.dtype) == dtype and e.data == 0
            and not np.signbit(e.data))


# the gradient op a relu's where may follow -> (the fused op, the fused op's arguments from (its args, data));
# the max-pool reads the relu's output itself, the convolution only its weight (the where's mask says the rest)
_FUSED = {
    "grad.max_pool2d_backward": ("grad.relu_max_pool2d_backward", lambda args, data: args if args[1] is data
                                 else None),
    "grad.conv2d_input_backward": ("grad.relu_conv2d_input_backward", lambda args, data: (*args, data)),
}


def _match(call, producer, uses):
    """(fused call, interior binding indices) when `call` is where(less_equal(data, 0), 0, grad) with grad one of
    _FUSED's ops, both inner results read only here, else None."""
    if not isinstance(call, Call) or call.op != "where" or not isinstance(call.type, TensorType):
        return None
    dtype = call.type.dtype
    mask, zero, grad = call.args
    if dtype not in _FLOATS or not _zero(zero, dtype):
        return None
    found = [producer.get(v) if isinstance(v, Var) and uses.get(v, 0) == 1 else None for v in (mask, grad)]
    if None in found or found[0][1].op != "less_equal" or found[1][1].op not in _FUSED:
        return None
    (mi, less), (gi, inner) = found
    data = less.args[0]
    if not _zero(less.args[1], dtype) or inner.type != call.type or data.type != call.type:
        return None
    op, arguments = _FUSED[inner.op]
    args = arguments(inner.args, data)
    if args is None:
        return None
    return Call(op, tuple(args), dict(inner.attrs), call.type), (mi, gi)


_CONV_ATTRS = ("strides", "padding", "dilation", "groups")


def _match_forward(call, producer, uses):
    """(fused call, interior binding indices) when `call` is nn.relu(add(nn.conv2d(x, w), b)) with b of shape
    (1, O, 1, 1) and the convolution's and the sum's results read only there, else None."""
    if not isinstance(call, Call) or call.op != "nn.relu" or not isinstance(call.type, TensorType):
        return None
    t = call.type
    found = producer.get(call.args[0]) if uses.get(call.args[0], 0) == 1 else None
    if t.dtype not in _FLOATS or t.ndim != 4 or found is None or found[1].op != "add":
        return None
    (ai, add) = found
    for k in (0, 1):
        conv, bias = add.args[k], add.args[1 - k]
        inner = producer.get(conv) if isinstance(conv, Var) and uses.get(conv, 0) == 1 else None
        if (inner is not None and inner[1].op == "nn.conv2d" and inner[1].type == t == add.type
                and isinstance(bias.type, TensorType) and bias.type.shape == (1, t.shape[1], 1, 1)
                and bias.type.dtype == t.dtype):
            x, w = inner[1].args
            attrs = {a: inner[1].attrs[a] for a in _CONV_ATTRS if a in inner[1].attrs}
            return Call("nn.conv2d_bias_relu", (x, w, bias), attrs, t), (ai, inner[0])
    return None


def rewrite(fn: Function) -> Function:
    """`fn` with each relu backward after a max-pool's or a convolution's input gradient as one binding; `fn`
    itself when there is none (it is never modified)."""
    if len(fn.blocks) != 1:
        return fn
    bindings = fn.bindings
    producer = {b.var: (i, b.value) for i, b in enumerate(bindings) if isinstance(b.value, Call)}
    uses = _use_counts(fn)
    replace, drop = {}, set()
    for i, b in enumerate(bindings):
        found = _match(b.value, producer, uses) or _match_forward(b.value, producer, uses)
        if found is None:
            continue
        replace[i], interior = found
        drop.update(interior)
    if not replace:
        return fn
    out = [type(b)(b.var, replace[i]) if i in replace else b for i, b in enumerate(bindings) if i not in drop]
    blocks = [type(fn.blocks[0])(out, fn.blocks[0].is_dataflow)]
    return Function(fn.params, blocks, fn.body, dict(fn.attrs))


__all__ = ["rewrite"]
