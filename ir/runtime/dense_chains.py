"""A dense layer's bias and relu (or residual), and relu's backward, each as one pass (NumPy executor).

An MLP's hidden layer, `relu(add(matmul(x, w), b))`, runs as three bindings: the GEMM, the bias added in
place, and the relu into an array of its own (two passes over the (M, N) result after the GEMM). Its VJP is
`where(less_equal(r, 0), 0, g)` with r the relu's output: a bool mask of the full size, then a select that
NumPy's masked copy runs element by element with a branch (about 1.1 ms on (256, 1024) float32 with a random
mask, 1 thread). `rewrite(fn)` (called by the executor when it compiles a function) replaces each by one
standard `fused` binding whose `expr` is the chain itself, so the IR means what it meant and its reference
kernel evaluates it op by op:

- `fused((x, w, b), expr="nn.relu(add(matmul(x0, x1), x2))")`: the GEMM into the binding's own (planned)
  storage, then bias and relu in one pass over it in place;
- `fused((r, g), expr="where(less_equal(x0, const(0.0)), const(0.0), x1)")`: one branchless select;
- with RESIDUAL on, a projection plus residual `add(r, add(matmul(x, w), b))` (the GPT's attention and MLP
  outputs; either order in each sum): `fused((x, w, b, r), expr="add(x3, add(matmul(x0, x1), x2))")`, the GEMM
  into its storage, then out = r + (out + b) in one pass (two in-place adds before).

Not made: the GPT's `nn.gelu(add(matmul(h, w), b))`: its sum is read three times (the GELU, the adjoint's
recomputed GELU and the GELU's VJP), so no binding there can be fused away; and a loop of bias + numba's GELU
(ir.runtime.numba_vjp's gelu_tanh, same formula and order) over rows was not bit-equal to that kernel's flat
loop (an element in the scalar tail of a row vs the vector body: 1 in 72k differed by one ulp).

`kernel(call)`, asked by ir.runtime.specialize for every `fused` binding, gives the kernel for those exprs:
numba loops (the `fast` extra), or NumPy's where numba is not loaded or an operand is not C-contiguous: the
bias and the relu as in-place ufuncs into the GEMM's output, and the select as an integer product of the
gradient's bits with the kept mask. The rewrite itself is made only with numba's loops (numba_hook.ENABLED, and
once it is ready: while numba loads, the loops are prepared and the executor makes the function again): on
the plain NumPy path the fused forms measured no faster than the specialized bindings (a planned relu, and
where's branchless select into planned storage, ir.runtime.specialize), 1.01-1.04x the step's time.
Values: the same bits as the replaced bindings (NaN, inf and -0.0 included: NumPy's maximum(-0.0, 0) is
+0.0 and maximum(nan, 0) nan; x <= 0 is false for nan, so the gradient passes there as `where` says; a sum of
two NaNs is the first operand's, as x86's add gives it: the residual's loop spells it out (`_add`), since LLVM
may commute a sum's operands).

Left as they are: bindings read elsewhere (the GEMM's or the sum's result, the mask), biases that are not
one row of the last axis, a residual of another type than the result, dtypes other than float32/64, a fill
that is not +0.0, and arrays of at most numba_emit.MAX_SIZE elements (a small function stays one whole-function
numba program, which takes no `fused` binding; dispatch dominates such steps anyway).
"""
from __future__ import annotations

import functools
import math

import numpy as np

from ..nodes import Binding, Call, Constant, Function, Tuple, Var
from ..ops.fused import Const, Leaf, Node, parse_expr
from ..transform.base import replace_bindings
from ..types import TensorType
from . import numba_hook
from .cross_entropy import _use_counts
from .numba_emit import MAX_SIZE
from .numba_threads import fork_safe, use_parallel

ENABLED = True  # False: functions compiled from now on keep the three bindings (A/B, tests)
# The residual form (below) is off: on the GPT (8 output projections + residual, (16, 64, 128) float32) the step
# A/B measured 0.999-1.005 (per-round medians, 3 runs, 1 thread) though the pass itself is 2.1-2.6x faster
# (saves ~25 us per projection of an ~85 ms step, below the noise). True: functions compiled from now on take it.
RESIDUAL = False
_FLOATS = ("float32", "float64")
_INT_VIEW = {"float32": np.int32, "float64": np.int64}  # the select's integer view of the same width


