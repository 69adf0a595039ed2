"""The log_softmax + nll_loss chain of a compiled step as two numba row kernels (NumPy executor, float32, numba).

`F.nll_loss(F.log_softmax(z, dim=1), t)` (word_language_model's loss, `F.cross_entropy` with class indices)
traces as `ls = log_softmax(z)`, `nll_loss(ls, t)`, and its adjoint as `nb = nll_loss_backward(g, ls, t)`,
`dz = nb - exp(ls) * sum(nb, axis=1, keepdims)`: a full-size log_softmax held from the forward to the backward,
a zero-filled one-hot, an exp, a multiply and a subtract, each a pass over (N, C). `rewrite(fn)` (called by
the executor when it compiles a function) replaces the loss by `fused((z, t), expr=nll_loss(log_softmax(x0)))`
and dz by `fused((z, t[, g]), expr=<the chain>)`, exprs that are the chains themselves (ir.ops.fused's
reference kernel evaluates them op by op, so the IR means what it meant). `kernel(call)`, asked by
ir.runtime.specialize for every `fused` binding, gives their numba kernels, each one pass per row in cache:

- the loss: per row the max, the float32 exps and their float64 sum, lse - z[t] in float64, summed (or kept,
  reduction "none") in float64 and rounded once;
- dz: the row's exps written into dz's row, p = e / s, dz = 0 * c - p * c with c the row's coefficient as
  grad.nll_loss_backward makes it (-g * valid / count), and at the target c * (sum of the other exps) / s,
  without the cancellation of c - p * c where p is near 1.

Values: within 1e-6 relative of the chain in float64 (exp is ir.runtime.numba_rnn's float32 exp, within 2e-7,
of the exact difference z - max: float32 arithmetic on sixteen lanes; exps below exp(-87) are +0);
NaN where the chain gives NaN (a NaN or +inf in a row, an all -inf row, a non-finite g), ignored rows (+0.0, or
NaN for a NaN row) and the loss of all-ignored targets (NaN for "mean") as the chain's. Out-of-range targets
raise nll_loss's IndexError. Left as they are: float64 (NumPy's exp is exact to the last bit), other shapes
than (N, C) with the class axis last, z of at most numba_emit.MAX_SIZE elements (a small function stays one
whole-function numba program), and chains whose log_softmax or one-hot is read elsewhere.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from ..nodes import Call, Constant, Function, Tuple, Var
from ..ops.fused import Const, Leaf, Node, parse_expr
from ..ops.loss import _checked_targets
from ..types import TensorType
from . import numba_hook
from .cross_entropy import _use_counts
from .numba_emit import MAX_SIZE

ENABLED = True  # False: functions compiled from now on keep the chain's bindings (A/B, tests)
_BLOCKS = 16  # row blocks of the loss's prange form (each takes one scratch row)

# ---------------------------------------------------------------- the IR rewrite


def _ls_node(axis: int) -> Node:
    return Node("nn.log_softmax", (Leaf(0),), {"axis": axis})


def forward_expr(axis: int, reduction: str, ignore_index: int) -> str:
    """The loss's expr: nll_loss(log_softmax(x0, axis), x1)."""
    return Node("nn.nll_loss", (_ls_node(axis), Leaf(1)), {"reduction": reduction, "ignore_index": ignore_index}).text()


def backward_expr(axis: int, reduction: str, ignore_index: int, g, sum_axis) -> str:
    """dz's expr: nb - exp(ls) * sum(nb) with nb = nll_loss_backward(g, ls, x1); g a Const or Leaf(2)."""
    nb = Node("grad.nll_loss_backward", (g, _ls_node(axis), Leaf(1)),
              {"reduction": reduction, "ignore_index": ignore_index})
    total = Node("sum", (nb,), {"axis": sum_axis, "keepdims": True})
    return Node("subtract", (nb, Node("multiply", (Node("exp", (_ls_node(axis),), {}), total), {})), {}).text()


