"""tracegrad's runtime: the executor, its generated code, planned storage and buffer reuse, the memory
profile, and the specialised and fused kernels for NumPy and CuPy.

`ir` is the IR, its text and its passes; this package runs it. Importing it installs the runtime's
kernels for ops the IR declares with reference ones (`fused`).
"""
from . import (
    conv_kernels,  # noqa: F401  (installs im2col-chunked conv2d and sliced max_pool2d kernels)
    fused_cpu,  # noqa: F401  (installs the fused op's NumPy/CuPy kernel)
    numba_dropout,  # noqa: F401  (installs dropout's numba loop when the fast extra is there)
    numba_rnn,  # noqa: F401  (installs the LSTM cell's numba loops, float32, when the fast extra is there)
)
from .executor import Executor, Stats
from .memory import MemoryProfile, memory_profile

__all__ = ["Executor", "MemoryProfile", "Stats", "memory_profile"]
