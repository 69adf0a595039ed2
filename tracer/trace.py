"""Tracing: run a function on symbolic tensors and record its ops into an IRModule."""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
import threading
import weakref
from dataclasses import dataclass

import numpy as np

import ir
from ir import Binding, Builder, IRModule, TensorType, Var, free_vars, make_call, substitute
from ir.transform.base import paused_gc

from .attr_guards import MISSING, _Record, attribute_guards
from .capture import _is_atom, find_escapes, remove_escape
from .source import user_source
from .tensor import Tensor, TraceError, active_trace, dtype_name, is_active, pop_trace, push_trace


@dataclass(frozen=True)
class Spec:
    """An abstract argument for `trace`: a shape and a dtype, no data."""

    shape: tuple[int, ...]
    dtype: str = "float32"

    @property
    def type(self) -> TensorType:
        return TensorType(tuple(self.shape), self.dtype)


def spec(shape, dtype: str = "float32") -> Spec:
    """An abstract argument: `trace(f, spec((3, 3)))`."""
    t = TensorType(tuple(shape), ir.types.check_dtype(dtype, "spec"))  # refuses float dimensions
    return Spec(t.shape, t.dtype)


class TraceContext:
    def __init__(self):
        self.builder = Builder(locate=user_source)  # each binding records the user's line
        self.captured: dict[int, tuple[Tensor, Var]] = {}
        self.regions: list[tuple[int, int]] = []
        self.guards: list[tuple[object, object]] = []
        self.writes: dict[int, tuple[Tensor, Var]] = {}  # outside tensors written in place: their new values
        # values that NumPy would make views (reshape, slicing, ...): view var -> (base Tensor, base's var then)
        self.views: dict[Var, tuple[Tensor, Var]] = {}
        # module attributes read and written (nn.Module reports them through note_read / note_write)
        self.record = _Record()
        self._region_depth = 0
        self._region_start = 0

    def capture(self, t: Tensor) -> Var:
        """An outside tensor used by the traced function becomes a parameter of it."""
        hit = self.captured.get(id(t))
        if hit is None:
            name = "".join(c if c.isalnum() or c == "_" else "_" for c in (t._name or "w"))
            hit = (t, Var(name if name[0].isalpha() else "w_" + name, t.ir_type))
            self.captured[id(t)] = hit
        return hit[1]

    # checkpoint regions: only the outermost counts, nested ones add nothing
    def begin_region(self) -> None:
        if self._region_depth == 0:
            self._region_start = len(self.builder.bindings)
        self._region_depth += 1

    def end_region(self) -> None:
        self._region_depth -= 1
        if self._region_depth == 0 and len(self.builder.bindings) > self._region_start:
            self.regions.append((self._region_start, len(self.builder.bindings)))


@dataclass
class Traced:
    """What a trace produced: the module, the tensors it captured (parameters after the arguments'),
    how to rebuild the Python structure of the result, and the in-place writes the function made:
    ("arg", i, value) for its i-th argument, ("captured", k, value) for the k-th captured tensor,
    ("attr", target, value) for a traced value bound to a module attribute (target: an AttributeTarget,
    whose assign(array) binds the step's value there, as the eager assignment did).
    `mod`'s function returns the result alone; `with_writes` appends the written values.
    `guards` ends with the AttributeGuards of the module attributes the trace read, if any."""

    mod: IRModule
    captured: list[Tensor]
    out_tree: object
    guards: list[tuple[object, object]]
    writes: list[tuple[str, int, ir.Expr]]
    inputs: list[int]  # the positions of the arguments that are parameters (tensors, traced numbers)
    objects: list = dataclasses.field(default_factory=list)  # the modules whose attributes the trace read

    def with_writes(self, fields: list[ir.Expr]) -> IRModule:
        """The module whose function returns `fields` (its result's) followed by each written value."""
        main = self.mod["main"]
        body = ir.Tuple(list(fields) + [w[2] for w in self.writes])
        return IRModule({"main": ir.Function(main.params, main.blocks, body)})


