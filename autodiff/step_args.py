"""What a compiled step reads of a call and hands back: each argument's cache signature and executor form,
the objects keyed by identity, the refusals of aliased writes, and the copies that keep returned buffers
distinct (autodiff.api's `_GradFunction` and the generated glue of autodiff.glue use these)."""
from __future__ import annotations

import inspect
import math
import sys
import weakref
from collections.abc import Iterator

import numpy as np

from ir import IRModule
from ir.runtime.executor import buffer_owner
from tracer import Tensor
from tracer.trace import Spec, arg_type, is_scalar_input

from . import pytree


def _feed_arg(a, param):
    """An argument as the executor takes it (Tensors and arrays first: most calls' arguments are)."""
    if isinstance(a, Tensor):
        return a._data
    if type(a) is np.ndarray:
        return a
    return _array(a) if arg_type(a) is not None else np.asarray(a, param.type.dtype)


def _differentiable(a) -> str | None:
    """None when argnums can differentiate leaf a, else what it is (for the message)."""
    if type(a) is float or isinstance(a, np.floating):
        return None
    t = arg_type(a)
    if t is not None:
        return None if t.is_float else f"{'a Tensor' if isinstance(a, Tensor) else 'an array'} of dtype {t.dtype}"
    return f"a Python {type(a).__name__}" if isinstance(a, (int, bool, str)) else f"a {type(a).__name__}"


def _describe_leaf(t: Tensor) -> str:
    return ", ".join(([t._name] if t._name else []) + [f"shape {tuple(t.shape)}", str(t.dtype)])


def _signature(a, leaf_index: dict[int, int], static_scalars: bool):
    data = a._data if isinstance(a, Tensor) else a
    if type(data) is np.ndarray:  # most arguments: no TensorType to build (the first call's trace checks the dtype)
        return ("tensor", data.shape, data.dtype, leaf_index.get(id(a)), False)
    t = arg_type(a)
    if t is not None:
        return ("tensor", t.shape, t.dtype, leaf_index.get(id(a)), _on_gpu(_array(a)))
    if isinstance(a, Spec):
        return ("spec", a.shape, a.dtype)
    if not static_scalars and is_scalar_input(a):
        return ("scalar", type(a).__name__)
    if type(a).__hash__ is object.__hash__:
        if isinstance(a, Iterator):
            kind = "a generator" if inspect.isgenerator(a) else f"an iterator ({type(a).__name__})"
            raise TypeError(f"{kind}: fn would consume it, and a compiled step cannot see what it yields on a later "
                            "call; pass a list or tuple (list(it)) instead")
        # an object equal only to itself (a model): by id, so the cache does not keep it alive; each trace
        # holds a weak reference to it (_object_refs), so that a new object at a reused address traces again
        return ("object", type(a).__qualname__, id(a))
    try:
        hash(a)
    except TypeError:
        raise TypeError(f"{a!r}, neither a tensor nor a hashable Python value") from None
    if type(a) is float or isinstance(a, np.floating):  # a baked number: -0.0 == 0.0, but copysign tells them apart
        return ("py", type(a).__name__, a, math.copysign(1.0, a))
    return ("py", type(a).__name__, a)


def _object_refs(args) -> tuple:
    """(position, reference) for each leaf `_signature` keys by id. Python values the trace read from such an
    object (a NumPy array or a number on it) are baked in, so the step must be replayed only for the object
    itself, never for a new one that took a dead one's address. A weak reference where Python allows (the
    cache keeps no model alive), else the object itself."""
    refs = []
    for i, a in enumerate(args):
        if arg_type(a) is None and not isinstance(a, Spec) and not is_scalar_input(a) and \
                type(a).__hash__ is object.__hash__:
            try:
                refs.append((i, weakref.ref(a)))
            except TypeError:
                refs.append((i, lambda o=a: o))
    return tuple(refs)


def _distinct(value, seen: set[int]):
    """value (an array or nested tuples of them) with every array whose buffer is in `seen` (and every later
    one sharing a buffer) copied. Gradients simplify to one array (d(x*2 + y*2)/dx and /dy), or to an aux
    output (d sum(w * tanh(x))/dw is tanh(x)); a user writing into one result (an optimizer updating a
    gradient in place) must not change another, as in torch."""
    if isinstance(value, tuple):
        return tuple(_distinct(v, seen) for v in value)
    owner = id(value) if value.base is None else _buffer_key(value)
    if owner in seen:
        return value.copy()
    seen.add(owner)
    return value