def _fits(z, t) -> bool:
    return (isinstance(z, TensorType) and isinstance(t, TensorType) and z.ndim == 2 and z.dtype == "float32"
            and t.dtype in ("int32", "int64") and t.shape == z.shape[:1] and math.prod(z.shape) > MAX_SIZE)


def _match(i, call, bindings, producer, uses, users):
    """({binding index: new call}, dropped binding indices) for the chain at nll_loss binding i, or None."""
    ls, t = call.args
    found = producer.get(ls) if isinstance(ls, Var) else None
    if found is None or found[1].op != "nn.log_softmax":
        return None
    li, lsm = found
    z = lsm.args[0]
    if not isinstance(z, Var) or not _fits(z.type, t.type) or lsm.attrs["axis"] % 2 != 1:
        return None
    axis, reduction, ignore = lsm.attrs["axis"], call.attrs["reduction"], call.attrs["ignore_index"]
    fwd = Call("fused", (Tuple((z, t)),), {"expr": forward_expr(axis, reduction, ignore)}, call.type)
    readers = [j for j in users.get(ls, ()) if j != i]
    if uses.get(ls, 0) == 1:
        return {i: fwd}, {li}
    if uses.get(ls, 0) != 3 or len(readers) != 2:
        return None
    kinds = {bindings[j].value.op: j for j in readers}
    if set(kinds) != {"grad.nll_loss_backward", "exp"}:
        return None
    bi, ei = kinds["grad.nll_loss_backward"], kinds["exp"]
    nbc = bindings[bi].value
    g, ls2, t2 = nbc.args
    if ls2 is not ls or t2 is not t or nbc.attrs != call.attrs or uses.get(bindings[ei].var, 0) != 1:
        return None
    nb, e = bindings[bi].var, bindings[ei].var
    if uses.get(nb, 0) != 2:
        return None
    chain = _adjoint(nb, e, users, bindings, uses)
    if chain is None:
        return None
    si, mi, di, sum_axis = chain
    if isinstance(g, Constant) and g.data.shape == () and str(g.data.dtype) == "float32":
        gnode, fields = Const(float(g.data), "float32"), (z, t)
    elif isinstance(g, Var) and isinstance(g.type, TensorType) and g.type.dtype == "float32":
        gnode, fields = Leaf(2), (z, t, g)
    else:
        return None
    dz = bindings[di]
    expr = backward_expr(axis, reduction, ignore, gnode, sum_axis)
    return {i: fwd, di: Call("fused", (Tuple(fields),), {"expr": expr}, dz.value.type)}, {li, bi, ei, si, mi}


def _adjoint(nb, e, users, bindings, uses):
    """(sum, multiply, subtract binding indices, the sum's axis) of subtract(nb, multiply(e, sum(nb))), or None."""
    readers = users.get(nb, ())
    if len(readers) != 2:
        return None
    by_op = {bindings[j].value.op: j for j in readers}
    si, di = by_op.get("sum"), by_op.get("subtract")
    if si is None or di is None:
        return None
    total = bindings[si].value
    axis = total.attrs.get("axis")
    if not total.attrs.get("keepdims") or axis is None or len(axis) != 1 or axis[0] % 2 != 1:
        return None
    s = bindings[si].var
    sub = bindings[di].value
    if sub.args[0] is not nb or uses.get(s, 0) != 1 or not isinstance(sub.args[1], Var):
        return None
    m = sub.args[1]
    mi = next((j for j in users.get(e, ()) if bindings[j].var is m), None)
    if mi is None or uses.get(m, 0) != 1 or bindings[mi].value.op != "multiply":
        return None
    if {id(a) for a in bindings[mi].value.args} != {id(e), id(s)} or len(bindings[mi].value.args) != 2:
        return None
    return si, mi, di, tuple(axis)


