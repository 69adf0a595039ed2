"""Linear algebra: matmul with NumPy's semantics (1-D operands, batched and broadcast batch dims)."""
from __future__ import annotations

from ..types import TensorType
from .common import same_dtype
from .registry import declare, tensor_arg


def _infer_matmul(op, types):
    a, b = tensor_arg(op, types, 0), tensor_arg(op, types, 1)
    both = f"x1 of shape {a.shape} and x2 of shape {b.shape}"
    if a.ndim == 0 or b.ndim == 0:
        raise op.error(f"{both}: both arguments need at least one dimension (use multiply for scalars)")
    dtype = same_dtype(op, types)
    # A 1-D operand is a row (x1) or a column (x2) whose extra dimension is dropped from the result.
    a2 = a.shape if a.ndim > 1 else (1,) + a.shape
    b2 = b.shape if b.ndim > 1 else b.shape + (1,)
    if a2[-1] != b2[-2]:
        raise op.error(f"{both}: contracted dimensions differ ({a2[-1]} vs {b2[-2]})")
    batch_a, batch_b = a2[:-2], b2[:-2]
    n = max(len(batch_a), len(batch_b))
    batch_a, batch_b = (1,) * (n - len(batch_a)) + batch_a, (1,) * (n - len(batch_b)) + batch_b
    batch = []
    for da, db in zip(batch_a, batch_b, strict=True):
        if da != db and 1 not in (da, db):
            raise op.error(f"{both}: batch dimensions {a2[:-2]} and {b2[:-2]} do not broadcast")
        batch.append(db if da == 1 else da)
    out = tuple(batch) + (a2[-2],) * (a.ndim > 1) + (b2[-1],) * (b.ndim > 1)
    return TensorType(out, dtype)


declare("matmul", ("x1", "x2"), infer=_infer_matmul, kernel=lambda xp, a, b: xp.matmul(a, b),
        fixed={"out_dtype": ("void", "")})
