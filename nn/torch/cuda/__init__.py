"""torch.cuda on tracegrad: GPUs are CuPy's. `is_available()` is True when CuPy imports and finds a GPU, and
False otherwise (never an ImportError); the rest answer as torch does on such a machine.

>>> import nn.torch as torch
>>> torch.cuda.is_available() in (True, False), torch.cuda.is_bf16_supported()
(True, False)
"""
from __future__ import annotations

import functools

from ir.cuda_hint import CudaUnavailableError, require_cupy

from .. import hints as _hints
from . import amp

__getattr__ = _hints.module_getattr("nn.torch.cuda", "torch.cuda", globals())


@functools.lru_cache(maxsize=1)
def _cupy():
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() > 0:
            return cupy
    except Exception:  # no CuPy, no driver, no device: no GPU, as torch.cuda.is_available() says then
        pass
    return None


def is_available() -> bool:
    """True when CuPy is installed and sees a GPU."""
    return _cupy() is not None


def device_count() -> int:
    """The number of GPUs CuPy sees (0 without CuPy)."""
    cupy = _cupy()
    return 0 if cupy is None else int(cupy.cuda.runtime.getDeviceCount())


def _need(what: str):
    cupy = _cupy()
    if cupy is None:  # the same CudaUnavailableError (a RuntimeError) and hint as device="cuda" everywhere
        require_cupy(f"torch.cuda.{what} (no GPU)")
        raise CudaUnavailableError(f"torch.cuda.{what}: CuPy sees no GPU; torch.cuda.is_available() is False")
    return cupy


def current_device() -> int:
    """The index of the current GPU."""
    return int(_need("current_device()").cuda.runtime.getDevice())


def set_device(device) -> None:
    """Make `device` (an index, "cuda:1" or a device) the current GPU."""
    import tracer

    d = tracer.device(device) if not isinstance(device, int) else tracer.device("cuda", device)
    _need("set_device()").cuda.Device(d.index or 0).use()


def get_device_name(device=None) -> str:
    """The GPU's name."""
    cupy = _need("get_device_name()")
    index = 0 if device is None else device if isinstance(device, int) else (getattr(device, "index", 0) or 0)
    name = cupy.cuda.runtime.getDeviceProperties(index)["name"]
    return name.decode() if isinstance(name, bytes) else str(name)


def get_device_capability(device=None) -> tuple[int, int]:
    """(major, minor) compute capability."""
    cupy = _need("get_device_capability()")
    index = 0 if device is None else device if isinstance(device, int) else (getattr(device, "index", 0) or 0)
    props = cupy.cuda.runtime.getDeviceProperties(index)
    return int(props["major"]), int(props["minor"])


def synchronize(device=None) -> None:
    """Wait for the GPU's queued work (nothing to wait for without one)."""
    cupy = _cupy()
    if cupy is not None:
        cupy.cuda.Device().synchronize()


def empty_cache() -> None:
    """Return CuPy's cached, unused GPU memory to the driver."""
    cupy = _cupy()
    if cupy is not None:
        cupy.get_default_memory_pool().free_all_blocks()


def memory_allocated(device=None) -> int:
    """Bytes CuPy's pool holds for arrays (0 without a GPU)."""
    cupy = _cupy()
    return 0 if cupy is None else int(cupy.get_default_memory_pool().used_bytes())


def memory_reserved(device=None) -> int:
    """Bytes CuPy's pool has reserved (0 without a GPU)."""
    cupy = _cupy()
    return 0 if cupy is None else int(cupy.get_default_memory_pool().total_bytes())


def max_memory_allocated(device=None) -> int:
    """CuPy keeps no peak: the bytes held now (ir.Executor's stats.peak_bytes measures a step's peak)."""
    return memory_allocated(device)


def reset_peak_memory_stats(device=None) -> None:
    """Accepted (CuPy keeps no peak)."""


def manual_seed(seed: int) -> None:
    """tracegrad draws on the host for every device: torch.manual_seed seeds the GPU's draws too."""
    from ..tensors import manual_seed as _seed

    _seed(seed)


manual_seed_all = manual_seed


def is_bf16_supported(including_emulation: bool = True) -> bool:
    """False: tracegrad has no bfloat16 dtype."""
    return False


def is_initialized() -> bool:
    """Whether a GPU is available (CuPy initialises itself)."""
    return is_available()


class device:  # noqa: N801 - torch's spelling
    """`with torch.cuda.device(i):` makes GPU i current inside the block."""

    def __init__(self, device):
        self.index = device if isinstance(device, int) else (getattr(device, "index", 0) or 0)

    def __enter__(self):
        cupy = _cupy()
        self._ctx = None if cupy is None else cupy.cuda.Device(self.index)
        if self._ctx is not None:
            self._ctx.__enter__()
        return self

    def __exit__(self, *exc):
        if self._ctx is not None:
            self._ctx.__exit__(*exc)
        return False


__all__ = ["amp", "current_device", "device", "device_count", "empty_cache", "get_device_capability",
           "get_device_name", "is_available", "is_bf16_supported", "is_initialized", "manual_seed",
           "manual_seed_all", "max_memory_allocated", "memory_allocated", "memory_reserved",
           "reset_peak_memory_stats", "set_device", "synchronize"]