def rewrite(fn: Function) -> Function:
    """`fn` with each log_softmax + nll_loss chain (forward and adjoint) as `fused` bindings; `fn` itself when
    there is none (it is never modified), or while numba loads (the kernels are prepared for the re-make)."""
    if not ENABLED or len(fn.blocks) != 1:
        return fn
    bindings = fn.bindings
    if not any(isinstance(b.value, Call) and b.value.op == "nn.nll_loss" for b in bindings):
        return fn
    producer = {b.var: (i, b.value) for i, b in enumerate(bindings) if isinstance(b.value, Call)}
    uses = _use_counts(fn)
    users: dict = {}
    for i, b in enumerate(bindings):
        if isinstance(b.value, Call):
            for a in b.value.args:
                if isinstance(a, Var):
                    users.setdefault(a, []).append(i)
    replace, drop = {}, set()
    for i, b in enumerate(bindings):
        if isinstance(b.value, Call) and b.value.op == "nn.nll_loss":
            found = _match(i, b.value, bindings, producer, uses, users)
            if found is not None and not (set(found[0]) | found[1]) & (set(replace) | drop):
                replace.update(found[0])
                drop |= found[1]
    if not replace:
        return fn
    if not numba_hook.ready():
        for call in replace.values():
            kernel(call)
        return fn
    out = [type(b)(b.var, replace[i]) if i in replace else b for i, b in enumerate(bindings) if i not in drop]
    return Function(fn.params, [type(fn.blocks[0])(out, fn.blocks[0].is_dataflow)], fn.body, dict(fn.attrs))


# ---------------------------------------------------------------- the kernels of the fused bindings


def _plan(call):
    """("forward" | "backward", attrs, g) for a `fused` binding this module made (g: a float, or None for a
    leaf x2), else None."""
    fields = getattr(call.args[0].type, "fields", None) if len(call.args) == 1 else None
    if fields is None or len(fields) not in (2, 3) or not _fits(fields[0], fields[1]):
        return None
    expr = call.attrs["expr"]
    if not expr.startswith(("nn.nll_loss(", "subtract(grad.nll_loss_backward(")):
        return None
    tree = parse_expr(expr)
    if tree.op == "nn.nll_loss":
        axis, attrs = tree.args[0].attrs.get("axis"), tree.attrs
        if len(fields) == 2 and isinstance(axis, int) and expr == forward_expr(axis, **attrs):
            return "forward", attrs, None
        return None
    nb = tree.args[0]
    g, ls = nb.args[0], nb.args[1]
    axis, attrs = ls.attrs.get("axis"), nb.attrs
    sum_axis = tree.args[1].args[1].attrs.get("axis") if len(tree.args) == 2 else None
    if not isinstance(axis, int) or not isinstance(sum_axis, tuple):
        return None
    if isinstance(g, Const) and len(fields) == 2:
        value = float(g.value)
    elif isinstance(g, Leaf) and g.index == 2 and len(fields) == 3 and fields[2].dtype == "float32":
        value = None
    else:
        return None
    if expr != backward_expr(axis, attrs["reduction"], attrs["ignore_index"], g, sum_axis):
        return None
    return "backward", attrs, value


def kernel(call):
    """`run(xs, out=None)` for a fused loss or dz binding of this module, else None; None also while numba loads
    (the kernels are compiled or loaded in the background for the re-make)."""
    plan = _plan(call)
    if plan is None:
        return None
    if not numba_hook.ready():
        numba_hook.prepare(("numba_nll", call.attrs["expr"], tuple(call.args[0].type.fields)),
                           functools.partial(_load, call))
        return None
    from .numba_threads import fork_safe, threads, use_parallel
    kind, attrs, g = plan
    fields = call.args[0].type.fields
    n, c = fields[0].shape
    module = _module()
    parallel = use_parallel(n * c, rows=True)

    def pick(name):
        serial = getattr(module, f"{name}_serial")
        return fork_safe(serial, getattr(module, f"{name}_parallel")) if parallel else serial
    ignore, reduction = int(attrs["ignore_index"]), attrs["reduction"]
    if kind == "forward":
        blocks = min(_BLOCKS, max(1, threads())) if parallel else 1
        return functools.partial(_forward, kernel=pick("nll_rows"), check=module.count_targets, ignore=ignore,
                                 reduction=reduction, blocks=blocks)
    garr = None if g is None else np.full(1, g, np.float32)
    return numba_hook._planned(functools.partial(_backward, kernel=pick("nll_backward"), check=module.count_targets,
                                      ignore=ignore, mean=reduction == "mean", g=garr, shape=(n, c)))


