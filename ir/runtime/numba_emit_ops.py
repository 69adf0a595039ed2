"""The op emitters of ir.runtime.numba_emit: the non-elementwise bindings of a whole-function numba program.

Each emitter `emit(g, op, attrs, args, t)` takes the generator (numba_emit._Gen), the binding's op, attributes,
operand values and result type, writes the lines computing it and returns the result's value; see numba_emit
for what each does to values and memory. Anything it does not emit raises Unsupported.
"""
from __future__ import annotations

import math

_DTYPES = {"float32": "f32", "float64": "f64", "bool": "boolean"}
_INTS = ("int32", "int64")


class Unsupported(Exception):
    """Something the generator does not emit: the whole function keeps the executor's path."""


def _float(args, t, n=None):
    if any(a.dtype not in ("float32", "float64") for a in args) or t.dtype not in ("float32", "float64"):
        raise Unsupported("non-float operand")
    if n is not None and len(args) != n:
        raise Unsupported("arity")


def _sum(g, op, attrs, args, t):
    x = args[0]
    _float(args, t, 1)
    if x.dtype != t.dtype:
        raise Unsupported("sum form")
    nd = len(x.shape)
    axes = tuple(range(nd)) if attrs["axis"] is None or not nd else tuple(sorted({a % nd for a in attrs["axis"]}))
    keep = attrs["keepdims"]
    n = math.prod(x.shape[a] for a in axes)
    scale = f" / {float(n)!r}" if op == "mean" else ""
    out_index = [("0" if keep else None) if k in axes else f"i{k}" for k in range(nd)]
    return g.reduce(x, axes, t.shape, out_index, t.dtype, scale)


def _collapse(g, op, attrs, args, t):
    x = args[0]
    _float(args, t, 1)
    shape = tuple(attrs["shape"])
    lead = len(x.shape) - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, d in enumerate(shape) if d == 1 and x.shape[lead + i] != 1)
    if not axes:
        return x  # NumPy's kernel returns x itself
    out_index = [None if k < lead else ("0" if k in axes else f"i{k}") for k in range(len(x.shape))]
    return g.reduce(x, axes, t.shape, out_index, t.dtype, "")


def _matmul(g, op, attrs, args, t):
    a, b = args
    _float(args, t, 2)
    if len(a.shape) != 2 or len(b.shape) != 2 or a.dtype != t.dtype or b.dtype != t.dtype:
        raise Unsupported("matmul form")
    a, b = (g.contiguous(v) for v in (a, b))
    out = g.new(t.shape, t.dtype)
    g.empty(out)
    g.line(f"    np.dot({a.name}, {b.name}, {out.name})", a, b, out)
    return out


def _permute(g, op, attrs, args, t):
    x = args[0]
    nd = len(x.shape)
    axes = tuple(reversed(range(nd))) if attrs["axes"] is None else tuple(a % nd for a in attrs["axes"])
    if axes == tuple(range(nd)):
        return x
    if nd == 2:
        layout = {"C": "F", "F": "C"}.get(x.layout, "A")
        return g.view(x, t.shape, layout, f"    {{}} = {x.name}.T")
    return g.view(x, t.shape, "A", f"    {{}} = np.transpose({x.name}, {axes!r})")


def _reshape(g, op, attrs, args, t):
    x = args[0]
    if t.shape == x.shape:
        return x
    if x.layout != "C":
        c = g.new(x.shape, x.dtype)
        g.line(f"    {c.name} = np.ascontiguousarray({x.name})", x)
        x = c
    return g.view(x, t.shape, "C", f"    {{}} = {x.name}.reshape({t.shape!r})")


def _softmax(g, op, attrs, args, t):
    x = args[0]
    _float(args, t, 1)
    nd = len(x.shape)
    if not nd or attrs["axis"] % nd != nd - 1 or x.dtype != t.dtype:
        raise Unsupported("softmax axis")
    out = g.new(t.shape, t.dtype)
    g.empty(out)
    f32 = t.dtype == "float32"
    T = _DTYPES[t.dtype]
    heads, ind = g.loops(x.shape[:-1])
    lead = ", ".join(f"i{k}" for k in range(nd - 1))
    at = f"{lead}, j" if lead else "j"
    m, s, e, d, ls = (g.local(p) for p in ("m", "s", "e", "d", "ls"))
    # exp of x - max <= 0 in float64: numba_math's branch-free polynomial for float32 rows (the loop
    # vectorises; exp(-160) is 0 to float32), libm's for float64; NaN stays NaN
    exp = f"exp_reduced({d} if ({d} > -160.0 or {d} != {d}) else -160.0)" if f32 else f"math.exp({d})"
    n = x.shape[-1]
    lines = [*heads,
             f"{ind}{m} = {x.name}[{lead + ', ' if lead else ''}0]",
             f"{ind}for j in range(1, {n}):",
             f"{ind}    {e} = {x.name}[{at}]",
             f"{ind}    if {e} > {m} or {e} != {e}:",  # NumPy's max: NaN wins
             f"{ind}        {m} = {e}",
             f"{ind}{s} = 0.0",
             f"{ind}for j in range({n}):",
             f"{ind}    {d} = f64({x.name}[{at}]) - f64({m})",
             f"{ind}    {s} += {exp}"]
    if op == "nn.log_softmax":
        lines += [f"{ind}{ls} = math.log({s})",
                  f"{ind}for j in range({n}):",
                  f"{ind}    {out.name}[{at}] = {T}(f64({x.name}[{at}]) - f64({m}) - {ls})"]
    else:
        lines += [f"{ind}for j in range({n}):",
                  f"{ind}    {d} = f64({x.name}[{at}]) - f64({m})",
                  f"{ind}    {out.name}[{at}] = {T}({exp} / {s})"]
    g.line("\n".join(lines), x, out)
    return out


