"""Moving tensors between devices: `place(t, dev)` and `tensor_device(t)`.

Here rather than in tracer.device, which only knows arrays: tensor.py imports device.py, and this module
imports both, so neither imports the other back.
"""
from __future__ import annotations

from .device import device, device_of, move, parse
from .tensor import Tensor, active_trace


def place(t, dev, what: str = "to"):
    """Tensor `t` on `dev` (None: left where it is). Inside a trace the executor decides where values live,
    so a traced tensor (or a constant made while tracing) is returned as it is."""
    if dev is None:
        return t
    dev = parse(dev, what)
    if t._var is not None or active_trace() is not None:
        return t
    data = move(t._data, dev)
    return t if data is t._data else Tensor.wrap(data)


def tensor_device(t) -> device | None:
    """The device of a concrete tensor; None for a traced one (the executor decides where it runs)."""
    return None if t._data is None else device_of(t._data)
