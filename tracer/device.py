"""Devices, PyTorch's way: `tracer.device("cuda")`, `t.device`, `t.to("cuda")`, `t.cpu()`, `t.cuda()`.

A tensor lives where its array lives: a NumPy array is on the CPU, a CuPy array on a GPU. Nothing here
imports CuPy unless a tensor is asked to move to (or is made on) a GPU, so the NumPy path never loads it.
"""
from __future__ import annotations

import numpy as np

from ir.cuda_hint import require_cupy

_TYPES = ("cpu", "cuda")


class DeviceError(RuntimeError, ValueError):
    """A string or index that names no device (torch raises RuntimeError; a ValueError too, for bad input)."""


class device:  # noqa: N801 - torch's spelling
    """Where a tensor's values live: `device("cpu")`, `device("cuda")`, `device("cuda:1")`, `device("cuda", 0)`.

    As torch.device it prints "cpu" or "cuda:0" and has `.type` and `.index`. Unlike torch.device it also
    equals the strings that name it, so `t.device == "cuda"` reads as one would hope; an index left out
    ("cuda") matches every index.

    >>> import tracer
    >>> d = tracer.tensor([1.0]).device
    >>> d, str(d), d == "cpu", d == "cuda"
    (device(type='cpu'), 'cpu', True, False)
    >>> tracer.device("cuda:1").index, tracer.device("cuda") == "cuda:0"
    (1, True)
    """

    __slots__ = ("type", "index")

    def __init__(self, type, index: int | None = None):  # noqa: A002 - torch's argument name
        if isinstance(type, device) or _foreign(type):  # ours, or torch.device (.type and .index)
            type, index = type.type, type.index if index is None else index
        elif isinstance(type, (int, np.integer)) and not isinstance(type, bool) and index is None:
            type, index = "cuda", type  # torch's device=0: the GPU of that index
        if not isinstance(type, str):
            raise TypeError(f"device: expected a string such as 'cpu' or 'cuda:0', got {type!r}")
        kind, _, number = type.partition(":")
        if kind not in _TYPES:
            raise DeviceError(f"unknown device {type!r}; expected 'cpu', 'cuda' or 'cuda:N'")
        if number:
            if index is not None or not number.isdigit():
                raise DeviceError(f"invalid device string {type!r}; expected 'cpu', 'cuda' or 'cuda:N'")
            index = int(number)
        if index is not None and (isinstance(index, bool) or not isinstance(index, (int, np.integer)) or index < 0):
            raise DeviceError(f"the device index must be an int >= 0, got {index!r}")
        if kind == "cpu" and index not in (None, 0):
            raise DeviceError(f"invalid device {type!r} with index {index}: the CPU has no index")
        self.type, self.index = kind, None if index is None or kind == "cpu" else int(index)

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __repr__(self) -> str:
        return f"device(type={self.type!r})" if self.index is None else \
            f"device(type={self.type!r}, index={self.index})"

    def __eq__(self, other) -> bool:
        if isinstance(other, str):
            try:
                other = device(other)
            except DeviceError:
                return False
        if not isinstance(other, device):
            return NotImplemented
        return self.type == other.type and (self.index is None or other.index is None or self.index == other.index)

    def __hash__(self) -> int:
        return hash(self.type)


def _foreign(value) -> bool:
    """A device of another library spelled as torch's: a string `.type` and an `.index`."""
    return isinstance(getattr(value, "type", None), str) and hasattr(value, "index")


def is_device(value) -> bool:
    """Whether `value` names a device for `to(...)`: a string, a tracer.device, a torch.device, or a GPU ordinal
    (`x.to(0)`, `model.to(rank)`: cuda:0 and cuda:rank, as torch's)."""
    ordinal = isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, (str, device)) or _foreign(value) or ordinal


CPU = device("cpu")


def parse(value, what: str) -> device:
    """`value` ("cpu", "cuda:0", a device) as a device; DeviceError (TypeError) naming `what` when it names none."""
    try:
        return value if isinstance(value, device) else device(value)
    except (TypeError, DeviceError) as e:
        raise type(e)(f"{what}: {e}") from None


def device_of(array) -> device:
    """The device of an array: the CPU for NumPy's, `cuda:<id>` for CuPy's."""
    if isinstance(array, (np.ndarray, np.generic)):
        return CPU
    dev = getattr(array, "device", None)
    return device("cuda", int(getattr(dev, "id", 0) or 0))


def move(array, dev: device):
    """`array` on `dev`: the same array when it is there already, a copy otherwise (never through Python lists).
    CudaUnavailableError (an ImportError) with the install hint when `dev` is a GPU and CuPy or the GPU is
    missing."""
    on_gpu = not isinstance(array, (np.ndarray, np.generic))
    if dev.type == "cpu":
        return array.get() if on_gpu else array
    cupy = require_cupy()  # an optional dependency, needed only here: CudaUnavailableError says how to install it
    if on_gpu and (dev.index is None or device_of(array).index == dev.index):
        return array
    if dev.index is None:
        return cupy.asarray(array)
    with cupy.cuda.Device(dev.index):
        return cupy.asarray(array)


# operands that may stay on the host when the data is on a GPU: indices, as torch's x[idx] takes CPU indices
_HOST_INDEX = {"take": 1}


def check_same_device(op_name: str, arrays) -> None:
    """Raise torch's "Expected all tensors to be on the same device" for arrays on different devices.

    Host arrays of 0 dimensions (scalars) may join device arrays, as CPU scalars do in torch, and so may
    host indices of `take` (x[[0, 2]], Embedding), as torch's indexing takes CPU indices; the caller moves
    them."""
    index = _HOST_INDEX.get(op_name)
    if not any(type(a) is np.ndarray and a.ndim and k != index for k, a in enumerate(arrays)):
        return  # the common case, all on the GPU: nothing to look up (CuPy checks its own devices)
    devices = {str(device_of(a)): None for k, a in enumerate(arrays)
               if not (isinstance(a, np.ndarray) and (a.ndim == 0 or k == index))}
    if len(devices) > 1:
        raise RuntimeError(f"{op_name}: Expected all tensors to be on the same device, but found at least two "
                           f"devices, {' and '.join(devices)}; move them with .to(device), .cuda() or .cpu()")
