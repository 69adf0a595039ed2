"""CuPy, found or explained: the one place that imports it for a `device="cuda"` request.

Every path to a GPU (`ir.Executor(mod, device="cuda")`, `tracer.tensor(..., device="cuda")`, `x.cuda()`,
`model.to("cuda")`) calls `require_cupy`, so a machine without CuPy, or with CuPy and no usable GPU, gets
the same `CudaUnavailableError` and the same install hint. `cuda_available` and `device_count` answer
without raising, as `torch.cuda.is_available()` does.

>>> from ir.cuda_hint import CudaUnavailableError, cuda_available
>>> cuda_available() in (True, False), issubclass(CudaUnavailableError, ImportError)
(True, True)
"""
from __future__ import annotations

INSTALL = 'pip install "tracegrad[cuda]" (cupy-cuda12x)'


class CudaUnavailableError(ImportError, RuntimeError):
    """device="cuda" asked for where CuPy is missing or sees no GPU.

    An ImportError (CuPy is an optional dependency) and a RuntimeError (what torch raises without CUDA),
    so code that catches either keeps working."""


def require_cupy(what: str = 'device="cuda"'):
    """The `cupy` module, with a usable GPU behind it; CudaUnavailableError naming `what` and the `cuda`
    extra otherwise."""
    try:
        import cupy
    except ImportError as e:
        raise CudaUnavailableError(f"{what} needs CuPy: {INSTALL} on a machine with an NVIDIA GPU ({e})") from None
    try:
        cupy.cuda.runtime.getDeviceCount()
    except Exception as e:  # CuPy raises its own CUDARuntimeError when no driver or GPU is there
        raise CudaUnavailableError(f"{what}: CuPy is installed but no GPU is usable ({e})") from None
    return cupy


def device_count() -> int:
    """The number of GPUs CuPy sees: 0 without CuPy, a driver or a device (never raises)."""
    try:
        import cupy

        return int(cupy.cuda.runtime.getDeviceCount())
    except Exception:  # no CuPy (ImportError), no driver or device (CuPy's CUDARuntimeError)
        return 0


def cuda_available() -> bool:
    """True when CuPy imports and sees at least one GPU (never raises)."""
    return device_count() > 0


__all__ = ["INSTALL", "CudaUnavailableError", "cuda_available", "device_count", "require_cupy"]
