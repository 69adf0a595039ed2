"""The NaN and inf finder's checks (`autodiff.detect_anomaly`, `TRACEGRAD_DEBUG_NANS=1`), as JAX's debug_nans.

`enabled` is the one flag every entry point reads once per call: `CompiledFunction.__call__` (compiled
steps, `autodiff.grad`, the `loss.backward()` tape's backward, any `ir.Executor` run) and the eager ops
(`tracer.tensor._run_eager`). Off, nothing else runs and the generated straight-line function stays as it
is. On, a function runs through the executor's interpreter with an observer that looks at each binding's
result, and raises `FloatingPointError` at the first one *born* non-finite: a NaN out of inputs without
NaN, or an inf out of finite inputs (and attributes: `full(-inf)` asks for its inf). A NaN already in a
call's arguments raises naming the argument when it reaches the result (a step may clean its data itself:
nan_to_num, where(isnan)); inf arguments pass (an attention mask of -inf is ordinary).
The message names the op, the printed binding, its inputs' ranges and the user's source line.
"""
from __future__ import annotations

import linecache
import os

import numpy as np

from ..cuda_hint import require_cupy
from ..nodes import Call, Function, Var
from ..printer import assign_names, print_expr, print_type
from .instructions import CALL, SPEC

enabled: bool = os.environ.get("TRACEGRAD_DEBUG_NANS", "").strip().lower() not in ("", "0", "false", "no", "off")


def set_enabled(mode: bool) -> bool:
    """Turn the checks on or off; returns the previous setting."""
    global enabled
    previous, enabled = enabled, bool(mode)
    return previous


# ---------------------------------------------------------------- what an array holds


def _flat(value) -> list:
    if isinstance(value, (tuple, list)):
        return [a for v in value for a in _flat(v)]
    return [] if value is None else [value]


def _xp(a):
    return np if isinstance(a, (np.ndarray, np.generic)) else require_cupy()


def _bad(a) -> tuple[int, int]:
    """(NaN count, inf count) of a floating or complex array; (0, 0) for any other."""
    if getattr(getattr(a, "dtype", None), "kind", "") not in "fc":
        return 0, 0
    xp = _xp(a)
    finite = int(xp.count_nonzero(xp.isfinite(a)))
    if finite == a.size:
        return 0, 0
    nan = int(xp.count_nonzero(xp.isnan(a)))
    return nan, int(a.size) - finite - nan


def describe(a) -> str:
    """'float32 (3,), min -1, max 2, 1 NaN': an array's dtype, shape, range of its other values and bad counts."""
    a_np = a.get() if hasattr(a, "get") and type(a) is not np.ndarray else np.asarray(a)
    text = f"{a_np.dtype} {tuple(a_np.shape)}"
    if a_np.size == 0:
        return text + ", empty"
    if a_np.dtype.kind in "fc":
        finite = a_np[np.isfinite(a_np)]
        nan, inf = _bad(a_np)
        if finite.size:
            finite = finite.real  # a complex array: the range of its real parts
            text += f", min {float(finite.min()):.6g}, max {float(finite.max()):.6g}"
        text += f", {nan} NaN" if nan else ", no NaN"
        if inf:
            text += f", {inf} inf (+inf {int((a_np == np.inf).sum())}, -inf {int((a_np == -np.inf).sum())})"
        return text
    return text + f", min {a_np.min()}, max {a_np.max()}"


def _what(nan: int, inf: int, out) -> str:
    n = sum(int(a.size) for a in _flat(out))
    if nan:
        return f"NaN ({nan} of {n} values)"
    signs = [a for a in _flat(out) if getattr(a.dtype, "kind", "") in "fc"]
    pos = sum(int((a == np.inf).sum()) for a in signs)
    sign = "+inf" if pos == inf else "-inf" if pos == 0 else "inf"
    return f"{sign} ({inf} of {n} values)"


def _born(out, inputs, attrs) -> tuple[int, int] | None:
    """(NaN, inf) counts when `out` is non-finite and its inputs did not already explain it, else None."""
    nan = inf = 0
    for a in _flat(out):
        n, i = _bad(a)
        nan, inf = nan + n, inf + i
    if not nan and not inf:
        return None
    bad_in = [_bad(a) for a in _flat(inputs)]
    if nan and not any(n for n, _ in bad_in):
        return nan, inf  # a NaN born here (inf - inf counts: the inf came in, the NaN did not)
    if not nan and not any(n or i for n, i in bad_in) and not _nonfinite_attr(attrs):
        return 0, inf  # an inf out of finite inputs: overflow, log(0), x / 0
    return None


def _nonfinite_attr(attrs) -> bool:
    for v in (attrs or {}).values():
        for x in v if isinstance(v, (tuple, list)) else (v,):
            if isinstance(x, float) and not np.isfinite(x):
                return True
    return False


