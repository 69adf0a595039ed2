"""The per-call glue of a compiled step, generated: one straight-line Python function per compiled signature.

A call of `value_and_grad(fn, ...)` that replays a compiled adjoint does the same work every time: flatten
the arguments (autodiff/pytree.py) and key the cache by their structure, shapes and dtypes; check the
guards (tracer.guard values, the module attributes the trace read: tracer.attr_guards.AttributeGuards); walk
the paths to the captured tensors (tracer.capture.Sources); feed the executor; copy any result that shares
a buffer with an input or another result; write fn's in-place and module-state writes back; wrap the
results as Tensors in the user's structure. Done generically, that is loops, dispatch and small objects
per call; for one signature every branch is known. `build` writes that signature's glue as one function
(as torch.compile writes its guards), which either returns the step's result or `MISS`; on `MISS` the
generic path in autodiff/api.py runs and decides (it retraces, raises naming the argument path, or finds
another compiled entry). Every check of the generic path is in the glue, so a glue never replays what the
generic path would not.

    glue(args, kwargs) -> result | MISS

Read a glue's text as `fn.source` (tests do). The generic path stays the reference: a glue is built only
after it chose the compiled entry for this very call.
"""
from __future__ import annotations

import importlib
import os
from collections import OrderedDict

import numpy as np

import ir
from ir.runtime import numba_program
from tracer import Tensor
from tracer.attr_guards import GUARD_NAMES, AttributeGuards
from tracer.capture import Lines
from tracer.rng import fresh_seed
from tracer.tensor import active_trace
from tracer.trace import is_scalar_input

from . import pytree
from .step_args import (
    _buffer_key,
    _feed_arg,
    _meminfo_type,
    _NoMemInfo,
    _refuse_aliased_writes,
    _signature,
    _unshared,
)

trace_module = importlib.import_module("tracer.trace")  # the module (tracer.trace is also the function)
MISS = object()  # a glue's answer when this call is not the signature it was built for
_CONTAINERS = {"tuple": tuple, "list": list, "dict": dict, "odict": OrderedDict}

# TRACEGRAD_CHECK=1 (check every call) is read on every call, as the generic path does: os.environ.get costs
# most of a microsecond (it raises and catches KeyError), the mapping it reads (CPython's, on POSIX) a lookup
try:
    _ENV, _KEY, _ONE = os.environ._data, os.environ.encodekey("TRACEGRAD_CHECK"), os.environ.encodevalue("1")
    _CHECK_FLAG = f"env.get({_KEY!r}) == {_ONE!r}"
except (AttributeError, TypeError):  # another implementation: the public spelling
    _ENV, _CHECK_FLAG = os.environ, 'env.get("TRACEGRAD_CHECK") == "1"'


class _Unsupported(Exception):
    """A compiled step whose result structure this generator does not write (the generic path serves it)."""


def build(step, c, call: pytree.CallTree, args: list):
    """The glue of compiled entry `c` of grad function `step` for calls shaped like this one (`call`, its flat
    leaves `args`: the tree, each leaf's type, shape and dtype), or None when `c` has none."""
    if c.sources is None:
        return None
    try:
        source, ns = _write(step, c, call, args)
    except _Unsupported:
        return None
    exec(compile(source, f"<glue of {getattr(step.fn, '__qualname__', 'fn')}>", "exec"), ns)  # noqa: S102 - ours
    glue = ns["glue"]
    glue.source, glue.compiled = source, c
    return glue


