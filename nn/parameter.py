"""nn.Parameter, and the `device=` / `dtype=` factory arguments that layer constructors take, as torch's."""
from __future__ import annotations

import numpy as np

from tracer import Tensor
from tracer.tensor import array_module_of


class Parameter(Tensor):
    """A trainable tensor: always concrete, floating point, and owned by the model.

    Optimizers update `_data` in place, so a compiled function that captured the parameter sees the
    new values on its next call without retracing.

    >>> import numpy as np
    >>> p = Parameter(np.zeros((2, 3), "float32"))
    >>> p.shape, p.dtype
    ((2, 3), 'float32')
    """

    __slots__ = ()
    _is_parameter = True  # requires_grad False: frozen (value_and_grad gives None, optimizers skip it)

    def __init__(self, data, dtype=None, requires_grad: bool = True):
        if isinstance(data, Tensor):
            data = data.numpy() if data._var is not None else data._data
        xp = array_module_of(data) if type(data).__module__.startswith("cupy") else np  # a GPU array stays there
        arr = xp.asarray(data, dtype=dtype)
        if arr.dtype.kind != "f":
            arr = arr.astype("float32")
        # Tensor copies: the parameter owns its memory, updated in place. Not ascontiguousarray: that makes a 0-d
        # array 1-d, and a 0-d Parameter keeps shape (), as torch's
        super().__init__(arr if arr.flags.c_contiguous else arr.copy(order="C"))
        # a Parameter made inside a trace is still a weight (captured), never a baked-in constant
        self._in_trace = False
        self.requires_grad = bool(requires_grad)  # a leaf whose eager ops are recorded (tracer/autograd.py)

    def requires_grad_(self, requires_grad: bool = True) -> Parameter:
        """Freeze (False) or unfreeze the parameter: optimizers leave a frozen parameter alone, as in torch."""
        self.requires_grad = bool(requires_grad)
        return self

    def __repr__(self) -> str:
        return "Parameter" + super().__repr__()[len("Tensor"):]


def factory_dtype(dtype, layer=None) -> str:
    """A layer's `dtype=` argument as a dtype name: None is float32 (torch's default dtype); numpy dtypes, their
    names and torch's dtypes (torch.float64) are accepted; a non-floating dtype is a TypeError naming the layer."""
    if dtype is None:
        return "float32"
    text = str(dtype)
    try:
        name = np.dtype(text[len("torch."):] if text.startswith("torch.") else dtype).name
    except TypeError:
        raise TypeError(f"{_who(layer)}dtype must be a floating-point dtype, got {dtype!r}") from None
    if np.dtype(name).kind != "f":
        raise TypeError(f"{_who(layer)}dtype must be a floating-point dtype (its parameters are "
                        f"trainable), got {name}")
    return name


def _who(layer) -> str:
    return "" if layer is None else f"{type(layer).__name__}: "


def place(module, device):
    """A layer's `device=` argument: its parameters and buffers moved there ("cpu", "cuda", "cuda:1", a
    tracer.device), through Module.to; None leaves them on the CPU. Returns the module."""
    if device is not None:
        module.to(device=device)
    return module