def _cross_entropy(g, op, attrs, args, t):
    p, q = (g.settle(a, a.shape) for a in args)
    _float(args, t, 2)
    if p.shape != q.shape:
        raise Unsupported("cross-entropy form")
    out = g.new((), t.dtype)
    g.empty(out)
    heads, ind = g.loops(p.shape)
    body = []
    a, b = g.elem(p, p.shape, body, ind), g.elem(q, q.shape, body, ind)
    acc = g.local("acc")
    scale = f" / {float(p.shape[0])!r}" if len(p.shape) >= 2 else ""
    g.line("\n".join([f"    {acc} = 0.0", *heads, *body, f"{ind}{acc} += f64({a}) * f64({b})",
                      f"    {out.name}[()] = {_DTYPES[t.dtype]}(-{acc}{scale})"]), p, q, out)
    return out


def _nll_rows(g, pred, targets, attrs, body):
    """Loop lines over the rows of a (N, C) `pred`: `tgt` the row's target, `hit` whether it counts, `body` per
    row; an out-of-range target raises IndexError (the program's caller runs the NumPy path, which words it)."""
    n, c = pred.shape
    return [f"    for i0 in range({n}):", f"        tgt = {targets.name}[i0]",
            f"        hit = tgt != {int(attrs['ignore_index'])}",
            f"        if hit and (tgt < 0 or tgt >= {c}):",
            '            raise IndexError("nll_loss: target out of range")', *body]


def _nll_form(pred, targets, attrs):
    if len(pred.shape) != 2 or targets.shape != pred.shape[:1] or targets.dtype not in _INTS \
            or pred.dtype not in ("float32", "float64") or attrs["reduction"] not in ("mean", "sum", "none"):
        raise Unsupported("nll_loss form")


def _nll_loss(g, op, attrs, args, t):
    pred, targets = args
    _nll_form(pred, targets, attrs)
    out = g.new(t.shape, t.dtype)
    g.empty(out)
    T = _DTYPES[t.dtype]
    if attrs["reduction"] == "none":  # -pred[i, t] or 0 where ignored, as NumPy's select
        rows = [f"        {out.name}[i0] = {T}(-{pred.name}[i0, tgt]) if hit else {T}(0.0)"]
        g.line("\n".join(_nll_rows(g, pred, targets, attrs, rows)), pred, targets, out)
        return out
    acc, cnt = g.local("acc"), g.local("cnt")
    rows = ["        if hit:", f"            {acc} += f64({pred.name}[i0, tgt])", f"            {cnt} += 1"]
    end = (f"    {out.name}[()] = {T}(-{acc} / {cnt}) if {cnt} > 0 else {T}(np.nan)" if attrs["reduction"] == "mean"
           else f"    {out.name}[()] = {T}(-{acc})")
    g.line("\n".join([f"    {acc} = 0.0", f"    {cnt} = 0", *_nll_rows(g, pred, targets, attrs, rows), end]),
           pred, targets, out)
    return out


def _nll_loss_backward(g, op, attrs, args, t):
    grad, pred, targets = args
    _nll_form(pred, targets, attrs)
    if grad.dtype != pred.dtype:
        raise Unsupported("nll_loss_backward dtype")
    out = g.new(t.shape, t.dtype)
    g.empty(out)
    T = _DTYPES[t.dtype]
    n, c = pred.shape
    lines = []
    gi = f"{grad.name}[i0]" if attrs["reduction"] == "none" else g.elem(grad, (), lines, "    ")
    cnt = g.local("cnt")
    if attrs["reduction"] == "mean":  # NumPy's -g * valid / max(count, 1), each rounded to the dtype
        lines += [f"    {cnt} = 0", f"    for i0 in range({n}):",
                  f"        if {targets.name}[i0] != {int(attrs['ignore_index'])}:", f"            {cnt} += 1",
                  f"    {cnt} = {cnt} if {cnt} > 0 else 1"]
    coef = f"{T}({T}(-{gi}) * {T}(1.0 if hit else 0.0))"
    if attrs["reduction"] == "mean":
        coef = f"{T}({coef} / {T}({cnt}))"
    rows = [f"        coef = {coef}", "        safe = tgt if hit else 0", f"        for j in range({c}):",
            f"            {out.name}[i0, j] = {T}({T}(1.0 if j == safe else 0.0) * coef)"]
    g.line("\n".join([*lines, *_nll_rows(g, pred, targets, attrs, rows)]), grad, pred, targets, out)
    return out


_EMITTERS = {"sum": _sum, "mean": _sum, "collapse_sum_to": _collapse, "matmul": _matmul, "permute_dims": _permute,
             "reshape": _reshape, "nn.softmax": _softmax, "nn.log_softmax": _softmax,
             "nn.cross_entropy_with_logits": _cross_entropy, "nn.nll_loss": _nll_loss,
             "grad.nll_loss_backward": _nll_loss_backward}
_FILLS = {"zeros": lambda a: 0, "ones": lambda a: 1, "full": lambda a: a["fill_value"], "zeros_like": lambda a: 0,
          "ones_like": lambda a: 1, "full_like": lambda a: a["fill_value"]}
_READS_LAZY = frozenset({"sum", "mean", "collapse_sum_to", "nn.cross_entropy_with_logits"})


__all__ = ["Unsupported"]