def _unshared(value, fed: set[int]):
    """value with every array that is (a view of) one fed in copied. A gradient may simplify to a weight
    itself (d(w1 * w2)/dw1 = w2); handing back w2's own buffer would let an optimizer, updating the weights
    in place one by one, change a gradient before using it."""
    if isinstance(value, tuple):
        return tuple(_unshared(v, fed) for v in value)
    if value.base is None and id(value) not in fed:  # a buffer of its own, not fed in: most results
        return value
    # a read-only result (a broadcast view) is copied too: gradients handed back are the user's to write
    if _buffer_key(value) in fed or not getattr(value.flags, "writeable", True):
        return value.copy()
    return value


def _buffer(a):
    """The id of the memory a's values live in (a view: its base's), or None for a number."""
    data = a._data if isinstance(a, Tensor) else a
    if not hasattr(data, "base") or not hasattr(data, "shape"):
        return None
    return id(data) if data.base is None else _buffer_key(data)


class _NoMemInfo:
    """Stands for numba's MemInfo type while numba is not imported (no array has one as its base then)."""


def _meminfo_type() -> type:
    """The type numba gives as the base of each array it returns (its runtime's MemInfo), once numba is imported."""
    runtime = sys.modules.get("numba.core.runtime._nrt_python")
    return getattr(runtime, "_MemInfo", _NoMemInfo)


def _buffer_key(array) -> int:
    """An int naming the memory `array`'s values live in: the id of the array owning it, or, for memory numba
    allocated, the allocation's address. numba hands each array it returns back with a MemInfo of its own as
    its base (views of one allocation too), and NumPy's views of such an array have that MemInfo as theirs;
    a MemInfo over an array passed into numba names that array (its `parent`)."""
    meminfo = _meminfo_type()
    while True:
        owner = _owner(array)
        base = owner.base
        if type(base) is not meminfo:
            return id(owner)
        array = base.parent
        if array is None:
            return base.data
        if not hasattr(array, "base"):  # numba took a buffer that is not an array
            return id(array)


def _refuse_aliased_writes(c, call: pytree.CallTree, args, captured) -> None:
    """fn writes a tensor in place that it can also read by another route: an argument that is a captured
    tensor too, or the same tensor (or memory) at two argument leaves (`step([t, t])`, `step((x, x[:2]))`).
    Eagerly fn reads the write through the other route; compiled, each route is an input of its own that
    keeps the old values. Refuse rather than differ."""
    paths = None
    written: dict[int, str] = {}  # buffer -> the route fn writes it through
    for kind, i, _ in c.writes:
        if kind == "attr":
            continue
        target = args[i] if kind == "arg" else captured[i]
        if kind == "arg":
            paths = paths or call.paths()
        where = f"argument {paths[i]}" if kind == "arg" else f"the tensor it captures ({_describe(target)})"
        written.setdefault(_buffer(target), where)
    written.pop(None, None)
    if not written:
        return
    paths = paths or call.paths()
    routes = [(f"argument {paths[i]}", a) for i, a in enumerate(args)] + \
        [(f"the tensor it captures ({_describe(t)})", t) for k, t in enumerate(captured) if not c.fresh[k]]
    seen: dict[int, str] = {}
    for where, a in routes:
        buf = _buffer(a)
        if buf not in written:
            continue
        other = seen.setdefault(buf, where)
        if other != where:
            first, second = (other, where) if written[buf] == other else (where, other)
            raise ValueError(
                f"grad: {second} is the same tensor that fn writes in place as {first} (or shares its buffer, a "
                "view): eagerly fn would read the write through it, a compiled step feeds each as an input of its "
                "own. Pass a copy (x.clone()) of one of them, or read and write through the same one")


def _mismatch_report(old: IRModule, new: IRModule) -> str:
    before, after = str(old).splitlines(), str(new).splitlines()
    diff = next(((a, b) for a, b in zip(before, after, strict=False) if a != b), None)
    if diff is None:
        diff = ("(same text: a constant's values differ)", "") if len(before) == len(after) else \
            ("\n".join(before[len(after):]) or "(nothing)", "\n".join(after[len(before):]) or "(nothing)")
    return ("check=True: tracing fn again gives a different computation than the compiled step it would "
            "replay, so a value fn reads from outside changed since the trace (a Python number, a flag, a list's "
            "length, a NumPy array's contents): such values are baked into the trace.\n"
            f"  traced before: {diff[0].strip()}\n  traced now:    {diff[1].strip()}\n"
            "Pass the value as an argument of the step (a Python number argument is an input, not baked), or read "
            "it through tracer.guard(lambda: value) so that a change traces again.")


def _describe(t: Tensor) -> str:
    return f"{t._name or 'a tensor'} {t.type}"


def _owner(array):
    return buffer_owner(array)  # NumPy and CuPy point a view at the owner


def _array(a):
    return a._data if isinstance(a, Tensor) else a


def _on_gpu(a) -> bool:
    return type(a).__module__.startswith("cupy")
