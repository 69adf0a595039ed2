"""torch.backends: `cudnn`'s flags (accepted; no effect on tracegrad's kernels), `cuda.matmul.allow_tf32`,
`mps.is_available()` (False)."""
from __future__ import annotations

from types import SimpleNamespace

from . import cudnn

cuda = SimpleNamespace(matmul=SimpleNamespace(allow_tf32=False, allow_fp16_reduced_precision_reduction=True,
                                              allow_bf16_reduced_precision_reduction=True),
                       is_built=lambda: True, flash_sdp_enabled=lambda: False,
                       enable_flash_sdp=lambda enabled: None, enable_mem_efficient_sdp=lambda enabled: None,
                       enable_math_sdp=lambda enabled: None)
mps = SimpleNamespace(is_available=lambda: False, is_built=lambda: False)
mkldnn = SimpleNamespace(is_available=lambda: False, enabled=False)
openmp = SimpleNamespace(is_available=lambda: False)

__all__ = ["cuda", "cudnn", "mkldnn", "mps", "openmp"]
