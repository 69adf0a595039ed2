"""Steps made again: `value_and_grad(fn, ...)` called inside the training loop (issue 24 item 6).

A torch user writes `loss.backward()` inside the loop, so the step gets made there too:

    for x, y in batches:
        value, grads = autodiff.value_and_grad(lambda x, y: loss(model(x), y), wrt=params)(x, y)

Each new step would trace, differentiate and compile again. `reuse` hands back the step made before when the
new one would compute the same thing: the same code object, the same options (wrt, which tensors it names, by
identity; argnums, has_aux, check, memory_budget), and the same things the code reads directly, as they are
now:

- closure cells: the very same cell objects (lambdas made in one loop share them; two functions made by one
  factory each get their own, and never share a step), and what each holds;
- the globals its code names (or their absence), its defaults and keyword defaults, a bound method's self;
- for each of those: a number, string or None by value, any other object by identity, and one level into it:
  a small list's or dict's items, an object's attributes (a module's, a config object's).

What lies deeper is what a step made once outside the loop would see (docs/design.md, "What a compiled step
sees"): tensors are found again on every call, module attributes are guarded, other Python values are baked
into the trace (check=True finds them). The reused step is that very step, so a re-made step is never staler
than one made outside the loop. A few recent steps are kept (each holds its model alive meanwhile).

Where the cache cannot apply (the code reads new objects each time: a step made by a factory per call, a new
model per step), the same code made into a step a third time warns once, with StepRemadeWarning.
"""
from __future__ import annotations

import threading
import types
import warnings
import weakref

from tracer.capture import code_names

_KEPT = 4  # steps kept for reuse (the least recently made or reused go first)
_REMADE = 3  # a code object made into a step this often, each time reading other objects: warn (once)
_SHALLOW = 64  # larger containers and objects are compared by identity alone
_VALUES = (int, float, complex, str, bytes, bool, type(None))


class StepRemadeWarning(UserWarning):
    """value_and_grad (or grad) was made again for the same function, each time reading other objects, so
    every step traced and compiled anew: make the step once, outside the loop, and call it there."""


_lock = threading.Lock()
_kept: list[tuple[tuple, list, object]] = []  # (key, snapshot, step), the most recently made or reused last
_remade: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # code -> {options: times made anew}
_warned: weakref.WeakSet = weakref.WeakSet()


def clear() -> None:
    """Forget the kept steps and the warnings given (tests; or to let kept models go now)."""
    with _lock:
        _kept.clear()
        _remade.clear()
        _warned.clear()


def reuse(step, fn, options: tuple):
    """The step made before with the same code, options and captures (see the module doc), else `step`
    itself, kept for the next time. `options`: hashable, everything but fn and the wrt tensors' identities."""
    described = _describe(fn)
    if described is None:
        return step
    head, snapshot = described
    snapshot += [_atom(t) for t in step.leaves]
    key = (head, options, tuple(id(t) for t in step.leaves))
    with _lock:
        for i, (k, snap, kept) in enumerate(_kept):
            if k == key and _same(snap, snapshot):
                _kept.append(_kept.pop(i))
                return kept
        _kept.append((key, snapshot, step))
        del _kept[:-_KEPT]
        code = head[0]
        try:
            counts = _remade.setdefault(code, {})
        except TypeError:  # not weakly referenceable: no count
            return step
        n = counts[options] = counts.get(options, 0) + 1
        warn = n >= _REMADE and code not in _warned
        if warn:
            _warned.add(code)
    if warn:
        name = getattr(code, "co_name", type(fn).__name__)
        where = f" ({code.co_filename}:{code.co_firstlineno})" if isinstance(code, types.CodeType) else ""
        warnings.warn(
            f"tracegrad: a step of {name}{where} was made {n} times, each reading other objects (a new closure, "
            "model or default), so each traced and compiled anew. Make the step once, outside the loop: "
            "step = autodiff.value_and_grad(fn, wrt=...) before it, step(x, y) inside.", StepRemadeWarning,
            stacklevel=4)
    return step


def _describe(fn) -> tuple[tuple, list] | None:
    """(a hashable head: the code and what it runs in, the snapshot of what fn reads directly), or None."""
    if isinstance(fn, types.MethodType):
        inner = _describe(fn.__func__)
        if inner is None:
            return None
        head, snapshot = inner
        return (*head, "method"), snapshot + _version(fn.__self__)
    if isinstance(fn, types.FunctionType):
        code, glob = fn.__code__, fn.__globals__
        snapshot: list = [_atom(glob)]
        for cell in fn.__closure__ or ():
            snapshot.append(_atom(cell))
            try:
                snapshot += _version(cell.cell_contents)
            except ValueError:  # an empty cell (a name assigned later)
                snapshot.append(("empty", None))
        for name in sorted(code_names(code)):
            snapshot.append(("eq", name))
            snapshot += _version(glob[name]) if name in glob else [("absent", None)]
        for d in fn.__defaults__ or ():
            snapshot += _version(d)
        for k, d in sorted((fn.__kwdefaults__ or {}).items()):
            snapshot.append(("eq", k))
            snapshot += _version(d)
        return (code, id(glob)), snapshot
    if callable(fn):  # a module or another callable object: itself, and its attributes one level down
        return (type(fn), id(fn)), _version(fn)
    return None


def _atom(v) -> tuple:
    """v by value, or by identity: weakly where Python allows (a kept step must not keep a replaced module
    alive; a dead referent matches nothing)."""
    if type(v) in _VALUES:
        return ("eq", v)
    try:
        return ("weak", weakref.ref(v))
    except TypeError:
        return ("is", v)


def _version(v) -> list:
    """v by value or identity, and one level into it (items, attributes)."""
    out = [_atom(v)]
    if type(v) in _VALUES or isinstance(v, (types.ModuleType, type, types.FunctionType, types.BuiltinFunctionType)):
        return out
    if isinstance(v, (list, tuple)) and len(v) <= _SHALLOW:
        out.append(("eq", len(v)))
        out += [_atom(x) for x in v]
    elif isinstance(v, dict) and len(v) <= _SHALLOW:
        out.append(("eq", len(v)))
        for k, x in v.items():
            out += [_atom(k), _atom(x)]
    else:
        attrs = getattr(v, "__dict__", None)
        if type(attrs) is dict and len(attrs) <= _SHALLOW:
            out.append(("eq", len(attrs)))
            for k, x in attrs.items():
                out += [("eq", k), _atom(x)]
    return out


def _same(old: list, new: list) -> bool:
    if len(old) != len(new):
        return False
    for (m0, a), (m1, b) in zip(old, new, strict=True):
        if m0 != m1:
            return False
        if m0 == "is" and a is not b:
            return False
        if m0 == "weak" and a() is not b():
            return False
        if m0 == "eq" and not (a is b or (type(a) is type(b) and a == b)):
            return False
    return True