def _write(step, c, call, args) -> tuple[str, dict]:
    ns = dict(GUARD_NAMES)
    ns.update(MISS=MISS, ndarray=np.ndarray, asarray=np.asarray, id=id, type=type, len=len, tuple=tuple,
              isinstance=isinstance, active=active_trace, environ=os.environ, key=_buffer_key,
              MemInfo=_meminfo_type(), NoMemInfo=_NoMemInfo, meminfo_type=_meminfo_type,
              unshared=_unshared, feed_arg=_feed_arg, signature=_signature, is_scalar=is_scalar_input,
              fresh_seed=fresh_seed, wrap=Tensor.wrap, new=object.__new__, Tensor=Tensor,
              refuse=_refuse_aliased_writes, S=step, C=c, CALL=call,
              LI=step.leaf_index, rebuild_aux=pytree.rebuild_aux, trace_module=trace_module, env=_ENV)
    lines = Lines(ns, failure="MISS", indent=2)
    const, fail = lines.const, lines.fail
    # inside a trace the adjoint is inlined (the generic path); no trace runs in any thread while the count
    # of traces tracer.trace keeps for its hooks is 0, and reading it is cheaper than the thread-local stack
    fail("trace_module._depth and active() is not None")
    fail(_CHECK_FLAG)
    leaves = _unpack_call(lines, call)
    feeds, checked = _check_leaves(lines, step, c, leaves, args, _signature)
    for t in step.leaves:  # which wrt leaves are frozen is part of the key (requires_grad is `_ag is not None`)
        if t._is_parameter:
            fail(f"{const(t)}._ag is {'None' if t.requires_grad else 'not None'}")
    for getter, value in c.guards:
        if isinstance(getter, AttributeGuards) and value is True:
            getter.emit(lines)
        else:
            fail(f"not ({const(getter)}() == {const(value)})")
    # a wrt tensor came or went: the gradients are routed differently (those in wrt: checked on the way)
    expected = {k: step.leaves[leaf] for k, leaf in enumerate(c.captured_leaf) if leaf is not None}
    found = c.sources.emit(lines, step.fn, leaves, expected)
    for k, leaf in enumerate(c.captured_leaf):
        if not c.fresh[k] and leaf is None:
            fail(f"id({found[k]}) in LI")
    checks = lines.lines
    lines.lines, lines.indent = [], 1
    checked.update(f"{f}_data" for k, f in enumerate(found) if f is not None and c.sources.types[k][2] is np.ndarray)
    _run(lines, step, c, leaves, feeds, found, checked)
    text = ["def glue(args, kwargs):", "    global MemInfo", "    try:", *checks,
            "    except Exception:  # something the generic path must look at (and may raise about)",
            "        return MISS", *lines.lines]
    return "\n".join(text) + "\n", ns


def _unpack_call(lines: Lines, call: pytree.CallTree) -> list[str]:
    """Code binding each leaf of the call's pytree to a local (checking the containers); their names."""
    leaves: list[str] = []
    fail = lines.fail

    def unpack(expr: str, tree) -> None:
        if tree is pytree.LEAF:
            leaves.append(expr)
            return
        kind, meta, children = tree
        fail(f"type({expr}) is not {lines.const(_CONTAINERS.get(kind, meta))}")
        names = [lines.name("t") for _ in children]
        if kind in ("dict", "odict"):
            fail(f"tuple({expr}) != {lines.const(meta)}")
            for k, name in zip(meta, names, strict=True):
                lines.line(f"{name} = {expr}[{lines.const(k)}]")
        else:
            fail(f"len({expr}) != {len(children)}")
            _assign(lines, names, expr)
        for name, child in zip(names, children, strict=True):
            unpack(name, child)

    names = [lines.name("t") for _ in call.args]
    fail(f"len(args) != {len(names)}")
    _assign(lines, names, "args")
    if call.kwargs:
        fail(f"tuple(kwargs) != {tuple(k for k, _ in call.kwargs)!r}")
        kw = [lines.name("t") for _ in call.kwargs]
        for (k, _), name in zip(call.kwargs, kw, strict=True):
            lines.line(f"{name} = kwargs[{k!r}]")
    else:
        fail("kwargs")
        kw = []
    for name, tree in zip(names + kw, list(call.args) + [t for _, t in call.kwargs], strict=True):
        unpack(name, tree)
    return leaves


def _assign(lines: Lines, names: list[str], expr: str) -> None:
    if names:
        lines.line(f"{', '.join(names)}{',' if len(names) == 1 else ''} = {expr}")


def _check_leaves(lines: Lines, step, c, leaves: list[str], args: list, signature) -> tuple[dict[int, str], set]:
    """The checks of each leaf's part of the cache key; per leaf fed to the step, the expression fed; and those
    of the fed expressions that are NumPy arrays of their parameter's shape and dtype once the checks pass."""
    const, fail = lines.const, lines.fail
    objects = dict(c.objects)
    inputs = {i: c.params[k] for k, i in enumerate(c.inputs)}
    feeds: dict[int, str] = {}
    checked: set[str] = set()
    for i, (x, a) in enumerate(zip(leaves, args, strict=True)):
        sig = signature(a, step.leaf_index, step.static_scalars)
        data = a._data if isinstance(a, Tensor) else None
        if sig[0] == "tensor" and type(a) is np.ndarray:
            fail(f"type({x}) is not ndarray or {x}.shape != {a.shape!r} or {_dtype_test(x, const(a.dtype))}")
            feeds[i] = x
            checked.add(x)
        elif sig[0] == "tensor" and type(data) is np.ndarray:
            d = f"{x}_data"
            fail(f"type({x}) is not {const(type(a))}")
            lines.line(f"{d} = {x}._data")
            fail(f"type({d}) is not ndarray or {d}.shape != {data.shape!r} or {_dtype_test(d, const(data.dtype))}")
            leaf = sig[3]
            fail(f"id({x}) in LI" if leaf is None else f"{x} is not {const(step.leaves[leaf])}")
            feeds[i] = d
            checked.add(d)
        elif sig[0] == "scalar":
            fail(f"type({x}) is not {const(type(a))} or not is_scalar({x})")
            if i in inputs:
                feeds[i] = f"asarray({x}, {inputs[i].type.dtype!r})"
                if inputs[i].type.shape == ():
                    checked.add(feeds[i])
        elif sig[0] == "object":
            fail(f"{x} is not {const(objects[i])}()")
        else:
            fail(f"type({x}) is not {const(type(a))} or signature({x}, LI, {step.static_scalars}) != {const(sig)}")
        if i in inputs and i not in feeds:
            feeds[i] = f"feed_arg({x}, {const(inputs[i])})"
    return feeds, checked


