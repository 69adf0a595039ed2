"""torch.onnx on tracegrad: the module imports (word_language_model's main.py does `import torch.onnx` and
exports only under --onnx-export), and `export` raises: tracegrad writes its own IR (`tracer.trace(fn, *args)`
prints as TVMScript-style text), not ONNX graphs."""
from __future__ import annotations


def export(model, args=(), f=None, *rest, **kwargs):
    """Refuses with a NotImplementedError naming what tracegrad can write instead."""
    raise NotImplementedError("torch.onnx.export: ONNX export is not supported by tracegrad; save the weights "
                              "with torch.save(model.state_dict(), path) (nn.save), or print the traced program "
                              "with print(tracer.trace(model, x))")


def is_in_onnx_export() -> bool:
    """False: tracegrad never exports ONNX."""
    return False


__all__ = ["export", "is_in_onnx_export"]