def _source_line(loc) -> str:
    if loc is None or not loc.file:
        return "unknown (no source line recorded for this binding)"
    role = {"forward": "", "gradient": " (in the backward of the op on this line)",
            "recompute": " (recomputed for the backward pass)"}.get(loc.role, f" ({loc.role})")
    code = linecache.getline(loc.file, loc.line).strip()
    return f"{loc.file}:{loc.line}{role}" + (f": {code}" if code else "")


# ---------------------------------------------------------------- the executor's path


def _nan_arguments(params, args) -> list[tuple[str, object]]:
    """(name, array) of each argument field holding NaN."""
    found = []
    for p, a in zip(params, args, strict=True):
        for k, arr in enumerate(_flat(a)):
            if _bad(arr)[0]:
                found.append((f"{p.name}[{k}]" if isinstance(a, tuple) else p.name, arr))
    return found


def check_result(fn_name: str, nan_args, result) -> None:
    """NaN in the result that came in with the arguments (no binding gave birth to it): raise naming them.
    A call whose arguments hold NaN but whose result is clean (it cleans its data: nan_to_num, where(isnan))
    is no anomaly."""
    if not nan_args or not any(_bad(r)[0] for r in _flat(result)):
        return
    named = "; ".join(f"argument {name} ({describe(arr)})" for name, arr in nan_args)
    raise FloatingPointError(
        f"detect_anomaly: the result of {fn_name} holds NaN that came in with its arguments: {named}; it came in "
        f"from outside (the data, a parameter an earlier update made NaN)")


def run(compiled, args):
    """Run `compiled` (an executor's CompiledFunction) through its interpreter, checking every binding.

    The checker belongs to this call alone (the compiled function is not changed), so threads may share
    a step with the mode on or off."""
    nan_args = _nan_arguments(compiled.params, args)
    result = compiled._interpret(args, checker=_Checker(compiled, compiled.observer))
    check_result(compiled.name, nan_args, result)
    return result


class _Checker:
    """The executor's observer: called after the arguments are held, then after each instruction."""

    def __init__(self, compiled, inner):
        self.compiled, self.inner, self.calls = compiled, inner, 0

    def __call__(self, values, mem) -> None:
        if self.inner is not None:
            self.inner(values, mem)
        k, self.calls = self.calls - 1, self.calls + 1
        if k < 0:
            return
        kind, _, slots, attrs, out = self.compiled.instrs[k]
        if kind != CALL and kind != SPEC:
            return
        inputs = [values[s] for s in slots]
        born = _born(values[out], inputs, attrs if kind == CALL else _binding_attrs(self.compiled, out))
        if born is not None:
            raise FloatingPointError(_message(self.compiled, out, inputs, born, values[out]))


def _binding_attrs(compiled, out: int):
    var = compiled.bound_var.get(out)
    for b in compiled.fn.bindings:
        if b.var is var and isinstance(b.value, Call):
            return b.value.attrs
    return None


def _message(compiled, out: int, inputs, born, result) -> str:
    fn: Function = compiled.fn
    var: Var = compiled.bound_var[out]
    binding = next(b for b in fn.bindings if b.var is var)
    names = assign_names(fn)
    text = f"{names[var]}: {print_type(var.type)} = {print_expr(binding.value, names)}"
    nan, inf = born
    source = "from inputs without NaN" if nan else "from finite inputs"
    args = [a for a in binding.value.args]
    lines = [f"detect_anomaly: {binding.value.op} produced {_what(nan, inf, result)} {source}",
             f"  binding: {text}   (in {compiled.name})",
             f"  made by: {_source_line(var.loc)}"]
    for e, a in zip(args, inputs, strict=False):
        label = print_expr(e, names) if len(print_expr(e, names)) <= 40 else "(constant)"
        lines += [f"  input {label}: {describe(x)}" for x in _flat(a)]
    return "\n".join(lines)


# ---------------------------------------------------------------- eager ops


def check_eager(op_name: str, arrays, attrs, out, locate) -> None:
    """An eager op's result: raise when it is born non-finite (called only when `enabled`); `locate()` gives
    the user's Source (the tracer's frame walk)."""
    born = _born(out, arrays, attrs)
    if born is None:
        return

    nan, inf = born
    source = "from inputs without NaN" if nan else "from finite inputs"
    lines = [f"detect_anomaly: {op_name} (eager) produced {_what(nan, inf, out)} {source}",
             f"  made by: {_source_line(locate())}"]
    lines += [f"  input {i}: {describe(a)}" for i, a in enumerate(_flat(arrays))]
    raise FloatingPointError("\n".join(lines))


def check_values(who: str, named) -> None:
    """Raise naming the first of `named` ((name, array) pairs: an optimizer's gradients or updated
    parameters) that holds NaN or inf."""
    for name, a in named:
        if a is None:
            continue
        nan, inf = _bad(a)
        if nan or inf:
            raise FloatingPointError(f"detect_anomaly: {who} {name} holds {_what(nan, inf, a)}: {describe(a)}")
