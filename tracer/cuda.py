"""tracer.cuda: whether a GPU is there, without raising (torch.cuda's `is_available` and `device_count`).

A GPU is CuPy's: `is_available()` is True when CuPy imports and sees one. Asking for `device="cuda"`
without one raises `CudaUnavailableError` (an ImportError and a RuntimeError) with the install hint,
the same from `tracer.tensor(..., device="cuda")`, `x.cuda()`, `model.to("cuda")` and `ir.Executor`.

>>> import tracer
>>> tracer.cuda.is_available() == (tracer.cuda.device_count() > 0)
True
"""
from ir.cuda_hint import CudaUnavailableError, device_count, require_cupy
from ir.cuda_hint import cuda_available as is_available

__all__ = ["CudaUnavailableError", "device_count", "is_available", "require_cupy"]