def trace(fn, *args) -> IRModule:
    """Trace `fn` on `args` (Tensors, arrays or specs) into a module whose function is "main".

    >>> import tracer
    >>> mod = tracer.trace(lambda x, y: (x + y).sum(), tracer.spec((3, 3)), tracer.spec((3, 3)))
    >>> [p.name for p in mod["main"].params]
    ['x', 'y']
    """
    traced = trace_function(fn, args)
    # writes to outside tensors (and traced values bound to module attributes) are part of what fn computes:
    # returned after its result. Writes to its own arguments are not (grad/value_and_grad write them back
    # into the tensors or arrays passed).
    traced.writes = [w for w in traced.writes if w[0] != "arg"]
    return traced.with_writes([traced.mod["main"].body]) if traced.writes else traced.mod


def _arg_names(fn, n: int) -> list[str]:
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        params = []
    names = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return [names[i] if i < len(names) else f"arg{i}" for i in range(n)]


def arg_type(a) -> TensorType | None:
    if isinstance(a, Spec):
        return a.type
    if isinstance(a, Tensor):
        return a.ir_type
    if isinstance(a, np.ndarray) or type(a).__module__.startswith("cupy"):
        return TensorType(a.shape, ir.types.check_dtype(dtype_name(a.dtype), "trace argument"))
    return None


_SCALAR_DTYPES = {np.dtype(d) for d in ("float16", "float32", "float64", "int32", "int64")}


def is_scalar_input(a) -> bool:
    """A number a compiled step takes as a 0-d input (one trace for every value): a Python float, an int
    small enough that arithmetic on it cannot overflow int64 (n * n), or a NumPy float or int scalar."""
    if type(a) is float:
        return True
    if type(a) is int:
        return -(2**31) < a < 2**31
    return isinstance(a, (np.floating, np.integer)) and a.dtype in _SCALAR_DTYPES


def scalar_type(a) -> TensorType:
    if type(a) is float:
        return TensorType((), "float64")
    return TensorType((), "int64" if type(a) is int else str(a.dtype))


def trace_function(fn, args, names=None, scalars_as_inputs: bool = False) -> Traced:
    """Trace fn on args. Python numbers among args are baked in, or with `scalars_as_inputs` become 0-d
    parameters that promote as Python numbers do (weak), so one trace serves every value."""
    ctx = TraceContext()
    names = names or _arg_names(fn, len(args))
    params, sym_args, inputs = [], [], []
    for i, (name, a) in enumerate(zip(names, args, strict=True)):
        t = arg_type(a)
        weak = t is None and scalars_as_inputs and is_scalar_input(a)
        if weak:
            t = scalar_type(a)
        # an enclosing trace's Python-number input, passed on (a nested step): it stays weak in here too
        weak = weak or (isinstance(a, Tensor) and a._weak)
        if t is None:  # Python values pass through unchanged (the trace specialises on them)
            sym_args.append(a)
            continue
        var = Var(name, t)
        params.append(var)
        sym_args.append(Tensor.traced(var, ctx, weak))
        inputs.append((i, sym_args[-1], var))
    push_trace(ctx)
    _begin_hooks()
    failed = True
    try:
        with paused_gc():  # recording allocates much and frees little (see ir.transform.base.paused_gc)
            out = fn(*sym_args)
            body, tree = _flatten_output(out, ctx)
        failed = False
    finally:
        pop_trace()
        _end_hooks()
        attr_writes = _settle_state(ctx, fn, args, failed)  # never leaves a traced value behind
    position = {k: i for i, k in enumerate(ctx.captured)}
    # a number argument rebound in place (`n += 1`) is a new local value, as in Python: nothing to write back
    writes = [("arg", i, sym._var) for i, sym, var in inputs if sym._var is not var and not sym._weak]
    writes += [("captured", position[k], v) for k, (_, v) in ctx.writes.items()]
    writes += [("attr", target, v) for target, v in attr_writes]
    full = ir.Tuple([body] + [w[2] for w in writes])
    bindings, full = insert_checkpoint_markers(ctx.builder.bindings, ctx.regions, full)
    body, written = full.fields[0], full.fields[1:]
    writes = [(kind, i, e) for (kind, i, _), e in zip(writes, written, strict=True)]
    captured = [t for t, _ in ctx.captured.values()]
    all_params = params + [v for _, v in ctx.captured.values()]
    fn_ir = ir.Function(all_params, [ir.Block(bindings)], body)
    guards = list(ctx.guards)
    attributes = attribute_guards(ctx.record, ctx.captured)
    if attributes is not None:
        guards.append((attributes, True))
    objects = [o for o in (ref() for ref, _, _ in ctx.record.objects.values()) if o is not None]
    return Traced(IRModule({"main": fn_ir}), captured, tree, guards, writes, [i for i, _, _ in inputs], objects)


