"""Recurrent layers with torch's parameters, layouts and outputs: RNN, LSTM, GRU and their cells.

The recurrence is unrolled, one step after another, into the one dataflow block that tracing records, rather
than expressed as a scan op: the Gradient pass, the checkpoint planner and the executor's memory accounting
then see every step as ordinary ops (nothing special to differentiate, plan or free), at the price of an IR
that grows with the sequence length (a few bindings per step, layer and direction: an LSTM step is a matmul,
an add and one nn.lstm_cell) and a retrace for each new length. The input projection of every step is one
matmul over (T * B, input_size), before the loop.

A PackedSequence input runs on its padded form with a per-step mask: a sequence's state stops changing
after its length (and, going backwards, starts changing only at its last element), so outputs and final
states are torch's for each true length.
"""
from __future__ import annotations

import math

import numpy as np

import tracer
from tracer.tensor import apply

from . import functional as F
from . import init
from .module import Module, Parameter, check_input
from .utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence


def uniform_by_hidden_size(module: Module) -> None:
    """torch's recurrent init: every parameter U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)) (layers and cells)."""
    stdv = 1.0 / math.sqrt(module.hidden_size)
    for p in module.parameters():
        init.uniform_(p, -stdv, stdv)

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


def _transposed(w):
    return tracer.permute_dims(w, [1, 0])


def _lstm_cell(gates, c, hidden: int):
    """torch's gate order i, f, g, o: (h', c') by one nn.lstm_cell op (ir/ops/rnn_cell.py), one kernel a step
    each way in place of ten elementwise bindings."""
    h, c = apply("nn.lstm_cell", [gates, c])
    return h, c


def _gru_cell(gi, gh, h):
    """torch's gate order r, z, n; gi = x W_ih^T + b_ih, gh = h W_hh^T + b_hh (b_hn stays inside r * (...))."""
    ir_, iz, in_ = tracer.split(gi, 3, axis=-1)
    hr, hz, hn = tracer.split(gh, 3, axis=-1)
    r, z = tracer.sigmoid(ir_ + hr), tracer.sigmoid(iz + hz)
    n = tracer.tanh(in_ + r * hn)
    return n + z * (h - n)  # (1 - z) * n + z * h