def _load(call):
    fields = call.args[0].type.fields
    xs = tuple(np.zeros(t.shape, t.dtype) for t in fields)
    with np.errstate(all="ignore"):
        kernel(call)(xs)


def _count(check, z, t, ignore) -> int:
    """The targets that count; nll_loss's IndexError for one out of range."""
    count = check(t, ignore, z.shape[1])
    if count < 0:
        _checked_targets(np, z, t, ignore)
    return count


def _forward(xs, kernel, check, ignore, reduction, blocks, out=None):
    z, t = np.ascontiguousarray(xs[0]), np.ascontiguousarray(xs[1])
    count = _count(check, z, t, ignore)
    loss = np.empty(z.shape[0], np.float64)
    kernel(z, t, ignore, loss, np.empty((blocks, z.shape[1]), np.float32))
    if reduction == "none":
        return loss.astype(np.float32)
    total = float(np.add.reduce(loss))
    if reduction == "sum":
        return np.array(total, np.float32)
    return np.array(total / count if count else math.nan, np.float32)


def _backward(xs, kernel, check, ignore, mean, g, shape, out=None):
    z, t = np.ascontiguousarray(xs[0]), np.ascontiguousarray(xs[1])
    count = _count(check, z, t, ignore)
    g = np.ascontiguousarray(xs[2], np.float32).reshape(-1) if g is None else g
    if out is None or not out.flags.c_contiguous or np.may_share_memory(out, z):
        out = np.empty(shape, np.float32)
    kernel(z, t, ignore, g, mean, count, out)
    return out


_SOURCE = '''
@njit(cache=True, error_model="numpy")
def count_targets(t, ignore, c):
    # the targets that are not ignore_index, or -1 when one of them lies outside [0, c)
    count = 0
    for i in range(t.shape[0]):
        k = t[i]
        if k != ignore:
            if k < 0 or k >= c:
                return -1
            count += 1
    return count


@njit(cache=True, error_model="numpy")
def row_max(a):
    # the max of a row in eight independent lanes (one lane's select chain does not vectorise: 3x slower); a NaN
    # is passed over, as by one chain (unless it is a[0]: then every lane, so the max, is NaN)
    n = a.shape[0]
    m0 = m1 = m2 = m3 = m4 = m5 = m6 = m7 = a[0]
    k = n - n % 8
    for j in range(0, k, 8):
        v = a[j]
        m0 = v if v > m0 else m0
        v = a[j + 1]
        m1 = v if v > m1 else m1
        v = a[j + 2]
        m2 = v if v > m2 else m2
        v = a[j + 3]
        m3 = v if v > m3 else m3
        v = a[j + 4]
        m4 = v if v > m4 else m4
        v = a[j + 5]
        m5 = v if v > m5 else m5
        v = a[j + 6]
        m6 = v if v > m6 else m6
        v = a[j + 7]
        m7 = v if v > m7 else m7
    for j in range(k, n):
        v = a[j]
        m0 = v if v > m0 else m0
    m0 = m1 if m1 > m0 else m0
    m2 = m3 if m3 > m2 else m2
    m4 = m5 if m5 > m4 else m4
    m6 = m7 if m7 > m6 else m6
    m0 = m2 if m2 > m0 else m0
    m4 = m6 if m6 > m4 else m4
    return m4 if m4 > m0 else m0


@njit(inline="always", error_model="numpy", fastmath={"contract"})
def row_exps(x, row):
    # row[j] = exp(x[j] - max) in float32 arithmetic (sixteen lanes): the difference as its float32 sum d and the
    # remainder of that rounding (TwoSum), so exp sees x[j] - max exactly, as a float64 difference would give it;
    # the max as float64 (a NaN makes its exp, so the row's sum, NaN; an -inf element's exp is +0)
    m = row_max(x)
    mn = -m
    for j in range(x.shape[0]):
        a = x[j]
        d = a + mn
        bb = d - a
        row[j] = exp_neg32_plus(d, (a - (d - bb)) + (mn - bb))
    return np.float64(m)
'''

