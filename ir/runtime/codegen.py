"""Straight-line Python for a compiled IR function, as torch.fx's codegen writes it.

`generate(compiled)` turns the executor's instruction list (kernels resolved, slots, last uses) into
the source of one Python function: a local per value, each kernel called by name, `del` right after
a value's last use, and the result structure built in the return statement. Running it costs no
dispatch, no list of values and no per-op bookkeeping; the executor uses it for every call whose
peak bytes it already knows (see `CompiledFunction.__call__`).

>>> import numpy as np, tracer, ir
>>> mod = tracer.trace(lambda x: tracer.exp(x).sum(), tracer.spec((2,)))
>>> print(ir.Executor(mod)["main"].source, end="")
def main(v0):
    v1 = k1(v0)
    del v0
    v2 = k2(v1)
    if type(v2) is not ndarray: v2 = asarray(v2)
    del v1
    return u(v2)

On NumPy most kernels are specialized to their binding's types (ir.runtime.specialize: here `np.exp` and
`np.add.reduce` over axis 0) and take the arrays alone; the others are called as `k(xp, *arrays, **attrs)`.
"""
from __future__ import annotations

from ..types import TensorType
from . import numba_program
from .instructions import CALL, GETITEM, SPEC, TUPLE


def generate(compiled) -> tuple[str, object]:
    """(source, function) for `compiled`, a CompiledFunction; the function takes the checked arguments."""
    ns: dict[str, object] = {"xp": compiled.xp, "ndarray": compiled.xp.ndarray, "asarray": compiled.xp.asarray}
    n_params = len(compiled.params)
    params = [f"v{i}" for i in range(n_params)]
    lines = [f"def {_identifier(compiled.name)}({', '.join(params)}):"]
    for s, c in compiled.constants:
        ns[f"v{s}"] = c  # constants are globals of the generated function: read, never deleted
    const_slots = {s for s, _ in compiled.constants}
    if compiled.dead_params:
        lines.append(f"    del {', '.join(f'v{s}' for s in compiled.dead_params)}")
    for i, ((kind, fn, args, attrs, out), frees) in enumerate(zip(compiled.instrs, compiled.frees, strict=True)):
        operands = ", ".join(f"v{a}" for a in args)
        if kind == SPEC:
            reuse = compiled.reuse[i] if compiled.reuse else None
            ns[f"k{out}"] = reuse[0] if reuse is not None else fn
            into = f", out=v{reuse[1]}" if reuse is not None else ""
            sid = compiled.storage.get(i)
            if sid is not None:  # planned storage (ir.runtime.storage): an array kept between calls
                into = f", out=b{sid}"
            scratch = compiled.scratch.get(i)
            if scratch:  # planned temporaries of the kernel itself
                into += f", scratch=({''.join(f'b{b}, ' for b in scratch)})"
            lines.append(f"    v{out} = k{out}({operands}{into})")
        elif kind == CALL:
            call_args = ", ".join(["xp"] + [f"v{a}" for a in args])
            ns[f"k{out}"] = fn
            reuse = compiled.reuse[i] if compiled.reuse else None
            if reuse is not None:  # a dying operand's buffer receives the result
                ns[f"k{out}"] = reuse[0]
                lines.append(f"    v{out} = k{out}({operands}, out=v{reuse[1]})")
            elif attrs:
                ns[f"a{out}"] = attrs
                lines.append(f"    v{out} = k{out}({call_args}, **a{out})")
            else:
                lines.append(f"    v{out} = k{out}({call_args})")
        elif kind == TUPLE:
            lines.append(f"    v{out} = ({operands}{',' if len(args) == 1 else ''})")
        elif kind == GETITEM:
            lines.append(f"    v{out} = v{args[0]}[{fn}]")
        else:
            lines.append(f"    v{out} = v{args[0]}")
        var = compiled.bound_var.get(out)
        if kind in (CALL, SPEC) and (var is None or _maybe_scalar(var.type)):
            lines.append(f"    if type(v{out}) is not ndarray: v{out} = asarray(v{out})")
        dead = [f"v{s}" for s in frees if s not in const_slots]
        if dead:
            lines.append(f"    del {', '.join(dead)}")
    ns["u"] = compiled.unshare
    if compiled.storage_specs:
        _storage_pool(compiled, ns, lines)
    lines.append(f"    return {_result(compiled.body_plan, compiled.fresh_slots)}")
    source = "\n".join(lines) + "\n"
    code = compile(source, f"<tracegrad {compiled.name}>", "exec")
    exec(code, ns)  # noqa: S102 - the source is generated above from the IR, nothing of the user's is executed
    # a small function as one numba function when it qualifies (the fast extra); this one is its fallback
    return numba_program.attach(compiled, source, ns, _identifier(compiled.name))


def _storage_pool(compiled, ns, lines) -> None:
    """Planned storage (ir.runtime.storage) comes from a pool of array sets: a call takes one (a new one when the
    pool is empty) and puts it back before it returns, so calls in turn reuse one set and calls running at
    the same time (threads: NumPy releases the GIL in its kernels) never write into each other's arrays.
    Returned values are never planned storage, so giving the set back before the return is safe."""
    specs = compiled.storage_specs
    ns["pool"] = []
    ns["new_storage"] = compiled.new_storage  # views of one arena (ir.runtime.storage.allocate)
    names = ", ".join(f"b{sid}" for sid in range(len(specs)))
    lines[1:1] = ["    try:", "        bufs = pool.pop()", "    except IndexError:",
                  "        bufs = new_storage()", f"    {names}{',' if len(specs) == 1 else ''} = bufs"]
    lines.append("    pool.append(bufs)")


def _maybe_scalar(t) -> bool:
    """NumPy gives a scalar, not an array, for a 0-d result; other results are arrays or tuples."""
    return isinstance(t, TensorType) and t.shape == ()


def _result(plan, fresh) -> str:
    """The returned structure; `u` copies a value that is (a view of) a constant, so a slot made by an op
    that always returns a new buffer goes out as it is."""
    if plan[0] == "tuple":
        fields = [_result(p, fresh) for p in plan[1]]
        return f"({', '.join(fields)}{',' if len(fields) == 1 else ''})"
    if plan[0] == "item":
        return f"{_result(plan[1], fresh)}[{plan[2]}]"
    return f"v{plan[1]}" if plan[1] in fresh else f"u(v{plan[1]})"


def _identifier(name: str) -> str:
    ident = "".join(c if c.isalnum() or c == "_" else "_" for c in name)
    return ident if ident and not ident[0].isdigit() else f"f_{ident}"


__all__ = ["generate"]
