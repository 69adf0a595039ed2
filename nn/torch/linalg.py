"""torch.linalg: tracer.linalg's functions (vector_norm, matrix_norm, norm, cross, and the decompositions tracer
has), `multi_dot`; other names raise an error naming them."""
from __future__ import annotations

import functools

from tracer import linalg as _linalg

from . import hints as _hints

__getattr__ = _hints.module_getattr("nn.torch.linalg", "torch.linalg", globals())

for _name in getattr(_linalg, "__all__", [n for n in dir(_linalg) if not n.startswith("_")]):
    globals()[_name] = getattr(_linalg, _name)


def multi_dot(tensors):
    """tensors[0] @ tensors[1] @ ... (left to right)."""
    return functools.reduce(lambda a, b: a @ b, tensors)


__all__ = sorted({*getattr(_linalg, "__all__", ()), "multi_dot"})