def _scalar(e, dtype) -> float | None:
    """The value of a 0-d constant of `dtype`, else None."""
    if isinstance(e, Constant) and e.data.shape == () and str(e.data.dtype) == dtype:
        return e.data.item()
    return None


def _plus_zero(e, dtype) -> bool:
    v = _scalar(e, dtype)
    return v is not None and v == 0 and not math.copysign(1.0, v) < 0


def _bias_row(t, out: TensorType) -> bool:
    """t broadcasts along the last axis only: shape (N,), (1, N), ... with N the result's last dimension."""
    if not isinstance(t, TensorType) or t.dtype != out.dtype or len(t.shape) > len(out.shape) or not t.shape:
        return False
    return t.shape[-1] == out.shape[-1] and all(d == 1 for d in t.shape[:-1])


def _big(t: TensorType) -> bool:
    return math.prod(t.shape) > MAX_SIZE


def _private(e, producer, uses):
    """(index, call) of the binding defining var e when e is read exactly once, else None."""
    return producer.get(e) if isinstance(e, Var) and uses.get(e, 0) == 1 else None


def _match_forward(call, producer, uses):
    """(fused call, interior binding indices) for relu(add(matmul(x, w), b)), else None."""
    t = call.type
    found = _private(call.args[0], producer, uses)
    if found is None or found[1].op != "add" or found[1].type != t or call.attrs or found[1].attrs:
        return None
    linear = _linear(found[1], t, producer, uses)
    if linear is None:
        return None
    xs, inner, mm_index = linear
    expr = Node("nn.relu", (inner,), {}).text()
    return Call("fused", (Tuple(xs),), {"expr": expr}, t), (found[0], mm_index)


def _match_residual(call, producer, uses):
    """(fused call, interior binding indices) for add(r, add(matmul(x, w), b)) (either order in each sum, r of
    the result's type: a residual stream), else None."""
    t = call.type
    if call.attrs:
        return None
    for j in (0, 1):
        found = _private(call.args[j], producer, uses)
        r = call.args[1 - j]
        if found is None or found[1].op != "add" or found[1].type != t or found[1].attrs or r.type != t:
            continue
        linear = _linear(found[1], t, producer, uses)
        if linear is None:
            continue
        (x, w, bias), inner, mm_index = linear
        parts = (Leaf(3), inner) if j == 1 else (inner, Leaf(3))
        expr = Node("add", parts, {}).text()
        return Call("fused", (Tuple((x, w, bias, r)),), {"expr": expr}, t), (found[0], mm_index)
    return None


def _linear(add, t, producer, uses):
    """((x, w, b), the sum as an expr of leaves 0-2, the matmul's binding index) for add = add(matmul(x, w), b)
    (either order) with the product read only there and b one row of the last axis, else None."""
    for k in (0, 1):
        mm = _private(add.args[k], producer, uses)
        bias = add.args[1 - k]
        if mm is None or mm[1].op != "matmul" or mm[1].type != t or mm[1].attrs or not _bias_row(bias.type, t):
            continue
        x, w = mm[1].args
        if (not isinstance(x.type, TensorType) or not isinstance(w.type, TensorType) or x.type.ndim < 2
                or w.type.ndim != 2 or x.type.dtype != t.dtype or w.type.dtype != t.dtype):
            continue
        inner = Node("matmul", (Leaf(0), Leaf(1)), {})
        parts = (inner, Leaf(2)) if k == 0 else (Leaf(2), inner)
        return (x, w, bias), Node("add", parts, {}), mm[0]
    return None


def _match_backward(call, producer, uses):
    """(fused call, interior binding indices) for where(less_equal(a, c), 0, g), else None."""
    t = call.type
    mask, fill, g = call.args
    found = _private(mask, producer, uses)
    if found is None or found[1].op != "less_equal" or not _plus_zero(fill, t.dtype):
        return None
    mi, less = found
    a, c = less.args
    threshold = _scalar(c, t.dtype)
    if threshold is None or a.type != t or g.type != t:
        return None
    expr = Node("where", (Node("less_equal", (Leaf(0), Const(threshold, t.dtype)), {}), Const(0.0, t.dtype),
                          Leaf(1)), {}).text()
    return Call("fused", (Tuple((a, g)),), {"expr": expr}, t), (mi,)


