"""torch's process-wide settings that change nothing tracegrad computes: thread counts, print options,
determinism and matmul-precision flags. Each is accepted and remembered (its getter returns what was set)."""
from __future__ import annotations

import os

import numpy as np

_STATE = {"num_threads": os.cpu_count() or 1, "interop_threads": 1, "deterministic": False, "precision": "highest"}


def set_num_threads(n: int) -> None:
    """Remembered (NumPy's BLAS keeps its own thread count: set OMP_NUM_THREADS before starting Python)."""
    _STATE["num_threads"] = int(n)


def get_num_threads() -> int:
    return _STATE["num_threads"]


def set_num_interop_threads(n: int) -> None:
    _STATE["interop_threads"] = int(n)


def get_num_interop_threads() -> int:
    return _STATE["interop_threads"]


def use_deterministic_algorithms(mode: bool, *, warn_only: bool = False) -> None:
    """Accepted: tracegrad's kernels are deterministic for a given seed already."""
    _STATE["deterministic"] = bool(mode)


def are_deterministic_algorithms_enabled() -> bool:
    return _STATE["deterministic"]


def set_float32_matmul_precision(precision: str) -> None:
    """Accepted: float32 matmuls are NumPy's (or cuBLAS's through CuPy) at full precision."""
    if precision not in ("highest", "high", "medium"):
        raise ValueError(f"set_float32_matmul_precision: expected 'highest', 'high' or 'medium', got {precision!r}")
    _STATE["precision"] = precision


def get_float32_matmul_precision() -> str:
    return _STATE["precision"]


def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None, profile=None,
                     sci_mode=None) -> None:
    """NumPy's print options, which print tracegrad tensors."""
    opts = {k: v for k, v in (("precision", precision), ("threshold", threshold), ("edgeitems", edgeitems),
                              ("linewidth", linewidth)) if v is not None}
    if profile == "full":
        opts["threshold"] = np.inf
    if sci_mode is not None:
        opts["suppress"] = not sci_mode
    np.set_printoptions(**opts)


def set_flush_denormal(mode: bool) -> bool:
    """False: not supported (as torch answers on machines without the instruction)."""
    return False


def set_warn_always(b: bool) -> None:
    """Accepted."""


def compile(model=None, *, fullgraph: bool = False, dynamic=None, backend="inductor", mode=None, options=None,
            disable: bool = False):
    """torch.compile: the model or function itself. tracegrad compiles already: loss.backward() replays a
    compiled adjoint from step 2 on, and autodiff.value_and_grad traces and compiles the whole step."""
    if model is None:
        return lambda m: m
    return model


__all__ = ["are_deterministic_algorithms_enabled", "compile", "get_float32_matmul_precision",
           "get_num_interop_threads", "get_num_threads", "set_float32_matmul_precision", "set_flush_denormal",
           "set_num_interop_threads", "set_num_threads", "set_printoptions", "set_warn_always",
           "use_deterministic_algorithms"]