# ---------------------------------------------------------------- module state read and written by a trace
_hooks: list[tuple] = []
_depth = 0
_depth_lock = threading.Lock()


def add_trace_hooks(begin, end) -> None:
    """Call begin() when a first trace starts (in any thread) and end() when the last one ends: nn.Module
    installs its attribute-read recorder only then, so eager attribute access costs nothing extra."""
    _hooks.append((begin, end))


def _begin_hooks() -> None:
    global _depth
    with _depth_lock:
        _depth += 1
        if _depth == 1:
            for begin, _ in _hooks:
                begin()


def _end_hooks() -> None:
    global _depth
    with _depth_lock:
        _depth -= 1
        if _depth == 0:
            for _, end in _hooks:
                end()


def note_read(obj, name: str, value) -> None:
    """An attribute of obj (an nn.Module) read by the traced function: a replay checks it is unchanged.
    value is what the read returned (MISSING if it raised AttributeError)."""
    ctx = active_trace()
    if ctx is not None:
        ctx.record.read(obj, name, value)


def note_write(obj, name: str, restore) -> None:
    """obj.name is about to be assigned (or deleted) inside a trace. At the end of the trace, a traced value
    left there becomes an output of the step, bound there after each call, and `restore(obj, name, old)`
    puts back the value from before (old may be MISSING); a failed trace restores every such attribute."""
    ctx = active_trace()
    if ctx is None:
        return
    key = (id(obj), name)
    writes = ctx.record.writes
    if key not in writes:
        writes[key] = (obj, name, object.__getattribute__(obj, "__dict__").get(name, MISSING), restore)


class AttributeTarget:
    """A module attribute a traced forward bound a traced value to (`self.last = h`): after each call the
    step's value of it is bound there as a new concrete tensor, as the eager assignment would."""

    __slots__ = ("ref", "name", "label")

    def __init__(self, obj, name: str):
        self.ref, self.name, self.label = weakref.ref(obj), name, f"{type(obj).__name__}.{name}"

    def assign(self, value) -> None:
        obj = self.ref()
        if obj is not None:
            setattr(obj, self.name, value if isinstance(value, Tensor) else Tensor.wrap(value))

    def __repr__(self) -> str:
        return f"AttributeTarget({self.label})"


def _settle_state(ctx: TraceContext, fn, args, failed: bool) -> list[tuple[AttributeTarget, Var]]:
    """After a trace: traced values bound to module attributes become writes (and the attribute gets its
    old value back until the step runs); any other traced value fn left where it can be reached is removed
    and reported. A failed trace restores every attribute it assigned, so that nothing of it stays."""
    record, parent = ctx.record, active_trace()
    writes, kept = [], []
    for key, (obj, name, old, restore) in record.writes.items():
        new = object.__getattribute__(obj, "__dict__").get(name, MISSING)
        traced = isinstance(new, Tensor) and new._var is not None
        if traced and new._trace is not ctx and parent is not None and is_active(new._trace) and not failed:
            parent.record.writes.setdefault(key, (obj, name, old, restore))  # the enclosing trace's value
            continue
        if traced or failed:
            restore(obj, name, old)
        if traced and new._trace is ctx:
            writes.append((AttributeTarget(obj, name), new._var))
        elif not traced:
            kept.append((obj, name, old, restore))
    roots = [("fn", fn)] + [(f"argument {i}", a) for i, a in enumerate(args)
                            if not isinstance(a, (Tensor, Spec)) and not _is_atom(a)]
    escapes = find_escapes(roots, lambda t: t._var is not None and t._trace is ctx)
    # each place once (two values in one tuple take the tuple out once), list items last to first, so that
    # removing one does not move the next
    places = {(id(e[1]), e[2], id(e[3]) if e[2] in ("member", "key") else e[3]): e for e in escapes}
    for _, holder, kind, key in sorted(places.values(), key=lambda e: -e[3] if type(e[3]) is int else 0):
        remove_escape(holder, kind, key)
    if failed:
        return writes
    if escapes:
        for obj, name, old, restore in kept:
            restore(obj, name, old)
        where = ", ".join(dict.fromkeys(e[0] for e in escapes))
        raise TraceError(
            f"the traced function stored a traced value at {where}, where a compiled step cannot write it back "
            "(it was removed from there): a traced value exists only while the function is traced, and a replay "
            "runs no Python, so it would append or store nothing. Bind it to a module attribute instead "
            "(`self.last = h`: the step binds its concrete value there after each call), or return it "
            "(has_aux=True returns (value, aux)).")
    for obj, name, _, _ in kept:
        record.written(obj, name)
    return writes