_MATCH = {"nn.relu": _match_forward, "where": _match_backward, "add": _match_residual}


def rewrite(fn: Function) -> Function:
    """`fn` with each dense layer's bias + relu and each relu backward as one `fused` binding; `fn` itself when
    there is none (it is never modified)."""
    if not ENABLED or not numba_hook.ENABLED or len(fn.blocks) != 1:
        return fn
    bindings = fn.bindings
    candidates = [i for i, b in enumerate(bindings) if isinstance(b.value, Call)
                  and b.value.op in _MATCH and (RESIDUAL or b.value.op != "add")
                  and isinstance(b.value.type, TensorType) and b.value.type.dtype in _FLOATS and _big(b.value.type)]
    if not candidates:
        return fn
    producer = {b.var: (i, b.value) for i, b in enumerate(bindings) if isinstance(b.value, Call)}
    uses = _use_counts(fn)
    found = {}  # binding index -> (its fused call, the interior bindings it takes)
    taken = set()  # bindings a match replaces or drops: each in one match at most
    for i in candidates:
        call = bindings[i].value
        match = _MATCH[call.op](call, producer, uses)
        if match is not None and i not in taken and not taken.intersection(match[1]):
            found[i] = match
            taken.update((i, *match[1]))
    if not found:
        return fn
    if not numba_hook.ready():  # numba loads in the background: its loops are prepared, the bindings stay for now
        for call, _ in found.values():
            kernel(call)
        return fn
    drop = {j for _, interior in found.values() for j in interior}
    return replace_bindings(fn, [Binding(b.var, found[i][0]) if i in found else b for i, b in enumerate(bindings)
                                 if i not in drop], fn.body)


# ---------------------------------------------------------------- the kernels of the two fused forms


def _bias_first(add):
    """Whether the bias comes first in add = add(matmul(x0, x1), x2) (either order); None for another tree."""
    if not isinstance(add, Node) or add.op != "add" or add.attrs:
        return None
    for k in (0, 1):
        mm, bias = add.args[k], add.args[1 - k]
        if (isinstance(mm, Node) and mm.op == "matmul" and not mm.attrs and isinstance(bias, Leaf)
                and bias.index == 2 and all(isinstance(a, Leaf) and a.index == n for n, a in enumerate(mm.args))):
            return k == 1
    return None


def _form(expr: str):
    """("linear_relu", the bias first in the sum), ("linear_residual", the bias first, the residual first) or
    ("relu_grad", threshold, dtype) for the exprs `rewrite` makes, else None."""
    tree = parse_expr(expr)
    if not isinstance(tree, Node) or tree.attrs:
        return None
    if tree.op == "nn.relu":
        first = _bias_first(tree.args[0])
        return None if first is None else ("linear_relu", first)
    if tree.op == "add":
        for j in (0, 1):
            r, inner = tree.args[j], tree.args[1 - j]
            first = _bias_first(inner)
            if isinstance(r, Leaf) and r.index == 3 and first is not None:
                return ("linear_residual", first, j == 0)
        return None
    if tree.op == "where" and len(tree.args) == 3:
        less, fill, g = tree.args
        if (isinstance(less, Node) and less.op == "less_equal" and not less.attrs and isinstance(less.args[0], Leaf)
                and less.args[0].index == 0 and isinstance(less.args[1], Const) and isinstance(fill, Const)
                and isinstance(g, Leaf) and g.index == 1 and fill.dtype == less.args[1].dtype
                and fill.value == 0 and math.copysign(1.0, fill.value) > 0):
            return ("relu_grad", float(less.args[1].value), less.args[1].dtype)
    return None


