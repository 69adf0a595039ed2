"""A transposed weight read by many matmuls, copied once into C order (NumPy executor only).

An RNN's step computes h @ W_hh^T, with W_hh^T traced as one permute_dims(W_hh, (1, 0)) (a view, F-ordered)
read by every time step. OpenBLAS takes word_language_model's (20, 200) @ (200, 800) in 150 us from that view
against 93 us from a C-ordered copy (1 thread), so 70 products a step cost 4 ms more than one 640 KB copy.
`rewrite(fn)` turns each 2-D permute_dims(w, (1, 0)) of at least `MIN_SIZE` elements that is read only as the
right operand of matmuls, at least `MIN_READS` times, into `layout.transpose_copy(w)` (ir/ops/rnn_cell.py): the
same values, in C order. A transposed weight read once (a linear layer's), read by anything else, returned or
small is left a view. The copy's bytes count in the executor's peak_bytes (ir.runtime.memory's
`estimate_peak_bytes`, which reads the function before this rewrite, counts the view as free).
"""
from __future__ import annotations

from ..nodes import Call, Function, Var
from ..types import TensorType

MIN_READS = 2
MIN_SIZE = 1 << 14  # elements: below, the products take microseconds either way and the copy is not worth its bytes
_FLOATS = ("float32", "float64")


def _reads(fn: Function) -> dict[Var, list]:
    """var -> [(op, argument position)] of every call reading it; the body's reads as ("return", -1)."""
    reads: dict[Var, list] = {}
    for b in fn.bindings:
        v = b.value
        for k, a in enumerate(getattr(v, "args", ()) if isinstance(v, Call) else ()):
            if isinstance(a, Var):
                reads.setdefault(a, []).append((v.op, k))
        if not isinstance(v, Call):  # tuples, items, aliases: read in a way this pass does not follow
            for a in getattr(v, "fields", ()) or (getattr(v, "tuple_value", None),):
                if isinstance(a, Var):
                    reads.setdefault(a, []).append(("other", -1))
            if isinstance(v, Var):
                reads.setdefault(v, []).append(("other", -1))
    body = fn.body
    for a in getattr(body, "fields", ()) or (body,):
        if isinstance(a, Var):
            reads.setdefault(a, []).append(("return", -1))
    return reads


def _transposed_weight(call) -> bool:
    t = call.type
    return (isinstance(call, Call) and call.op == "permute_dims" and tuple(call.attrs.get("axes") or ()) == (1, 0)
            and isinstance(t, TensorType) and t.ndim == 2 and t.dtype in _FLOATS
            and t.shape[0] * t.shape[1] >= MIN_SIZE)


def rewrite(fn: Function) -> Function:
    """`fn` with each transposed weight that many matmuls read as `layout.transpose_copy`; `fn` itself when there
    is none (it is never modified)."""
    if len(fn.blocks) != 1:
        return fn
    reads = _reads(fn)
    out, changed = [], False
    for b in fn.bindings:
        r = reads.get(b.var, [])
        if _transposed_weight(b.value) and len(r) >= MIN_READS and all(use == ("matmul", 1) for use in r):
            b = type(b)(b.var, Call("layout.transpose_copy", b.value.args, {}, b.value.type))
            changed = True
        out.append(b)
    if not changed:
        return fn
    return Function(fn.params, [type(fn.blocks[0])(out, fn.blocks[0].is_dataflow)], fn.body, dict(fn.attrs))


__all__ = ["MIN_READS", "rewrite"]