def _dtype_test(x: str, dtype: str) -> str:
    return f"({x}.dtype is not {dtype} and {x}.dtype != {dtype})"  # NumPy's dtypes are mostly singletons


def _run(lines: Lines, step, c, leaves: list[str], feeds: dict[int, str], found: list, checked: set) -> None:
    """The replay: feed, run, copy shared buffers, write back, wrap (api._run and _assemble, unrolled)."""
    const, line = lines.const, lines.line
    if c.writes:
        captured = "[" + ", ".join(f or "None" for f in found) + "]"
        line(f"refuse(C, CALL, [{', '.join(leaves)}], {captured})")
    line("S.last = C")
    params = [feeds[i] for i in c.inputs]
    params += [f"fresh_seed({const(fresh)})" if fresh else f"{found[k]}_data" for k, fresh in enumerate(c.fresh)]
    names = [lines.name("p") for _ in params]
    for name, expr in zip(names, params, strict=True):
        line(f"{name} = {expr}")
    # the layout the executor's call_own takes: every argument an array of its parameter's shape and dtype
    # (checked above), C-ordered, owning its buffer, no two the same; it says whether the program made the results
    specs = [getattr(c.step, "_arg_specs", [None] * len(names))[j] for j in range(len(names))]
    call = f"({', '.join(names)})"
    own = bool(names) and all(e in checked for e in params) and all(s is not None and s[2] is not None for s in specs) \
        and numba_program.may_serve(c.step)  # the plain NumPy path never has a program: no layout test for it
    if own:
        line("if " + " and ".join(f"{p}.base is None and {p}.strides == {s[2]!r}" for p, s in zip(names, specs,
                                                                                                    strict=True))
             + f" and len({{{', '.join(f'id({p})' for p in names)}}}) == {len(names)}:")
        line(f"out, fresh = {const(c.step.call_own)}{call}", 1)
        line("else:")
        line(f"out, fresh = {const(c.step)}{call}, False", 1)
    else:
        line(f"out = {const(c.step)}{call}")
    body_t = c.mod["main_adjoint"].body.type
    if not (isinstance(body_t, ir.TupleType) and len(body_t.fields) == 2):
        raise _Unsupported
    outs: list[str] = []
    value, grads = _unpack_out(lines, "out", body_t, outs)
    # Most calls: every result a buffer of its own (an array owning its memory, or one numba allocated: its base a
    # MemInfo over no array of the caller's, named by its address), no two the same, none of them fed in; else
    # the checks one by one below. (A buffer of its own can only be an input itself: nothing the step sees holds
    # a fed view's base.)
    # (The program's results, `fresh`, are such buffers: numba_emit copies any other result.)
    if own:
        line("if fresh:")
        line("slow = False", 1)
        line("else:")
        lines.indent += 1
    line(f"fed = ({''.join(f'id({p}) if {p}.base is None else key({p}), ' for p in names)})")
    keys = [lines.name("k") for _ in outs]
    for k, o in zip(keys, outs, strict=True):
        line(f"{k} = id({o}) if (b := {o}.base) is None else b.data if type(b) is MemInfo and b.parent is None else 0")
    line(f"slow = 0 in (ks := {{{', '.join(keys)}}}) or len(ks) != {len(outs)} or not ks.isdisjoint(fed)")
    lines.indent = 1
    line("if slow:")
    lines.indent += 1
    line("if MemInfo is NoMemInfo:  # numba was imported since this glue was made")
    line("MemInfo = meminfo_type()", 1)
    line("fed = set(fed)")
    for o in outs:  # a result that is (a view of) an input, or read-only: the user's copy
        line(f"if {o}.base is not None or id({o}) in fed:")
        line(f"{o} = unshared({o}, fed)", 1)
    lines.indent -= 1
    if c.writes:
        if not isinstance(value, list) or len(value) < c.n_fields + len(c.writes):
            raise _Unsupported
        for (kind, i, _), new in zip(c.writes, value[c.n_fields:], strict=True):
            if not isinstance(new, str):
                raise _Unsupported
            if kind == "attr":  # a module attribute forward bound a traced value to: a new tensor there
                line(f"{const(i)}.assign({new})")
            elif kind == "arg":
                line(f"({leaves[i]}._data if isinstance({leaves[i]}, Tensor) else {leaves[i]})[...] = {new}")
            else:
                line(f"{found[i]}._data[...] = {new}")
        value = value[0] if c.n_fields == 1 else value[:c.n_fields]
    order = _names(value) + _names(grads)
    if len(order) > 1:  # value, aux and gradients: each a buffer of its own
        line("if slow:")
        lines.indent += 1
        line("seen = set()")
        for n in order:
            line(f"o = id({n}) if {n}.base is None else key({n})")
            line("if o in seen:")
            line(f"{n} = {n}.copy()", 1)
            line("else:")
            line("seen.add(o)", 1)
        lines.indent -= 1
    line("return " + _assemble(lines, step, c, value, grads))