def kernel(call):
    """The kernel (`run(xs, out=None)`, takes planned storage) of a `fused` binding whose expr is one of
    `rewrite`'s forms on types it covers, else None."""
    expr = call.attrs.get("expr", "")
    if not expr.startswith(("nn.relu(add(", "where(less_equal(x0", "add(x3, add(", "add(add(")):
        return None
    form = _form(expr)
    fields = getattr(call.args[0].type, "fields", None) if len(call.args) == 1 else None
    out = call.type
    if form is None or fields is None or not isinstance(out, TensorType) or out.dtype not in _FLOATS \
            or not out.shape or 0 in out.shape or not all(isinstance(f, TensorType) for f in fields):
        return None
    dtype = np.dtype(out.dtype)
    if form[0] in ("linear_relu", "linear_residual"):
        residual = form[0] == "linear_residual"
        if len(fields) != 3 + residual or (residual and fields[3] != out):
            return None
        x, w, b = fields[:3]
        if (x.ndim < 2 or w.ndim != 2 or not _bias_row(b, out) or x.dtype != out.dtype or w.dtype != out.dtype
                or out.shape != (*x.shape[:-1], w.shape[1]) or x.shape[-1] != w.shape[0]):
            return None
        fast = _numba("bias_residual" if residual else "bias_relu", dtype, math.prod(out.shape))
        return _planned(functools.partial(_linear_residual if residual else _linear_relu, shape=out.shape,
                                          dtype=dtype, n=out.shape[-1], rows=math.prod(out.shape[:-1]),
                                          first=form[1:], fast=fast))
    if len(fields) != 2 or any(f != out for f in fields) or form[2] != out.dtype:
        return None
    fast = _numba("relu_grad", dtype, math.prod(out.shape))
    t = dtype.type(form[1])
    flat = (math.prod(out.shape[:-1]), out.shape[-1])
    return _planned(functools.partial(_relu_grad, t=t, zero=dtype.type(0), flat=flat, view=_INT_VIEW[out.dtype],
                                      fast=fast))


def _planned(fn):
    # as ir.runtime.specialize.planned marks a kernel: it takes out= and returns out or a new array
    fn.takes_out, fn.scratch, fn.fresh = True, (), True
    return fn


def _gemm(x, w, out, rows, n):
    """x @ w into out (made when None) and out as (rows, n)."""
    y = out.reshape(rows, n)
    if x.ndim == 2:
        np.matmul(x, w, out=out)
    elif x.flags.c_contiguous:  # ir.runtime.specialize's linear layer: (..., K) @ (K, N) as one 2-D GEMM
        np.matmul(x.reshape(rows, -1), w, out=y)
    else:
        np.matmul(x, w, out=out)
    return y


def _linear_relu(xs, shape, dtype, n, rows, first, fast, out=None):
    x, w, b = xs
    if out is None:
        out = np.empty(shape, dtype)
    y = _gemm(x, w, out, rows, n)
    b = b.reshape(n)
    if fast is not None:
        fast(y, np.ascontiguousarray(b), dtype.type(0), first[0])
    else:
        np.add(*((b, y) if first[0] else (y, b)), out=y)
        np.maximum(y, dtype.type(0), out=y)
    return out


def _linear_residual(xs, shape, dtype, n, rows, first, fast, out=None):
    # out = r + (x @ w + b), each sum in the IR's operand order
    x, w, b, r = xs
    if out is None:
        out = np.empty(shape, dtype)
    y = _gemm(x, w, out, rows, n)
    b = b.reshape(n)
    bias_first, r_first = first
    if fast is not None and r.flags.c_contiguous:
        fast(y, np.ascontiguousarray(b), r.reshape(rows, n), bias_first, r_first)
    else:
        np.add(*((b, y) if bias_first else (y, b)), out=y)
        np.add(*((r, out) if r_first else (out, r)), out=out)
    return out


def _relu_grad(xs, t, zero, flat, view, fast, out=None):
    a, g = xs
    if out is None:
        out = np.empty(g.shape, g.dtype)
    if fast is not None and a.flags.c_contiguous and g.flags.c_contiguous:
        fast(a.reshape(flat), g.reshape(flat), out.reshape(flat), t, zero)
        return out
    # NumPy: the kept elements' bits times 1, the others' times 0 (+0.0): where's bits without its branches
    keep = np.less_equal(a, t)
    np.logical_not(keep, out=keep)
    np.multiply(g.view(view), keep, out=out.view(view))
    return out


