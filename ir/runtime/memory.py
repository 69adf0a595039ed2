"""The memory timeline of one call: live bytes after each binding, the peak, and what is alive there.

`memory_profile(mod, fn_name, *arrays)` runs the function once on the executor with an observer that
reads the executor's own byte count (the one behind `stats.peak_bytes`) after each instruction, so
the timeline's maximum is the call's `peak_bytes` exactly, and the values listed at the peak are the
buffers the executor holds there.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..analysis import checkpoint_regions
from ..nodes import Call, Constant, Function, IRModule, Tuple, TupleGetItem, Var, free_vars, role_of
from ..printer import assign_names
from ..types import TensorType, TupleType
from .executor import Executor, buffer_owner
from .reuse import plan_reuse


@dataclass(frozen=True)
class LiveValue:
    """One buffer alive at the peak. `role` is "argument", "constant", "forward", "recompute" or
    "gradient"; `view_of` names the value whose buffer this one shares (its bytes count there)."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    bytes: int
    role: str
    source: str
    view_of: str | None = None


@dataclass
class MemoryProfile:
    """Live bytes over one call of `fn_name`; point 0 is the arguments, point i + 1 binding i.

    `labels[i]`, `roles[i]` and `sources[i]` describe point i; `regions` are checkpoint regions as
    (first, last) point indices; `backward_start` is the first gradient binding's point (None for a
    function without one).
    """

    fn_name: str
    live_bytes: list[int]
    labels: list[str]
    roles: list[str]
    sources: list[str]
    peak_index: int
    at_peak: list[LiveValue]
    regions: list[tuple[int, int]]
    backward_start: int | None
    step_name: str | None = None  # the user's function, when the profile is of its compiled step

    @property
    def peak_bytes(self) -> int:
        return self.live_bytes[self.peak_index]

    def __str__(self) -> str:
        peak = self.peak_index
        lines = [f"memory profile of {self.fn_name}: peak {format_bytes(self.peak_bytes)} at point {peak} "
                 f"({self.labels[peak]}{', ' + self.sources[peak] if self.sources[peak] else ''})", "",
                 f"{'#':>5}  {'live':>10}  {'role':<9}  {'binding':<40}  source"]
        for i, (b, label) in enumerate(zip(self.live_bytes, self.labels, strict=True)):
            mark = "  <- peak" if i == peak else ""
            lines.append(f"{i:>5}  {format_bytes(b):>10}  {self.roles[i]:<9}  {label:<40}  {self.sources[i]}{mark}")
        lines += ["", f"alive at the peak ({len(self.at_peak)} values, largest first):",
                  f"{'value':<16}  {'shape':<20}  {'dtype':<8}  {'bytes':>10}  {'role':<9}  source"]
        for v in self.at_peak:
            size = f"view of {v.view_of}" if v.view_of else format_bytes(v.bytes)
            lines.append(f"{v.name:<16}  {str(v.shape):<20}  {v.dtype:<8}  {size:>10}  {v.role:<9}  {v.source}")
        return "\n".join(lines)

    def plot(self, path, title: str | None = None):
        """Save a PNG of the live memory over the operations in the order they ran: the backward's start
        marked, checkpoint regions shaded, recomputations dotted; the y axis in the unit of the peak's label
        (KiB, MiB, ...). `title` defaults to the function's name and the peak. Returns the matplotlib
        Figure. Needs matplotlib (`pip install "tracegrad[plot]"`)."""
        try:
            from matplotlib.figure import Figure
            from matplotlib.ticker import MaxNLocator
        except ImportError:
            raise ImportError('MemoryProfile.plot needs matplotlib, which is not installed: '
                              'pip install "tracegrad[plot]" (or pip install matplotlib)') from None
        fig = Figure(figsize=(10, 4), layout="tight")
        ax = fig.add_subplot()
        unit, size = byte_unit(self.peak_bytes)
        live = [b / size for b in self.live_bytes]
        ax.plot(range(len(live)), live, color="tab:blue", linewidth=1.2, label="live memory")
        for k, (lo, hi) in enumerate(self.regions):
            ax.axvspan(lo - 0.5, hi + 0.5, color="tab:green", alpha=0.15, label="checkpoint region" if k == 0 else None)
        recomputed = [i for i, r in enumerate(self.roles) if r == "recompute"]
        if recomputed:
            ax.scatter(recomputed, [live[i] for i in recomputed], s=8, color="tab:orange", label="recomputed", zorder=3)
        if self.backward_start is not None:
            ax.axvline(self.backward_start - 0.5, color="tab:red", linestyle="--", label="backward starts")
        peak = f"peak {format_bytes(self.peak_bytes)}"
        ax.plot([self.peak_index], [live[self.peak_index]], "v", color="black", label=peak)
        part = "forward and backward" if self.backward_start is not None else "forward only"
        what = self.fn_name if self.step_name is None else f"the step of {self.step_name} ({self.fn_name})"
        ax.set_title(title if title is not None else
                     f"Memory over one call of {what}, {part}: {peak} at operation {self.peak_index}")
        ax.set_xlabel(f"operations of {self.fn_name} in the order they ran (0: only the inputs are held)")
        ax.set_ylabel(f"memory held ({unit})")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # operations are counted, never halved
        ax.legend(loc="upper left", fontsize="small")
        fig.savefig(path, dpi=120)
        return fig