_ROWS = '''
@njit(cache=True, error_model="numpy", fastmath={{"contract"}}{extra})
def nll_rows_{name}(x, t, ignore, loss, scratch):
    # loss[i] = logsumexp(x[i]) - x[i, t[i]] in float64; 0 for an ignored row
    n = x.shape[0]
    nb = scratch.shape[0]
    for b in {loop}(nb):
        row = scratch[b]
        for i in range(b * n // nb, (b + 1) * n // nb):
            k = t[i]
            if k == ignore:
                loss[i] = 0.0
                continue
            md = row_exps(x[i], row)
            loss[i] = (md + math.log(row_sum(row))) - np.float64(x[i, k])


@njit(cache=True, error_model="numpy", fastmath={{"contract"}}{extra})
def nll_backward_{name}(x, t, ignore, g, mean, count, out):
    # out = nll_loss_backward(g, ls, t) - softmax(x) * coef, coef = -g * valid (/ count): grad.nll_loss_backward's
    n, c = x.shape
    scale = np.float32(max(count, 1))
    for i in {loop}(n):
        row = out[i]
        md = row_exps(x[i], row)
        k = t[i]
        valid = k != ignore
        gi = g[0] if g.shape[0] == 1 else g[i]
        cf = np.float32(-gi) * np.float32(1.0 if valid else 0.0)
        if mean:
            cf = np.float32(cf / scale)
        cd = np.float64(cf)
        zc = np.float64(np.float32(0.0) * cf)  # the one-hot's 0 * coef: its sign, NaN for a non-finite coef
        et = 0.0
        if valid:
            et = np.float64(row[k])
            row[k] = 0.0
        others = row_sum(row)
        inv = 1.0 / (others + et)
        sd = 0.0 if cd == 0.0 else cd  # the one-hot row's sum: coef, or +0.0 (NumPy's sum starts from +0.0)
        inv32, sd32, zc32 = np.float32(inv), np.float32(sd), np.float32(zc)  # sd and zc are float32 values
        for j in range(c):
            row[j] = zc32 - (row[j] * inv32) * sd32  # float32 (sixteen lanes): within 3 ulp of the float64 form
        if valid:
            if math.isfinite(cd) and cd != 0.0:  # c * (1 - p) as c * (the others' share): no cancellation near p = 1
                row[k] = np.float32(cd * (others * inv) + 0.0)
            else:
                row[k] = np.float32(cd - (et * inv) * sd)
'''

_HEADER = '''"""Generated by ir.runtime.numba_nll: log_softmax + nll_loss rows and their backward."""
import math

import numpy as np
from numba import njit, prange

'''


@functools.cache
def _module():
    from .numba_composite import ROW_SUMS
    from .numba_gen import load
    from .numba_rnn import MATH_F32
    body = "".join(_ROWS.format(name=name, loop=loop, extra=extra)
                   for name, loop, extra in (("serial", "range", ""), ("parallel", "prange", ", parallel=True")))
    return load(_HEADER + MATH_F32 + ROW_SUMS + _SOURCE + body, "nll")


__all__ = ["backward_expr", "forward_expr", "kernel", "rewrite"]