# ---------------------------------------------------------------- numba (the fast extra)

_SOURCE = '''"""Generated by ir.runtime.dense_chains: bias + relu or + residual in place, relu's backward."""
from numba import njit, prange


@njit(cache=True, error_model="numpy")
def bias_relu_serial(y, b, zero, first):
    for i in range(y.shape[0]):
        _row(y[i], b, zero, first)


@njit(cache=True, error_model="numpy", parallel=True)
def bias_relu_parallel(y, b, zero, first):
    for i in prange(y.shape[0]):
        _row(y[i], b, zero, first)


@njit(cache=True, error_model="numpy", inline="always")
def _row(y, b, zero, first):
    # the sum in the IR's operand order: x86 hands back the first operand's NaN where both are NaN
    if first:
        for j in range(y.shape[0]):
            v = b[j] + y[j]
            y[j] = v if v > zero or v != v else zero
    else:
        for j in range(y.shape[0]):
            v = y[j] + b[j]
            y[j] = v if v > zero or v != v else zero


@njit(cache=True, error_model="numpy")
def bias_residual_serial(y, b, r, first, r_first):
    for i in range(y.shape[0]):
        _residual_row(y[i], b, r[i], first, r_first)


@njit(cache=True, error_model="numpy", parallel=True)
def bias_residual_parallel(y, b, r, first, r_first):
    for i in prange(y.shape[0]):
        _residual_row(y[i], b, r[i], first, r_first)


@njit(cache=True, error_model="numpy", inline="always")
def _residual_row(y, b, r, first, r_first):
    # y = r + (y + b), both sums in the IR's operand order
    if first and r_first:
        for j in range(y.shape[0]):
            y[j] = _add(r[j], _add(b[j], y[j]))
    elif first:
        for j in range(y.shape[0]):
            y[j] = _add(_add(b[j], y[j]), r[j])
    elif r_first:
        for j in range(y.shape[0]):
            y[j] = _add(r[j], _add(y[j], b[j]))
    else:
        for j in range(y.shape[0]):
            y[j] = _add(_add(y[j], b[j]), r[j])


@njit(cache=True, error_model="numpy", inline="always")
def _add(a, c):
    # a + c as NumPy's add on x86: both NaN, the first operand's (quieted); LLVM may swap a sum's operands
    s = a + c
    return a + a if s != s and a != a else s


@njit(cache=True, error_model="numpy")
def relu_grad_serial(a, g, out, t, zero):
    for i in range(out.shape[0]):
        for j in range(out.shape[1]):
            out[i, j] = zero if a[i, j] <= t else g[i, j]


@njit(cache=True, error_model="numpy", parallel=True)
def relu_grad_parallel(a, g, out, t, zero):
    for i in prange(out.shape[0]):
        for j in range(out.shape[1]):
            out[i, j] = zero if a[i, j] <= t else g[i, j]
'''


@functools.cache
def _module():
    from .numba_gen import load
    return load(_SOURCE, "dense")


def _numba(name, dtype, size):
    """The numba loop `name` for arrays of `dtype` and `size` elements, or None for NumPy's path (numba not
    wanted; still loading: the loop is prepared for the executor's re-make)."""
    if not numba_hook.ENABLED:
        return None
    if not numba_hook.ready():
        numba_hook.prepare(("dense", name, dtype.name, size), functools.partial(_load, name, dtype, size))
        return None
    m = _module()
    serial = getattr(m, f"{name}_serial")
    return fork_safe(serial, getattr(m, f"{name}_parallel")) if use_parallel(size) else serial


def _load(name, dtype, size):
    m, z, t = _module(), np.zeros((1, 1), dtype), dtype.type(0)
    for form in ("serial", "parallel") if use_parallel(size) else ("serial",):  # the pool as numba_threads starts it
        run = getattr(m, f"{name}_{form}")
        if name == "bias_relu":
            run(z, np.zeros(1, dtype), t, False)
        elif name == "bias_residual":
            run(z, np.zeros(1, dtype), z, False, False)
        else:
            run(z, z, np.empty_like(z), t, t)


__all__ = ["ENABLED", "kernel", "rewrite"]
