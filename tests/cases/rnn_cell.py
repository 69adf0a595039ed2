"""Rows of ir/ops/rnn_cell.py: nn.lstm_cell's (h', c') against NumPy, float64 finite differences through its
VJP (grad.lstm_cell_backward), and the backward op's values against the same gradients written out."""
import numpy as np

from tests.cases import OpCase, rand
from tracer.tensor import apply


def _sig(x):
    return 1 / (1 + np.exp(-x))


def _cell_ref(gates, c):
    i, f, g, o = np.split(gates, 4, axis=1)
    c2 = _sig(f) * c + _sig(i) * np.tanh(g)
    return _sig(o) * np.tanh(c2), c2


def _cell_backward_ref(gates, c, dh, dc):
    i, f, g, o = (np.split(gates, 4, axis=1))
    si, sf, tg, so = _sig(i), _sig(f), np.tanh(g), _sig(o)
    tc = np.tanh(sf * c + si * tg)
    dct = dc + dh * so * (1 - tc ** 2)
    d = np.concatenate([dct * tg * si * (1 - si), dct * c * sf * (1 - sf), dct * si * (1 - tg ** 2),
                        dh * tc * so * (1 - so)], axis=1)
    return d, dct * sf


def _cell(gates, c):
    return tuple(apply("nn.lstm_cell", [gates, c]))


CASES = [
    OpCase("lstm_cell", _cell, _cell_ref, [rand(3, 8, dtype="float64", low=-3, high=3), rand(3, 2, dtype="float64")],
           ("nn.lstm_cell",), rtol=1e-12, atol=1e-12),
    OpCase("lstm_cell_float32", _cell, _cell_ref, [rand(2, 12, low=-9, high=9), rand(2, 3)], ("nn.lstm_cell",)),
    OpCase("lstm_cell_empty_batch", _cell, _cell_ref, [rand(0, 8), rand(0, 2)], ("nn.lstm_cell",), grad=False),
    OpCase("lstm_cell_backward", lambda *a: tuple(apply("grad.lstm_cell_backward", list(a))), _cell_backward_ref,
           [rand(3, 8, dtype="float64", low=-3, high=3), rand(3, 2, dtype="float64"), rand(3, 2, dtype="float64"),
            rand(3, 2, dtype="float64", seed=1)], ("grad.lstm_cell_backward",), rtol=1e-12,
           atol=1e-12),
    OpCase("transpose_copy", lambda w: apply("layout.transpose_copy", [w]), lambda w: w.T, [rand(3, 5)],
           ("layout.transpose_copy",), grad=False),  # made by ir.runtime.weight_layout after differentiation
]