class _RNNBase(Module):
    """Shared by RNN, LSTM and GRU: torch's constructor, parameters (weight_ih_l{k}[_reverse], ...) and loop."""

    def __init__(self, mode: str, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False, proj_size: int = 0,
                 device=None, dtype=None):
        super().__init__()
        name = type(self).__name__
        for arg, value, low in (("input_size", input_size, 1), ("hidden_size", hidden_size, 1),
                                ("num_layers", num_layers, 1), ("proj_size", proj_size, 0)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
                raise ValueError(f"{name}: {arg} must be an int >= {low}, got {value!r}")
        if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or not 0 <= dropout <= 1:
            raise ValueError(f"{name}: dropout should be a number in range [0, 1] representing the probability of "
                             f"an element being zeroed, got {dropout!r}")
        if proj_size and mode != "LSTM":
            raise ValueError(f"{name}: proj_size argument is only supported for LSTM, not RNN or GRU")
        if proj_size >= hidden_size:
            raise ValueError(f"{name}: proj_size ({proj_size}) has to be smaller than hidden_size ({hidden_size})")
        self.mode, self.input_size, self.hidden_size, self.num_layers = mode, input_size, hidden_size, num_layers
        self.bias, self.batch_first, self.dropout = bias, batch_first, float(dropout)
        self.bidirectional, self.proj_size = bidirectional, proj_size
        dtype = "float32" if dtype is None else tracer.dtype_name(dtype) if not isinstance(dtype, str) else dtype
        gate, out = _GATES[mode] * hidden_size, proj_size or hidden_size
        self._flat_weights_names = []
        for layer in range(num_layers):
            for suffix in ("", "_reverse")[:1 + bidirectional]:
                shapes = [("weight_ih", (gate, input_size if layer == 0 else out * (1 + bidirectional))),
                          ("weight_hh", (gate, out))]
                if bias:
                    shapes += [("bias_ih", (gate,)), ("bias_hh", (gate,))]
                if proj_size:
                    shapes.append(("weight_hr", (proj_size, hidden_size)))
                for base, shape in shapes:
                    pname = f"{base}_l{layer}{suffix}"
                    setattr(self, pname, Parameter(np.empty(shape, dtype)))
                    self._flat_weights_names.append(pname)
        self.reset_parameters()
        if device is not None:
            self.to(device=device)

    def reset_parameters(self) -> None:
        """torch's: every weight and bias U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))."""
        uniform_by_hidden_size(self)

    def _weights(self, layer: int, suffix: str) -> dict:
        return {base: getattr(self, f"{base}_l{layer}{suffix}", None)
                for base in ("weight_ih", "weight_hh", "bias_ih", "bias_hh", "weight_hr")}

    def forward(self, input, hx=None):
        name, dtype = type(self).__name__, self.weight_ih_l0.dtype
        packed = isinstance(input, PackedSequence)
        if packed:
            x, lengths = pad_packed_sequence(input)
            lengths = np.asarray(lengths.numpy())
            sorted_indices, unsorted_indices = input.sorted_indices, input.unsorted_indices
            batched, batch_first = True, False
        else:
            x, lengths, batch_first = check_input(self, input, dtype), None, self.batch_first
            if x.ndim not in (2, 3):
                raise ValueError(f"{name}: Expected input to be 2D or 3D, got {x.ndim}D tensor of shape {x.shape}")
            batched = x.ndim == 3
            if not batched:
                x = tracer.expand_dims(x, 1)
            elif batch_first:
                x = tracer.permute_dims(x, [1, 0, 2])
        if x.shape[2] != self.input_size:
            raise ValueError(f"{name}: input.size(-1) must be equal to input_size. Expected {self.input_size}, "
                             f"got {x.shape[2]}")
        T, B = x.shape[0], x.shape[1]
        h0, c0 = self._initial_states(hx, batched, B, dtype)
        masks = None if lengths is None else [tracer.tensor((lengths > t).reshape(B, 1)) for t in range(T)]
        directions = 1 + self.bidirectional
        finals_h, finals_c = [], []
        for layer in range(self.num_layers):
            outs = []
            for d, suffix in enumerate(("", "_reverse")[:directions]):
                k = layer * directions + d
                out, h, c = self._run(x, self._weights(layer, suffix), h0[k], None if c0 is None else c0[k],
                                      masks, reverse=d == 1)
                outs.append(out)
                finals_h.append(h)
                finals_c.append(c)
            x = outs[0] if directions == 1 else tracer.concat(outs, axis=2)
            if self.dropout and self.training and layer < self.num_layers - 1:
                x = F.dropout(x, self.dropout, training=True)
        h_n = tracer.stack(finals_h, axis=0)
        c_n = tracer.stack(finals_c, axis=0) if self.mode == "LSTM" else None
        if packed:
            output = pack_padded_sequence(x, lengths, enforce_sorted=sorted_indices is None)
            output = PackedSequence(output.data, output.batch_sizes, sorted_indices, unsorted_indices)
        elif not batched:
            output, h_n = tracer.squeeze(x, 1), tracer.squeeze(h_n, 1)
            c_n = None if c_n is None else tracer.squeeze(c_n, 1)
        else:
            output = tracer.permute_dims(x, [1, 0, 2]) if batch_first else x
        return (output, (h_n, c_n)) if self.mode == "LSTM" else (output, h_n)

    def _initial_states(self, hx, batched: bool, B: int, dtype: str):
        """h0 (and c0) as lists of (B, size) tensors, one per layer and direction; zeros when hx is None."""
        name, n = type(self).__name__, self.num_layers * (1 + self.bidirectional)
        sizes = [self.proj_size or self.hidden_size] + ([self.hidden_size] if self.mode == "LSTM" else [])
        if hx is None:
            states = [tracer.zeros((n, B, s), dtype=dtype) for s in sizes]
        else:
            given = list(hx) if self.mode == "LSTM" else [hx]
            if self.mode == "LSTM" and (not isinstance(hx, (tuple, list)) or len(given) != 2):
                raise TypeError(f"{name}: hx must be a tuple (h_0, c_0), got {type(hx).__name__}")
            states = []
            for what, s, size in zip(("h_0", "c_0"), given, sizes, strict=False):
                s = check_input(self, s, dtype, what)
                want = (n, B, size) if batched else (n, size)
                if s.shape != want:
                    raise RuntimeError(f"{name}: Expected hidden size {want}, got {s.shape} for {what}")
                states.append(s if batched else tracer.expand_dims(s, 1))
        split = [[s[i] for i in range(n)] for s in states]
        return split[0], (split[1] if self.mode == "LSTM" else None)

    def _run(self, x, w, h, c, masks, reverse: bool):
        """One layer in one direction over x (T, B, I): the outputs (T, B, H), the final h and c."""
        T, B = x.shape[0], x.shape[1]
        bias = w["bias_ih"]
        if w["bias_hh"] is not None and self.mode != "GRU":  # GRU keeps b_hn inside r * (...)
            bias = bias + w["bias_hh"]  # both biases in one add over the (T * B, gates) projection
        xi = F.linear(tracer.reshape(x, (T * B, x.shape[2])), w["weight_ih"], bias)
        # split as (T, B, gates): the adjoint's concat of the (1, B, gates) step gradients is the one that
        # ir.transform.matmul_merge finds again for W_hh's gradient (a 2-D split's concat it would make twice)
        steps = tracer.split(tracer.reshape(xi, (T, B, xi.shape[1])), T, axis=0) if T > 1 else [xi]
        w_hh, w_hr = _transposed(w["weight_hh"]), None if w["weight_hr"] is None else _transposed(w["weight_hr"])
        outputs = [None] * T
        for t in (range(T - 1, -1, -1) if reverse else range(T)):
            gi = tracer.reshape(steps[t], (B, xi.shape[1]))
            if self.mode == "GRU":
                gh = tracer.matmul(h, w_hh)
                new_h, new_c = _gru_cell(gi, gh if w["bias_hh"] is None else gh + w["bias_hh"], h), None
            elif self.mode == "LSTM":
                new_h, new_c = _lstm_cell(gi + tracer.matmul(h, w_hh), c, self.hidden_size)
                if w_hr is not None:
                    new_h = tracer.matmul(new_h, w_hr)
            else:
                pre = gi + tracer.matmul(h, w_hh)
                new_h, new_c = (tracer.tanh(pre) if self.mode == "RNN_TANH" else tracer.relu(pre)), None
            if masks is None:
                h, c, outputs[t] = new_h, new_c, new_h
            else:  # past a sequence's length its state stays, and its output is zero (padding)
                m = masks[t]
                h = tracer.where(m, new_h, h)
                c = None if new_c is None else tracer.where(m, new_c, c)
                outputs[t] = tracer.where(m, new_h, 0.0)
        # stacked, not concatenated along axis 0 and reshaped (whose view of the concat keeps that out of planned
        # storage: a fresh (T * B, H) array, page faults, each step on the plain path)
        return tracer.stack(outputs, axis=0), h, c

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if not self.bias:
            s += ", bias=False"
        if self.batch_first:
            s += ", batch_first=True"
        if self.dropout:
            s += f", dropout={self.dropout}"
        if self.bidirectional:
            s += ", bidirectional=True"
        return s


class RNN(_RNNBase):
    """Elman RNN, h_t = nonlinearity(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh), as torch.nn.RNN: input (T, B, I)
    ((B, T, I) with batch_first, (T, I) unbatched, or a PackedSequence); returns (output, h_n).

    >>> out, h = RNN(3, 4, num_layers=2)(np.zeros((5, 2, 3), "float32"))
    >>> out.shape, h.shape
    ((5, 2, 4), (2, 2, 4))
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, nonlinearity: str = "tanh",
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 device=None, dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNN: Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or 'relu'.")
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", input_size, hidden_size, num_layers,
                         bias, batch_first, dropout, bidirectional, 0, device, dtype)
        self.nonlinearity = nonlinearity


class LSTM(_RNNBase):
    """Long short-term memory, torch.nn.LSTM's gates (i, f, g, o) and parameters (weight_hr_l{k} with
    proj_size); returns (output, (h_n, c_n)).

    >>> out, (h, c) = LSTM(3, 4, bidirectional=True)(np.zeros((5, 2, 3), "float32"))
    >>> out.shape, h.shape, c.shape
    ((5, 2, 8), (2, 2, 4), (2, 2, 4))
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False, proj_size: int = 0,
                 device=None, dtype=None):
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         proj_size, device, dtype)


class GRU(_RNNBase):
    """Gated recurrent unit, torch.nn.GRU's gates (r, z, n) and parameters; returns (output, h_n)."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False, device=None,
                 dtype=None):
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional, 0,
                         device, dtype)


from .rnn_cells import GRUCell, LSTMCell, RNNCell  # noqa: E402  (the cells share the gate functions above)

__all__ = ["GRU", "GRUCell", "LSTM", "LSTMCell", "RNN", "RNNCell"]
