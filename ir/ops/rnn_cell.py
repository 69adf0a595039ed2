"""The LSTM cell's elementwise step as one op: nn.lstm_cell(gates, c) -> (h', c') and its backward helper.

gates (B, 4H) is x W_ih^T + b_ih + h W_hh^T + b_hh in torch's order i, f, g, o; c (B, H) the cell state:
c' = sigmoid(f) * c + sigmoid(i) * tanh(g), h' = sigmoid(o) * tanh(c'). The matmuls stay BLAS calls outside;
this op replaces the ten elementwise bindings (split, three sigmoids, two tanhs, products, a sum) of every time
step, and its backward recomputes the activations from gates and c rather than keeping them: one pass each way.
"""
from __future__ import annotations

from ..types import TensorType, TupleType
from .common import require_float, same_dtype
from .registry import declare, tensor_arg


def _check(op, gates, c):
    require_float(op, gates, "gates")
    if gates.ndim != 2 or c.ndim != 2 or gates.shape[0] != c.shape[0] or gates.shape[1] != 4 * c.shape[1]:
        raise op.error(f"argument gates of shape {gates.shape} must be (B, 4H) for argument c of shape (B, H), "
                       f"got c of shape {c.shape}")


def _infer_cell(op, types):
    gates, c = tensor_arg(op, types, 0), tensor_arg(op, types, 1)
    dtype = same_dtype(op, types)
    _check(op, gates, c)
    return TupleType([TensorType(c.shape, dtype), TensorType(c.shape, dtype)])


def _activations(xp, gates, hidden):
    """(t, scale, si, sf, tg, so): one tanh over all 4H gate columns, t = tanh(gates * scale) with scale 1/2
    on the sigmoid gates (sigmoid(x) = (1 + tanh(x / 2)) / 2: 2.5x fewer passes than three sigmoids and a
    tanh; exact to float rounding in absolute terms, which is what the products below see)."""
    scale = xp.full(4 * hidden, 0.5, gates.dtype)
    scale[2 * hidden:3 * hidden] = 1
    t = xp.tanh(gates * scale)
    s = t * 0.5
    s += 0.5
    return t, scale, s[:, :hidden], s[:, hidden:2 * hidden], t[:, 2 * hidden:3 * hidden], s[:, 3 * hidden:]


def _lstm_cell(xp, gates, c):
    _, _, si, sf, tg, so = _activations(xp, gates, c.shape[1])
    c_new = sf * c
    c_new += si * tg
    h = xp.tanh(c_new)
    h *= so
    return h, c_new


def _infer_cell_backward(op, types):
    gates, c = tensor_arg(op, types, 0), tensor_arg(op, types, 1)
    dh, dc = tensor_arg(op, types, 2), tensor_arg(op, types, 3)
    dtype = same_dtype(op, types)
    _check(op, gates, c)
    if dh.shape != c.shape or dc.shape != c.shape:
        raise op.error(f"arguments h_grad {dh.shape} and c_grad {dc.shape} must have the shape of c {c.shape}")
    return TupleType([TensorType(gates.shape, dtype), TensorType(c.shape, dtype)])


def _lstm_cell_backward(xp, gates, c, dh, dc):
    """(d gates, d c) from the output gradients (dh', dc'), the activations recomputed: each gate's output-side
    factor written into its block, then one multiply by every gate's derivative, (1 - t^2) * scale^2 (a
    sigmoid's s (1 - s) is (1 - t^2) / 4)."""
    h4 = c.shape[1]
    t, scale, si, sf, tg, so = _activations(xp, gates, h4)
    tc = sf * c
    tc += si * tg
    xp.tanh(tc, out=tc)
    dct = tc * tc
    xp.subtract(1, dct, out=dct)
    dct *= so
    dct *= dh
    dct += dc  # dL/dc' in all: the incoming dc' and dh' through h' = so tanh(c')
    d = xp.empty(gates.shape, gates.dtype)
    xp.multiply(dct, tg, out=d[:, :h4])
    xp.multiply(dct, c, out=d[:, h4:2 * h4])
    xp.multiply(dct, si, out=d[:, 2 * h4:3 * h4])
    xp.multiply(dh, tc, out=d[:, 3 * h4:])
    t *= t
    xp.subtract(1, t, out=t)
    t *= scale * scale
    d *= t
    dct *= sf
    return d, dct


def _infer_transpose_copy(op, types):
    x = tensor_arg(op, types, 0)
    if x.ndim != 2:
        raise op.error(f"argument x must be 2-D, got {x}")
    return TensorType((x.shape[1], x.shape[0]), x.dtype)


def _transpose_copy(xp, x):
    """x.T as an array of its own in C order: an RNN's W_hh^T, read by every time step's h @ W_hh^T (BLAS
    takes a small-M product 1.6x faster from a C-ordered right operand than from the transposed view)."""
    return xp.ascontiguousarray(x.T)


declare("nn.lstm_cell", ("gates", "c"), infer=_infer_cell, kernel=_lstm_cell)
# made by ir.runtime.weight_layout from permute_dims(w, (1, 0)) after differentiation: no VJP
declare("layout.transpose_copy", ("x",), infer=_infer_transpose_copy, kernel=_transpose_copy, differentiable=False)
# differentiable again: its VJP (autodiff/rules/rnn_cell.py) is written with primitives
declare("grad.lstm_cell_backward", ("gates", "c", "h_grad", "c_grad"), infer=_infer_cell_backward,
        kernel=_lstm_cell_backward)