def _flatten_output(out, ctx):
    from .tensor import to_expr

    if isinstance(out, Tensor):
        return to_expr(out, ctx), "tensor"
    if isinstance(out, (tuple, list)):
        parts = [_flatten_output(o, ctx) for o in out]
        return ir.Tuple([p[0] for p in parts]), (type(out), [p[1] for p in parts])
    raise TypeError(f"a traced function must return Tensors or tuples/lists of them, got {type(out).__name__}")


def unflatten_output(tree, value):
    """Rebuild a traced function's nested tuples and lists from its values and the structure `tree`."""
    if tree == "tensor":
        return value
    kind, subtrees = tree
    return kind(unflatten_output(t, v) for t, v in zip(subtrees, value, strict=True))


def insert_checkpoint_markers(bindings, regions, body):
    """Wrap each (start, end) binding range's inputs in grad.start_checkpoint, its outputs in grad.end_checkpoint."""
    if not regions:
        return bindings, body
    spans = []
    for start, end in regions:
        inside = {b.var for b in bindings[start:end]}
        inputs = list(dict.fromkeys(
            v for b in bindings[start:end] for v in free_vars(b.value) if v not in inside))
        later = [v for b in bindings[end:] for v in free_vars(b.value)] + list(free_vars(body))
        outputs = list(dict.fromkeys(v for v in later if v in inside))
        spans.append((start, end, inputs, outputs))
    out: list[Binding] = []
    outer: dict[Var, Var] = {}
    region = iter(spans)
    current = next(region, None)
    local: dict[Var, Var] = {}
    for i, b in enumerate(bindings):
        if current and i == current[0]:
            local = {}
            for v in current[2]:
                src = outer.get(v, v)
                marker = Var(v.name, v.type)
                out.append(Binding(marker, make_call("grad.start_checkpoint", [src])))
                local[v] = marker
        inside = current is not None and current[0] <= i < current[1]
        out.append(Binding(b.var, substitute(b.value, {**outer, **local} if inside else outer)))
        if current and i == current[1] - 1:
            for v in current[3]:
                marker = Var(v.name, v.type)
                out.append(Binding(marker, make_call("grad.end_checkpoint", [v])))
                outer[v] = marker
            current = next(region, None)
    return out, substitute(body, outer)


def guard(getter):
    """Read a Python value that a traced function's structure depends on, and record it.

    `grad`/`value_and_grad` replay a compiled trace only while every guarded value is unchanged, and
    trace again otherwise (nn.Module.training is read this way, so `model.eval()` is seen).

    >>> flag = {"on": True}
    >>> guard(lambda: flag["on"])
    True
    """
    from .tensor import active_trace

    value = getter()
    ctx = active_trace()
    if ctx is not None:
        ctx.guards.append((getter, value))
    return value


class checkpoint(contextlib.ContextDecorator):
    """Mark a region whose values the backward pass recomputes instead of keeping.

    `with tracer.checkpoint(): ...` or `tracer.checkpoint(block)(x)`; outside a trace it does nothing.
    """

    def __new__(cls, fn=None):
        if fn is not None:
            return _run_checkpointed(fn)
        return super().__new__(cls)

    def __init__(self, fn=None):
        self._ctx = None

    def __enter__(self):
        from .tensor import active_trace

        self._ctx = active_trace()
        if self._ctx is not None:
            self._ctx.begin_region()
        return self

    def __exit__(self, *exc):
        if self._ctx is not None:
            self._ctx.end_region()
        return False


def _run_checkpointed(fn):
    """`fn` with every call inside a checkpoint region. A plain function (a partial would not be a
    descriptor), so `@tracer.checkpoint` on a method binds `self` like any method."""
    @functools.wraps(fn)
    def checkpointed(*args, **kwargs):
        with checkpoint():
            return fn(*args, **kwargs)
    return checkpointed


__all__ = ["Spec", "Traced", "TraceError", "checkpoint", "guard", "spec", "trace", "trace_function", "unflatten_output"]
