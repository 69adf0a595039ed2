"""One step of a recurrence: RNNCell, LSTMCell, GRUCell, with torch's parameters (weight_ih, weight_hh, bias_ih,
bias_hh), initialisation and calls (input (B, I) or unbatched (I,); hx None means zeros)."""
from __future__ import annotations

import numpy as np

import tracer

from . import functional as F
from .module import Module, Parameter, check_input
from .rnn import _gru_cell, _lstm_cell, uniform_by_hidden_size


class _CellBase(Module):
    def __init__(self, input_size: int, hidden_size: int, bias: bool, gates: int, device, dtype):
        super().__init__()
        name = type(self).__name__
        for arg, value in (("input_size", input_size), ("hidden_size", hidden_size)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"{name}: {arg} must be a positive int, got {value!r}")
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        dtype = "float32" if dtype is None else tracer.dtype_name(dtype) if not isinstance(dtype, str) else dtype
        self.weight_ih = Parameter(np.empty((gates * hidden_size, input_size), dtype))
        self.weight_hh = Parameter(np.empty((gates * hidden_size, hidden_size), dtype))
        self.bias_ih = Parameter(np.empty((gates * hidden_size,), dtype)) if bias else None
        self.bias_hh = Parameter(np.empty((gates * hidden_size,), dtype)) if bias else None
        self.reset_parameters()
        if device is not None:
            self.to(device=device)

    def reset_parameters(self) -> None:
        """torch's: every weight and bias U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))."""
        uniform_by_hidden_size(self)

    def _input(self, x):
        name = type(self).__name__
        x = check_input(self, x, self.weight_ih.dtype)
        if x.ndim not in (1, 2) or x.shape[-1] != self.input_size:
            raise ValueError(f"{name}: Expected input of shape (batch, {self.input_size}) or ({self.input_size},), "
                             f"got {x.shape}")
        return (x, True) if x.ndim == 2 else (tracer.expand_dims(x, 0), False)

    def _state(self, s, batch: int, batched: bool, what: str):
        if s is None:
            return tracer.zeros((batch, self.hidden_size), dtype=self.weight_ih.dtype)
        s = check_input(self, s, self.weight_ih.dtype, what)
        want = (batch, self.hidden_size) if batched else (self.hidden_size,)
        if s.shape != want:
            raise RuntimeError(f"{type(self).__name__}: {what} must have shape {want}, got {s.shape}")
        return s if batched else tracer.expand_dims(s, 0)

    def _gates(self, x, h):
        return F.linear(x, self.weight_ih, self.bias_ih), F.linear(h, self.weight_hh, self.bias_hh)

    def extra_repr(self) -> str:
        return f"{self.input_size}, {self.hidden_size}" + ("" if self.bias else ", bias=False")


class RNNCell(_CellBase):
    """h' = nonlinearity(x W_ih^T + b_ih + h W_hh^T + b_hh)."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, nonlinearity: str = "tanh",
                 device=None, dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNNCell: Unknown nonlinearity: {nonlinearity}")
        super().__init__(input_size, hidden_size, bias, 1, device, dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):
        x, batched = self._input(input)
        gi, gh = self._gates(x, self._state(hx, x.shape[0], batched, "hx"))
        h = tracer.tanh(gi + gh) if self.nonlinearity == "tanh" else tracer.relu(gi + gh)
        return h if batched else tracer.squeeze(h, 0)


class LSTMCell(_CellBase):
    """(h', c') from (x, (h, c)) with torch's gate order i, f, g, o.

    >>> h, c = LSTMCell(3, 4)(np.zeros((2, 3), "float32"))
    >>> h.shape, c.shape
    ((2, 4), (2, 4))
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 4, device, dtype)

    def forward(self, input, hx=None):
        x, batched = self._input(input)
        h, c = (None, None) if hx is None else hx
        h, c = (self._state(s, x.shape[0], batched, what) for s, what in ((h, "h_0"), (c, "c_0")))
        gi, gh = self._gates(x, h)
        h, c = _lstm_cell(gi + gh, c, self.hidden_size)
        return (h, c) if batched else (tracer.squeeze(h, 0), tracer.squeeze(c, 0))


class GRUCell(_CellBase):
    """h' from (x, h) with torch's gate order r, z, n."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 3, device, dtype)

    def forward(self, input, hx=None):
        x, batched = self._input(input)
        h = self._state(hx, x.shape[0], batched, "hx")
        gi, gh = self._gates(x, h)
        h = _gru_cell(gi, gh, h)
        return h if batched else tracer.squeeze(h, 0)


__all__ = ["GRUCell", "LSTMCell", "RNNCell"]
