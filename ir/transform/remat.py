"""Memory rewrites of a compiled step that change no value.

**Recompute cheap activations instead of keeping them** (RecomputeActivations). In a transformer
block `h2 = gelu(h1) @ w`, the backward pass needs `h1` (GELU's VJP) and `gelu(h1)` (the weight
gradient of the matmul), so both stay alive from the forward pass to the backward pass: two arrays
of the MLP's width for every block. When the input stays alive anyway, computing the activation a
second time just before its first backward use costs one elementwise pass and frees one array per
block for the whole span between. This is the choice PyTorch's min-cut partitioner makes for
pointwise ops under torch.compile. Only activations (and LayerNorm, whose VJP reads its input too) of
at least `min_bytes` whose uses fall into two groups (forward, backward) far apart are recomputed,
and only when each input's last use is at or after the recomputation (or the input is tiny, as
LayerNorm's bias), so no large value lives longer than before.

**ReLU's mask from its output** (ReluMask). ReLU's VJP selects the gradient where `x <= 0`; the same
elements are those where `relu(x) <= 0` (0 exactly when x <= 0, NaN where x is NaN). Reading the
output, which the next matmul's weight gradient keeps anyway, lets the input die in the forward pass.
"""
from __future__ import annotations

import math

import numpy as np

from ..nodes import Binding, Call, Constant, Function, Var, free_vars, substitute
from ..ops.registry import make_call
from ..types import TensorType
from .base import FunctionPass, replace_bindings

ACTIVATIONS = frozenset({"nn.gelu", "tanh", "sigmoid", "nn.silu", "nn.layer_norm"})
MIN_GAP = 8  # bindings between the forward and the backward use


def _nbytes(t) -> int:
    return math.prod(t.shape) * np.dtype(t.dtype).itemsize if isinstance(t, TensorType) else 0


class RecomputeActivations(FunctionPass):
    """Recompute a kept activation right before its first backward use (see the module docstring)."""

    def __init__(self, min_bytes: int = 512 * 1024, func_names=None):
        super().__init__(func_names)
        self.min_bytes = min_bytes

    def transform_function(self, fn: Function) -> Function:
        if len(fn.blocks) != 1:
            return fn
        bindings = fn.blocks[0].bindings
        n = len(bindings)
        uses: dict[Var, list[int]] = {}
        for i, b in enumerate(bindings):
            for u in free_vars(b.value):
                uses.setdefault(u, []).append(i)
        for u in free_vars(fn.body):
            uses.setdefault(u, []).append(n)
        insert: dict[int, list[Binding]] = {}
        renames: list[tuple[int, Var, Var]] = []  # (from binding index, old var, recomputed var)
        for b in bindings:
            value = b.value
            if not (isinstance(value, Call) and value.op in ACTIVATIONS and _nbytes(b.var.type) >= self.min_bytes):
                continue
            if any(not isinstance(a, Var | Constant) for a in value.args):
                continue
            at = uses.get(b.var, [])
            if len(at) < 2 or at[-1] == n:  # returned: alive to the end anyway, a copy only adds a buffer
                continue
            gap, k = max((at[j + 1] - at[j], j) for j in range(len(at) - 1))
            late = at[k + 1]
            if gap < MIN_GAP or late >= n:
                continue
            # every input must be alive at the recomputation anyway, or be tiny (LayerNorm's beta)
            small = _nbytes(b.var.type) // 64
            if any(isinstance(a, Var) and max(uses[a]) < late and _nbytes(a.type) > small for a in value.args):
                continue
            again = Var(f"{b.var.name}_again", b.var.type)
            insert.setdefault(late, []).append(Binding(again, value))
            renames.append((late, b.var, again))
        if not renames:
            return fn
        out: list[Binding] = []
        for i, b in enumerate(bindings):
            out.extend(insert.get(i, ()))
            mapping = {old: new for start, old, new in renames if i >= start}
            out.append(Binding(b.var, substitute(b.value, mapping)) if mapping else b)
        return replace_bindings(fn, out, fn.body)


class ReluMask(FunctionPass):
    """less_equal(x, 0) where y = relu(x) is bound -> less_equal(y, 0): the same mask, read from y."""

    def transform_function(self, fn: Function) -> Function:
        if len(fn.blocks) != 1:
            return fn
        relu_of: dict[Var, Var] = {}
        out, changed = [], False
        for b in fn.blocks[0].bindings:
            v = b.value
            if isinstance(v, Call) and v.op == "nn.relu" and isinstance(v.args[0], Var):
                relu_of.setdefault(v.args[0], b.var)
            elif (isinstance(v, Call) and v.op == "less_equal" and isinstance(v.args[0], Var) and v.args[0] in relu_of
                  and isinstance(v.args[1], Constant) and np.asarray(v.args[1].data).size == 1
                  and float(np.asarray(v.args[1].data)) == 0.0 and v.args[0].type.is_float):
                b = Binding(b.var, make_call("less_equal", [relu_of[v.args[0]], v.args[1]]))
                changed = True
            out.append(b)
        return replace_bindings(fn, out, fn.body) if changed else fn


__all__ = ["ACTIVATIONS", "RecomputeActivations", "ReluMask"]