def memory_profile(mod: IRModule, fn_name: str, *arrays, device: str = "cpu") -> MemoryProfile:
    """Run `mod[fn_name]` once on `arrays` and return its memory timeline.

    >>> import numpy as np, tracer, ir
    >>> mod = tracer.trace(lambda x: tracer.exp(x).sum(), tracer.spec((256,)))
    >>> prof = ir.memory_profile(mod, "main", np.zeros(256, "float32"))
    >>> prof.live_bytes, prof.peak_bytes
    ([1024, 2048, 1028], 2048)
    >>> [v.name for v in prof.at_peak]
    ['x', 'lv']
    """
    compiled = Executor(mod, device=device)[fn_name]
    recorder = _Recorder(compiled, mod[fn_name])
    compiled.observer = recorder
    compiled(*arrays)
    assert max(recorder.live) == compiled.stats.peak_bytes, "memory_profile: the timeline lost track of a buffer"
    return recorder.profile(fn_name)


class _Recorder:
    """The executor's observer: live bytes per point, and the values alive at the highest one."""

    def __init__(self, compiled, fn: Function):
        self.fn, self.compiled = fn, compiled
        self.n_params = len(fn.params)
        self.outputs = [ins[4] for ins in compiled.instrs]
        self.calls = 0
        self.pending = 0  # the most bytes seen while the next binding's inline operands were built
        self.live: list[int] = []
        self.best = -1
        self.snapshot: list[tuple[int, object]] = []

    def __call__(self, values, mem) -> None:
        k = self.calls
        self.calls += 1
        if k == 0:
            self.live.append(mem.live)
        else:
            self.pending = max(self.pending, mem.live)
            if self.outputs[k - 1] not in self.compiled.bound_var:  # an inline operand of the next binding
                return
            self.live.append(self.pending)
            self.pending = 0
        if mem.live > self.best:
            self.best = mem.live
            self.snapshot = [(s, v) for s, v in enumerate(values) if v is not None]

    def profile(self, fn_name: str) -> MemoryProfile:
        fn = self.fn
        names = assign_names(fn)
        bindings = fn.bindings
        labels = ["arguments"] + [f"{names[b.var]} = {_op(b.value)}" for b in bindings]
        roles = ["argument"] + [role_of(b.var) for b in bindings]
        sources = [""] + [_where(b.var) for b in bindings]
        gradient = [i + 1 for i, b in enumerate(bindings) if role_of(b.var) == "gradient"]
        peak = max(range(len(self.live)), key=self.live.__getitem__)
        return MemoryProfile(fn_name, self.live, labels, roles, sources, peak, self._at_peak(names),
                             checkpoint_regions(fn), gradient[0] if gradient else None)

    def _at_peak(self, names) -> list[LiveValue]:
        c = self.compiled
        constants = {s for s, _ in c.constants}
        owner: dict[int, str] = {}
        out = []
        for slot, value in self.snapshot:
            if slot < self.n_params:
                var, role = c.params[slot], "argument"
            elif slot in c.bound_var:
                var = c.bound_var[slot]
                role = role_of(var)
            elif slot in constants:
                var, role = None, "constant"
            else:
                continue  # an inline tuple: its fields are listed where they are bound
            name = names.get(var, var.name) if var is not None else "R.const"
            fields = value if isinstance(value, tuple) else (value,)
            for i, a in enumerate(fields):
                if isinstance(a, tuple):
                    continue  # a nested tuple operand: held through the values it was built from
                label = f"{name}[{i}]" if isinstance(value, tuple) else name
                base = id(buffer_owner(a))
                shared = owner.get(base)
                owner.setdefault(base, label)
                nbytes = 0 if shared else buffer_owner(a).nbytes
                where = _where(var) if var is not None else ""
                out.append(LiveValue(label, tuple(a.shape), str(a.dtype), nbytes, role, where, shared))
        out.sort(key=lambda v: -v.bytes)
        return out


def _op(value) -> str:
    if isinstance(value, Call):
        return f"R.{value.op}"
    return type(value).__name__


def _where(var) -> str:
    return var.loc.where if var.loc is not None and var.loc.file else ""  # the role has a column of its own


# Ops whose kernels hand back (a view of) their first argument rather than a new buffer. NumPy decides
# some of these by layout (reshaping a transposed array copies), so `estimate_peak_bytes` is an estimate.
VIEW_OPS = frozenset({"grad.start_checkpoint", "grad.end_checkpoint", "grad.stop_gradient", "reshape", "permute_dims",
                      "broadcast_to", "expand_dims", "squeeze", "split", "strided_slice"})


