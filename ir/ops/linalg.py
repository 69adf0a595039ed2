"""Linear algebra: matmul with NumPy's semantics (1-D operands, batched and broadcast batch dims), einsum."""
from __future__ import annotations

from ..types import TensorType
from .common import same_dtype
from .registry import Attr, declare, tensor_arg


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


# ---------------------------------------------------------------- einsum


def parse_subscripts(op, subscripts: str) -> tuple[list[str], str]:
    """The operand subscripts and the output subscript of a normalized equation ("ab,bc->ac": explicit
    output, letters only; tracer.einsum writes torch's implicit and ellipsis forms this way)."""
    if subscripts.count("->") != 1:
        raise op.error(f"subscripts {subscripts!r} must have one '->' (tracer.einsum adds the implicit output)")
    lhs, out = subscripts.replace(" ", "").split("->")
    ins = lhs.split(",")
    for s in ins + [out]:
        if not all(c.isalpha() for c in s):
            raise op.error(f"subscripts {subscripts!r}: only letters may label axes here ('...' is expanded by "
                           "tracer.einsum)")
    return ins, out


def _infer_einsum(op, types, subscripts):
    ins, out = parse_subscripts(op, subscripts)
    if len(ins) != len(types):
        raise op.error(f"subscripts {subscripts!r} name {len(ins)} operand(s), got {len(types)}")
    sizes: dict[str, tuple[int, int]] = {}
    for i, (s, t) in enumerate(zip(ins, types, strict=True)):
        t = tensor_arg(op, types, i)
        if len(s) != t.ndim:
            raise op.error(f"operand {i} of shape {t.shape} has {t.ndim} dimension(s) but subscript {s!r} "
                           f"names {len(s)}")
        if len(set(s)) != len(s):
            raise op.error(f"subscript {s!r} of operand {i} repeats a letter (tracer.einsum takes the diagonal "
                           "first)")
        for c, d in zip(s, t.shape, strict=True):
            if c in sizes and sizes[c][0] != d:
                raise op.error(f"letter {c!r} is {sizes[c][0]} in operand {sizes[c][1]} (shape "
                               f"{types[sizes[c][1]].shape}) but {d} in operand {i} (shape {t.shape})")
            sizes.setdefault(c, (d, i))
    if len(set(out)) != len(out) or any(c not in sizes for c in out):
        raise op.error(f"output subscript {out!r} must name distinct letters of the operands {ins}")
    return TensorType(tuple(sizes[c][0] for c in out), same_dtype(op, types))


# Relax's R.einsum(operands, subscripts). A primitive, not lowered to matmul/permute/sum: xp.einsum with
# optimize=True contracts pairwise through BLAS (tensordot) on NumPy and cuTENSOR/cuBLAS on CuPy, and the VJP
# of each operand is one more einsum (of g and the other operands), so any order of derivative stays einsum.
declare("einsum", ("*operands",), (Attr("subscripts", "str"),), infer=_infer_einsum,
        kernel=lambda xp, xs, subscripts: xp.einsum(subscripts, *xs, optimize=len(xs) > 1))
