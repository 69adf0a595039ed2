"""The LSTM cell's elementwise step as one op: nn.lstm_cell(gates, c) -> (h', c') and its backward helper.

gates (B, 4H) is x W_ih^T + b_ih + h W_hh^T + b_hh in torch's order i, f, g, o; c (B, H) the cell state:
c' = sigmoid(f) * c + sigmoid(i) * tanh(g), h' = sigmoid(o) * tanh(c'). The matmuls stay BLAS calls outside;
this op replaces the ten elementwise bindings (split, three sigmoids, two tanhs, products, a sum) of every time
step, and its backward recomputes the activations from gates and c rather than keeping them: one pass each way.
"""
from __future__ import annotations

from ..types import TensorType, TupleType
from .common import require_float, same_dtype
from .elementwise import _sigmoid
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
    i, f, g, o = (gates[:, k * hidden:(k + 1) * hidden] for k in range(4))
    return _sigmoid(xp, i), _sigmoid(xp, f), xp.tanh(g), _sigmoid(xp, o)


def _lstm_cell(xp, gates, c):
    si, sf, tg, so = _activations(xp, gates, c.shape[1])
    c_new = sf * c + si * tg
    return so * xp.tanh(c_new), c_new


def _infer_cell_backward(op, types):
    gates, c = tensor_arg(op, types, 0), tensor_arg(op, types, 1)
    dh, dc = tensor_arg(op, types, 2), tensor_arg(op, types, 3)
    dtype = same_dtype(op, types)
    _check(op, gates, c)
    if dh.shape != c.shape or dc.shape != c.shape:
        raise op.error(f"arguments h_grad {dh.shape} and c_grad {dc.shape} must have the shape of c {c.shape}")
    return TupleType([TensorType(gates.shape, dtype), TensorType(c.shape, dtype)])


def _lstm_cell_backward(xp, gates, c, dh, dc):
    """(d gates, d c) from the output gradients (dh', dc'), the activations recomputed."""
    hidden = c.shape[1]
    si, sf, tg, so = _activations(xp, gates, hidden)
    tc = xp.tanh(sf * c + si * tg)
    dct = dc + dh * so * (1 - tc * tc)
    d = xp.empty(gates.shape, gates.dtype)
    d[:, :hidden] = dct * tg * si * (1 - si)
    d[:, hidden:2 * hidden] = dct * c * sf * (1 - sf)
    d[:, 2 * hidden:3 * hidden] = dct * si * (1 - tg * tg)
    d[:, 3 * hidden:] = dh * tc * so * (1 - so)
    return d, dct * sf


declare("nn.lstm_cell", ("gates", "c"), infer=_infer_cell, kernel=_lstm_cell)
# differentiable again: its VJP (autodiff/rules/rnn_cell.py) is written with primitives
declare("grad.lstm_cell_backward", ("gates", "c", "h_grad", "c_grad"), infer=_infer_cell_backward,
        kernel=_lstm_cell_backward)