def _unpack_out(lines: Lines, expr: str, t, outs: list[str]):
    """Bind the executor's nested result tuples to locals: a name per array (in `outs`), lists for tuples."""
    if isinstance(t, ir.TupleType):
        names = [lines.name("r") for _ in t.fields]
        _assign(lines, names, expr)
        return [_unpack_out(lines, n, f, outs) for n, f in zip(names, t.fields, strict=True)]
    outs.append(expr)
    return expr


def _names(structure) -> list[str]:
    if isinstance(structure, str):
        return [structure]
    return [n for s in structure for n in _names(s)]


def _tuple(structure) -> str:
    if isinstance(structure, str):
        return structure
    inner = ", ".join(_tuple(s) for s in structure)
    return f"({inner},)" if len(structure) == 1 else f"({inner})"


def _assemble(lines: Lines, step, c, value, grads) -> str:
    """The returned expression: gradients in wrt's (or argnums') structure, value (and aux) as Tensors."""
    if not isinstance(grads, list):
        raise _Unsupported
    handed: set[int] = set()
    out = []
    for s in c.grad_slots:
        if not s:
            out.append("None")
        elif len(s) != 1:
            out.append(_wrap(lines, " + ".join(grads[i] for i in s)))
        elif s[0] in handed:
            out.append(_wrap(lines, f"{grads[s[0]]}.copy()"))
        else:
            handed.add(s[0])
            out.append(_wrap(lines, grads[s[0]]))
    if c.rebuild is list:
        gradients = "[" + ", ".join(out) + "]"
    else:
        gradients = f"{lines.const(c.rebuild)}([{', '.join(out)}])"
    if step.has_aux:
        if not (isinstance(value, list) and len(value) == 2 and isinstance(value[0], str)):
            raise _Unsupported
        aux = f"rebuild_aux({_tuple(value[1])}, {lines.const(c.out_tree)}, wrap)"
        return f"({_wrap(lines, value[0])}, {aux}), {gradients}" if step.return_value else f"{gradients}, {aux}"
    if not isinstance(value, str):
        raise _Unsupported
    return f"{_wrap(lines, value)}, {gradients}" if step.return_value else gradients


def _wrap(lines: Lines, expr: str) -> str:
    """A local holding Tensor.wrap(expr), made inline (a call of Tensor.wrap costs about as much as its stores):
    a new Tensor whose slots hold what Tensor.wrap's do, read off one it made (so the two cannot drift)."""
    name = lines.name("w")
    lines.line(f"{name} = new(Tensor)")
    lines.line(f"{name}._data = {expr}")
    for value, slots in _wrap_slots():
        text = repr(value) if value is None or type(value) in (bool, str) else lines.const(value)
        lines.line(" = ".join(f"{name}.{slot}" for slot in slots) + f" = {text}")
    return name


def _wrap_slots() -> list[tuple[object, list[str]]]:
    """(value, slots holding it) of a Tensor made by Tensor.wrap, but for `_data` (what it wraps)."""
    made = Tensor.wrap(None)
    groups: dict[int, tuple[object, list[str]]] = {}
    for cls in type(made).__mro__:
        for slot in getattr(cls, "__slots__", ()):
            if slot in ("_data", "__weakref__", "__dict__") or not hasattr(made, slot):
                continue
            value = getattr(made, slot)
            groups.setdefault(id(value), (value, []))[1].append(slot)
    return list(groups.values())