def estimate_peak_bytes(fn: Function) -> int:
    """The executor's peak_bytes for one call of fn, worked out from types and the order of the bindings
    without running anything: each value is freed after its last use, results of `VIEW_OPS` share their
    input's buffer, every other result is a new buffer. Exact when those ops view and the rest do not.

    >>> import tracer, ir
    >>> mod = tracer.trace(lambda x: tracer.exp(x).sum(), tracer.spec((256,)))
    >>> ir.runtime.memory.estimate_peak_bytes(mod["main"])
    2048
    """
    bindings = fn.bindings
    last: dict = {}
    for i, b in enumerate(bindings):
        for u in free_vars(b.value):
            last[u] = i
    keep = set(free_vars(fn.body))
    refs: dict[int, list[int]] = {}
    state = {"live": 0, "peak": 0, "next": 0}

    def new(t):
        if isinstance(t, TupleType):
            return tuple(new(f) for f in t.fields)
        state["next"] += 1
        return (state["next"], type_bytes(t))

    def hold(bases, sign=1):
        if isinstance(bases, tuple) and bases and isinstance(bases[0], tuple):
            for x in bases:
                hold(x, sign)
            return
        if not bases:
            return
        key, size = bases
        entry = refs.setdefault(key, [0, size])
        if sign > 0 and entry[0] == 0:
            state["live"] += size
        entry[0] += sign
        if sign < 0 and entry[0] == 0:
            state["live"] -= size
            del refs[key]
        state["peak"] = max(state["peak"], state["live"])

    bases: dict = {}
    for p in fn.params:
        bases[p] = new(p.type)
        hold(bases[p])
    constants = {}
    for b in bindings:
        for c in _constants(b.value):
            if id(c.data) not in constants:
                constants[id(c.data)] = (-len(constants) - 1, c.data.nbytes)
                hold(constants[id(c.data)])
    for p in fn.params:
        if p not in last and p not in keep:
            hold(bases[p], -1)
    reuse = plan_reuse(fn)  # results the executor writes into a dying operand's buffer (ir.runtime.reuse)
    for i, b in enumerate(bindings):
        bases[b.var] = result = bases[reuse[i][1]] if i in reuse else _result_bases(b.value, bases, new)
        hold(result)
        for u in dict.fromkeys(list(free_vars(b.value)) + [b.var]):
            if last.get(u, i) == i and u not in keep:
                hold(bases[u], -1)
    return state["peak"]


def _result_bases(value, bases, new):
    if isinstance(value, Var):
        return bases[value]
    if isinstance(value, Tuple):
        return tuple(_result_bases(f, bases, new) if not isinstance(f, Constant) else () for f in value.fields)
    if isinstance(value, TupleGetItem):
        inner = _result_bases(value.tuple_value, bases, new)
        return inner[value.index] if inner else ()
    if isinstance(value, Call) and value.op in VIEW_OPS and isinstance(value.args[0], Var):
        src = bases[value.args[0]]
        return tuple(src for _ in value.type.fields) if isinstance(value.type, TupleType) else src
    return new(value.type)


def _constants(e) -> list[Constant]:
    """The constants an expression reads inline (each is a buffer the executor holds for the whole call)."""
    if isinstance(e, Constant):
        return [e]
    children = e.args if isinstance(e, Call) else e.fields if isinstance(e, Tuple) else (
        (e.tuple_value,) if isinstance(e, TupleGetItem) else ())
    return [c for child in children for c in _constants(child)]


def byte_unit(n: int) -> tuple[str, int]:
    """The largest binary unit that keeps n at least 1, and its size: byte_unit(1536) == ("KiB", 1024)."""
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= size:
            return unit, size
    return "B", 1


def format_bytes(n: int) -> str:
    """Bytes in the largest binary unit that keeps the number at least 1: '1.50 MiB'."""
    unit, size = byte_unit(n)
    return f"{n} B" if size == 1 else f"{n / size:.2f} {unit}"


def type_bytes(t) -> int:
    """Bytes a value of type t holds (a tuple: its fields together)."""
    if isinstance(t, TupleType):
        return sum(type_bytes(f) for f in t.fields)
    assert isinstance(t, TensorType)
    return t.size * np.dtype(t.dtype).itemsize


def zeros_for(xp, t):
    """Zeros of a parameter type (a tuple of them for a tuple type): arguments for a profile run."""
    if isinstance(t, TupleType):
        return tuple(zeros_for(xp, f) for f in t.fields)
    return xp.zeros(t.shape, t.dtype)


__all__ = ["LiveValue", "MemoryProfile", "VIEW_OPS", "estimate_peak_bytes", "format_bytes",
           "memory_profile", "type_bytes", "zeros_for"]
