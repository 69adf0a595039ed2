"""Runs IR functions on NumPy or CuPy.

Each function is compiled once into a flat list of instructions with kernels resolved (on NumPy,
specialized to each binding's static types: ir.runtime.specialize). Every value is dropped right after
its last use (returned values excepted), and each call records the peak bytes held at once
(arguments included) and how often each op ran. An elementwise op writes its result into an
operand's buffer when that operand dies there (ir.runtime.reuse). The first call with each argument layout
runs the instructions one by one and counts the bytes; later ones run a generated straight-line
function (ir.runtime.codegen) that writes large intermediates into storage planned once (ir.runtime.storage) and
report the count already made.
"""
from __future__ import annotations

import warnings
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from ..cuda_hint import require_cupy
from ..nodes import Call, Constant, Expr, Function, IRModule, Tuple, TupleGetItem, Var
from ..ops.registry import get_op
from ..types import IRError, TensorType, TupleType, Type
from . import (
    anomaly,
    concat_heads,
    cross_entropy,
    dense_chains,
    numba_hook,
    numba_nll,
    numba_program,
    pool_relu,
    storage,
    vjp_chains,
    weight_layout,
)
from .codegen import generate
from .instructions import ALIAS, CALL, GETITEM, SPEC, TUPLE
from .reuse import FRESH, plan_reuse
from .specialize import specialize


def array_module(device: str):
    if device == "cpu":
        return np
    if device == "cuda":
        return require_cupy()
    raise ValueError(f'device must be "cpu", "cuda" or "cuda:0" (the current GPU; select another with '
                     f'cupy.cuda.Device(n).use()), got {device!r}')


@dataclass
class Stats:
    peak_bytes: int = 0
    op_counts: dict[str, int] = field(default_factory=dict)


class _Memory:
    """Bytes held at once, counted per underlying buffer so views and identities are not counted twice."""

    __slots__ = ("refs", "live", "peak")

    def __init__(self):
        self.refs: dict[int, list] = {}
        self.live = 0
        self.peak = 0

    def hold(self, value):
        if isinstance(value, tuple):
            for v in value:
                self.hold(v)
            return
        base = buffer_owner(value)
        entry = self.refs.get(id(base))
        if entry is None:
            self.refs[id(base)] = [1, base.nbytes, base]
            self.live += base.nbytes
            if self.live > self.peak:
                self.peak = self.live
        else:
            entry[0] += 1

    def drop(self, value):
        if isinstance(value, tuple):
            for v in value:
                self.drop(v)
            return
        base = buffer_owner(value)
        entry = self.refs[id(base)]
        entry[0] -= 1
        if entry[0] == 0:
            del self.refs[id(base)]
            self.live -= entry[1]


def buffer_owner(array):
    """The outermost array over `array`'s memory. NumPy and CuPy point a view straight at the array that
    owns its buffer; an array over foreign memory (np.frombuffer of bytes, a memory map) has a base that
    is not an array, and stands for that memory itself."""
    base = array.base
    if base is None:
        return array
    if type(base) is np.ndarray and base.base is None:  # a view of an array that owns its buffer: most views
        return base
    while base is not None and hasattr(base, "nbytes") and hasattr(base, "base"):
        array, base = base, base.base
    return array




class CompiledFunction:
    def __init__(self, fn: Function, name: str, xp, stats: Stats, check_types: bool = False,
                 reuse_buffers: bool = True, specialize_kernels: bool = True, plan_storage: bool = True):
        self._remake = (fn, name, xp, stats, check_types, reuse_buffers, specialize_kernels, plan_storage)
        waits = numba_hook.waits
        numba_hook.hold += 1  # numba's background load starts after this function's first call, not during it
        try:
            self._build(fn, name, xp, stats, check_types, reuse_buffers, specialize_kernels, plan_storage)
        finally:
            numba_hook.hold -= 1
        # a kernel chose NumPy's while numba loads (ir.runtime.numba_hook's tiers): made again once numba is ready
        self._tiered = numba_hook.waits != waits

    def _build(self, fn, name, xp, stats, check_types, reuse_buffers, specialize_kernels, plan_storage):
        if specialize_kernels and xp is np:  # a soft-target cross-entropy chain as one op (ir.runtime.cross_entropy)
            fn = cross_entropy.rewrite(fn)
            fn = pool_relu.rewrite(fn)  # relu's backward after max-pool's as one op (ir.runtime.pool_relu)
            fn = weight_layout.rewrite(fn)  # a weight^T many matmuls read, copied once (ir.runtime.weight_layout)
            fn = concat_heads.rewrite(fn)  # q/k/v gradients stacked in one copy (ir.runtime.concat_heads)
            fn = dense_chains.rewrite(fn)  # a dense layer's bias + relu, relu's backward (ir.runtime.dense_chains)
            if numba_hook.ENABLED:  # softmax/layer_norm/GELU backward chains as numba row kernels
                fn = vjp_chains.rewrite(fn)
                fn = numba_nll.rewrite(fn)  # log_softmax + nll_loss and its adjoint (ir.runtime.numba_nll)
        self.name, self.xp, self.stats, self.fn = name, xp, stats, fn
        self.check_types = check_types
        self.specialize_kernels = specialize_kernels  # False: generic kernels only, no numba program either
        # observer(values, mem): called once the arguments are held, then after each instruction's result
        # is held (before its frees); ir.memory_profile sets it, so ordinary calls pay one None check.
        self.observer = None
        self.bound_var: dict[int, Var] = {}  # output slot -> the var a binding defines there
        self.fresh_slots: set[int] = set()  # slots made by an op that always returns a new buffer (reuse.FRESH)
        bindings = fn.bindings
        self.params = fn.params
        slot: dict[Var, int] = {}
        for p in fn.params:
            slot[p] = len(slot)
        self.constants: list[tuple[int, object]] = []
        n_slots = len(slot) + len(bindings)
        self.instrs: list[tuple] = []
        counts: Counter = Counter()
        binding_instr: list[int] = []  # per binding: its instruction's index
        self.instr_ops: list[str | None] = []  # per instruction: the op it calls (None: tuple, item, alias)

        def operand(e: Expr):
            nonlocal n_slots
            if isinstance(e, Var):
                if e not in slot:
                    raise ValueError(f"executor: {name} uses {e.name} before it is defined")
                return slot[e]
            if isinstance(e, Constant):
                s = n_slots
                n_slots += 1
                self.constants.append((s, xp.asarray(e.data)))
                return s
            if isinstance(e, Tuple):
                s = n_slots
                n_slots += 1
                self.instrs.append((TUPLE, None, tuple(operand(f) for f in e.fields), None, s))
                self.instr_ops.append(None)
                return s
            if isinstance(e, TupleGetItem):  # a tuple field used inline as an argument: `R.add(lv[0], y)`
                s = n_slots
                n_slots += 1
                self.instrs.append((GETITEM, e.index, (operand(e.tuple_value),), None, s))
                self.instr_ops.append(None)
                return s
            raise TypeError(f"executor: unsupported operand {e!r}")

        for b in bindings:
            v = b.value
            if isinstance(v, Call):
                op = get_op(v.op)
                args = tuple(operand(a) for a in v.args)
                fast = specialize(v, xp) if specialize_kernels else None
                if fast is not None:
                    instr = (SPEC, fast, args, None, len(slot))
                else:
                    instr = (CALL, op.kernel, args, v.attrs, len(slot))
                counts[v.op] += 1
                if v.op in FRESH:
                    self.fresh_slots.add(len(slot))
            elif isinstance(v, Tuple):
                instr = (TUPLE, None, tuple(operand(f) for f in v.fields), None, len(slot))
            elif isinstance(v, TupleGetItem):
                instr = (GETITEM, v.index, (operand(v.tuple_value),), None, len(slot))
            else:
                instr = (ALIAS, None, (operand(v),), None, len(slot))
            self.bound_var[len(slot)] = b.var
            slot[b.var] = len(slot)
            binding_instr.append(len(self.instrs))
            self.instrs.append(instr)
            self.instr_ops.append(v.op if isinstance(v, Call) else None)
        self.body = fn.body
        self.slot = slot
        self.op_counts = dict(counts)
        self._counts = dict(counts)  # what stats.op_counts shows after a generated call
        self.body_plan = self._plan(operand)
        self.n_slots = n_slots  # params, bindings, then constants and inline tuples
        self.frees = self._last_uses()
        # (ufunc, slot) per instruction: a dying operand's buffer receives the result (ir.runtime.reuse)
        self.reuse = None
        if reuse_buffers:
            self.reuse = [None] * len(self.instrs)
            for i, (ufunc, var) in plan_reuse(fn).items():
                self.reuse[binding_instr[i]] = (getattr(xp, ufunc), slot[var])
        # {instruction: storage id}, {instruction: scratch storage ids}, [(shape, dtype)]: large intermediates
        # and kernels' temporaries in arrays kept between calls by the generated function (ir.runtime.storage);
        # the interpreter allocates as it goes
        self.storage_plan = storage.plan(self) if plan_storage and xp is np else storage.EMPTY
        self.storage, self.scratch, self.storage_specs = self.storage_plan[:3]
        self._constant_ids = frozenset(id(buffer_owner(c)) for _, c in self.constants)
        self._fast = None  # the generated straight-line function (ir.runtime.codegen), made on first use
        self.program = None  # the whole-function numba program that serves calls, if any (ir.runtime.numba_program)
        self.direct = None  # the program's entry once it serves for good (numba_program._install): see call_own
        self._peaks: dict[tuple, int] = {}  # peak bytes per argument layout, counted on its first call
        # (shape, dtype, C strides) of each tensor parameter: an argument that matches and owns its buffer has
        # the one layout _OWN stands for, without _layout_key's walk
        self._arg_specs = [(p.type.shape, np.dtype(p.type.dtype), _c_strides(p.type)) if isinstance(p.type, TensorType)
                           else None for p in fn.params]

    def _plan(self, operand):
        def plan(e):
            if isinstance(e, Tuple):
                return ("tuple", [plan(f) for f in e.fields])
            if isinstance(e, TupleGetItem):
                return ("item", plan(e.tuple_value), e.index)
            return ("slot", operand(e))
        return plan(self.body)

    def _last_uses(self) -> list[tuple[int, ...]]:
        keep = set()

        def walk(p):
            if p[0] == "tuple":
                for q in p[1]:
                    walk(q)
            elif p[0] == "item":
                walk(p[1])
            else:
                keep.add(p[1])
        walk(self.body_plan)
        keep.update(s for s, _ in self.constants)
        self.keep_slots = frozenset(keep)  # returned values and constants: never freed, never planned storage
        last: dict[int, int] = {}
        for i, (_, _, args, _, out) in enumerate(self.instrs):
            for a in args:
                last[a] = i
            last.setdefault(out, i)  # a value nobody reads dies right away
        for p in range(len(self.params)):
            last.setdefault(p, -1)
        frees: list[list[int]] = [[] for _ in self.instrs]
        pre = []
        for s, i in last.items():
            if s in keep:
                continue
            (pre if i < 0 else frees[i]).append(s)
        self.dead_params = tuple(pre)
        return [tuple(f) for f in frees]

    @property
    def storage_bytes(self) -> int:
        """Bytes of the arrays the generated function keeps between calls for planned intermediates
        (ir.runtime.storage)."""
        return self.storage_plan.size

    def new_storage(self) -> tuple:
        """A new set of the planned arrays (ir.runtime.storage), one per storage id."""
        return storage.allocate(self.xp, self.storage_plan)

    @property
    def source(self) -> str:
        """The Python source of the straight-line function that runs this IR function (ir.runtime.codegen)."""
        if self._fast is None:
            self._generate()
        return self._fast[0]

    def _generate(self):
        waits = numba_hook.waits
        self._fast = generate(self)
        self._tiered = self._tiered or numba_hook.waits != waits

    def _retier(self):
        """Made again from the same IR now that numba's kernels are loaded (ir.runtime.numba_hook): the same object,
        since steps and glue hold it; the next call counts its peak bytes again, as a first call does."""
        observer = self.observer
        try:
            new = CompiledFunction(*self._remake)
        except Exception as e:  # noqa: BLE001 - keep the NumPy kernels that ran so far rather than fail mid-loop
            warnings.warn(f"{self.name}: numba's kernels could not be made ({e!r}); NumPy's stay", RuntimeWarning,
                          stacklevel=3)
            self._tiered = False
            return
        self.__dict__.update(new.__dict__)
        self.observer = observer

    def unshare(self, value):
        """A returned value that is (a view of) a constant, copied: writing into it would change what
        every later call returns."""
        return _unshared(value, self._constant_ids)

    def __call__(self, *args):
        xp = self.xp
        if len(args) != len(self.params):
            raise TypeError(f"{self.name} takes {len(self.params)} argument(s) "
                            f"({', '.join(p.name for p in self.params)}), got {len(args)}")
        if self._tiered and numba_hook.loaded:  # the one test a call pays for the tiers
            self._retier()
        specs, ndarray = self._arg_specs, xp.ndarray
        args = list(args)
        own = True  # every argument a C-ordered array of its own buffer (the common layout)
        for i, a in enumerate(args):  # arrays of the right shape and dtype pass with three comparisons
            spec = specs[i]
            if spec is None or type(a) is not ndarray or a.shape != spec[0] or a.dtype != spec[1]:
                args[i] = _check_arg(xp, self.params[i], a, self.name)
                own = False
            elif own and (a.base is not None or a.strides != spec[2]):
                own = False
        if anomaly.enabled:  # autodiff.detect_anomaly: the interpreter, each binding's result checked
            return anomaly.run(self, args)
        if self.observer is None and not self.check_types:
            # Peak bytes depend only on the arguments' layouts (strides, buffer sizes, shared buffers):
            # counted once per layout by the interpreter below, then the generated function runs bare.
            key = _OWN if own and len(set(map(id, args))) == len(args) else _layout_key(args)
            peak = self._peaks.get(key)
            if peak is not None:
                if self._fast is None:
                    self._generate()
                self.stats.peak_bytes = peak
                self.stats.op_counts = self._counts  # one copy, made once: per call, only the reference
                return self._fast[1](*args)
            result = self._interpret(args)
            # what a call of the whole-function numba program holds, when one serves this function
            self._peaks[key] = numba_program.peak_bytes(self, args, self.stats.peak_bytes)
            return result
        return self._interpret(args)

    def call_own(self, *args):
        """(self(*args), fresh) for a caller that has checked every argument is an ndarray of its parameter's
        shape and dtype, C-ordered (its parameter's C strides), owning its buffer, no two the same (autodiff's
        glue, for its signature): the layout __call__ keys as _OWN. While the whole-function program serves for
        good, such a call goes straight to it, with the peak bytes counted for that layout, and `fresh` says the
        program made the results (each an allocation of the call's own that no other result is on); any other
        state takes __call__, fresh False."""
        direct = self.direct
        if direct is None or self._tiered or self.observer is not None or self.check_types or anomaly.enabled:
            return self(*args), False
        peak = self._peaks.get(_OWN)
        if peak is None:
            return self(*args), False
        self.stats.peak_bytes = peak
        self.stats.op_counts = self._counts
        return direct(*args)

    def _interpret(self, args, checker=None):
        """Run the instructions one by one, counting every buffer held (stats.peak_bytes), calling the
        observer and checking types as asked. A `checker` (ir.runtime.anomaly) observes this call alone,
        with buffer reuse off so each binding's inputs are intact when its result is looked at."""
        xp = self.xp
        values: list = [None] * self.n_slots
        mem = _Memory()
        for i, a in enumerate(args):
            values[i] = a
            mem.hold(a)
        for s, c in self.constants:
            values[s] = c
            mem.hold(c)
        observe = self.observer if checker is None else checker
        if observe is not None:
            observe(values, mem)
        for s in self.dead_params:
            mem.drop(values[s])
            values[s] = None
        ndarray = xp.ndarray
        reuse = self.reuse if checker is None else None
        for i, ((kind, fn, args, attrs, out), frees) in enumerate(zip(self.instrs, self.frees, strict=True)):
            if kind == CALL or kind == SPEC:
                into = reuse[i] if reuse else None
                if into is not None:
                    r = into[0](*[values[a] for a in args], out=values[into[1]])
                elif kind == SPEC:
                    r = fn(*[values[a] for a in args])
                else:
                    r = fn(xp, *[values[a] for a in args], **attrs)
                if type(r) is not ndarray and not isinstance(r, tuple):
                    r = xp.asarray(r)
            elif kind == TUPLE:
                r = tuple(values[a] for a in args)
            elif kind == GETITEM:
                r = values[args[0]][fn]
            else:
                r = values[args[0]]
            values[out] = r
            if self.check_types and out in self.bound_var:
                _check_result(self.bound_var[out], r, self.name)
            mem.hold(r)
            if observe is not None:
                observe(values, mem)
            for s in frees:
                mem.drop(values[s])
                values[s] = None
        self.stats.peak_bytes = mem.peak
        self.stats.op_counts = dict(self.op_counts)
        if self._tiered:  # a first call ran alone on NumPy's kernels; numba loads from here (ir.runtime.numba_hook)
            numba_hook.start()
        return _collect(self.body_plan, values, self._constant_ids)


_OWN = ("every argument C-ordered in a buffer of its own",)  # a layout key _layout_key never makes


def _c_strides(t: TensorType) -> tuple | None:
    """The strides a new C-ordered array of type t has (np.empty touches no memory)."""
    try:
        return np.empty(t.shape, t.dtype).strides
    except (TypeError, ValueError):  # a shape or dtype NumPy does not take: such arguments take _layout_key's walk
        return None


def _layout_key(args) -> tuple:
    """What peak bytes can depend on besides shapes and dtypes: each argument's strides and buffer size,
    and which arguments share a buffer."""
    key, owners = [], []
    for a in args:
        if type(a) is tuple:
            key.append(_layout_key(a))
            continue
        base = a.base
        if base is None:
            base = a
        elif not hasattr(base, "nbytes"):  # over foreign memory (bytes, a memory map): a owns it here
            base = a
        owners.append(id(base))
        key.append(a.strides)
        key.append(base.nbytes)
    if len(set(owners)) != len(owners):  # which share a buffer
        key.append(tuple(owners.index(o) for o in owners))
    return tuple(key)


def _check_result(var: Var, value, fn_name: str) -> None:
    """check_types mode: a kernel's result must have the shape and dtype that inference promised."""
    t = var.type
    if isinstance(t, TupleType):
        if not isinstance(value, tuple) or len(value) != len(t.fields):
            raise IRError(f"{fn_name}: {var.name} should be a tuple of {len(t.fields)}, the kernel gave {value!r}")
        for i, (f, v) in enumerate(zip(t.fields, value, strict=True)):
            _check_result(Var(f"{var.name}[{i}]", f), v, fn_name)
    elif tuple(value.shape) != t.shape or str(value.dtype) != t.dtype:
        raise IRError(f"{fn_name}: {var.name} is declared {t} but its kernel returned shape "
                      f"{tuple(value.shape)} and dtype {value.dtype}")


def _collect(plan, values, constants):
    """The returned structure; a result that is (a view of) a constant is copied, or writing into it
    would change what every later call returns."""
    if plan[0] == "tuple":
        return tuple(_collect(p, values, constants) for p in plan[1])
    if plan[0] == "item":
        return _collect(plan[1], values, constants)[plan[2]]
    return _unshared(values[plan[1]], constants)


def _unshared(value, constants):
    if isinstance(value, tuple):
        return tuple(_unshared(v, constants) for v in value)
    return value.copy() if id(buffer_owner(value)) in constants else value


def _check_arg(xp, p: Var, a, fn_name: str):
    t: Type = p.type
    # fast path: an array of the right shape and dtype (np.dtype compares with its name, cheaply)
    if type(a) is xp.ndarray and isinstance(t, TensorType) and a.shape == t.shape and a.dtype == t.dtype:
        return a
    if isinstance(t, TupleType):
        if not isinstance(a, (tuple, list)) or len(a) != len(t.fields):
            raise TypeError(f"{fn_name}: argument {p.name} must be a tuple of {len(t.fields)} arrays")
        fields = zip(t.fields, a, strict=True)
        return tuple(_check_arg(xp, Var(f"{p.name}[{i}]", f), v, fn_name) for i, (f, v) in enumerate(fields))
    assert isinstance(t, TensorType)
    given = a
    if isinstance(a, (bool, int, float, list, tuple)):
        a = _from_python(a, t, f"{fn_name}: argument {p.name}")
    try:
        a = xp.asarray(a)
    except (TypeError, ValueError):
        a = None
    if a is None or a.dtype == object:
        raise TypeError(f"{fn_name}: argument {p.name} expects an array of shape {t.shape} and dtype {t.dtype}, "
                        f"got {type(given).__name__}")
    if tuple(a.shape) != t.shape or str(a.dtype) != t.dtype:
        raise ValueError(f"{fn_name}: argument {p.name} expects shape {t.shape} and dtype {t.dtype}, "
                         f"got shape {tuple(a.shape)} and dtype {a.dtype}")
    return a


_KIND_ORDER = {"b": 0, "i": 1, "u": 1, "f": 2}


def _from_python(value, t: TensorType, where: str):
    """A Python scalar or list has no dtype of its own: it takes the parameter's when its kind fits (ints
    fit a float parameter; floats never fit an integer one, which would truncate them)."""
    probe = np.asarray(value)
    kind = probe.dtype.kind
    if kind not in _KIND_ORDER or probe.shape != t.shape:
        return probe  # the caller reports the shape or the dtype
    if _KIND_ORDER[kind] > _KIND_ORDER[np.dtype(t.dtype).kind]:
        name = {"b": "bool", "i": "int", "u": "int", "f": "float"}[kind]
        raise TypeError(f"{where}: a Python {name} cannot be an {t.dtype} argument (pass an array of that dtype)")
    try:
        return np.asarray(value, dtype=t.dtype)
    except OverflowError:
        raise ValueError(f"{where}: {value!r} does not fit {t.dtype}") from None


class Executor:
    """Compiles and runs the functions of a module.

    >>> import numpy as np, tracer, ir
    >>> ex = ir.Executor(tracer.trace(lambda x: tracer.exp(x).sum(), np.zeros((2, 2), "float32")))
    >>> float(ex["main"](np.zeros((2, 2), "float32")))
    4.0
    >>> ex.stats.op_counts
    {'exp': 1, 'sum': 1}

    `check_types=True` also checks every kernel's result against the type inference gave it (for
    tests and debugging; it costs a little per op). `ex[name].source` is the Python the function
    runs as; setting `ex.reuse_buffers = False` before the first `ex[name]` gives every result a
    new buffer, `ex.specialize_kernels = False` runs every op through its generic kernel, and
    `ex.plan_storage = False` allocates every intermediate anew on each call.
    """

    reuse_buffers = True  # set False before compiling a function to give every result a new buffer
    specialize_kernels = True  # set False to run every op through its generic kernel (ir.runtime.specialize)
    plan_storage = True  # set False to allocate every intermediate anew on every call (ir.runtime.storage)

    def __init__(self, mod: IRModule, device: str = "cpu", check_types: bool = False):
        self.mod = mod
        self.device = "cuda" if device == "cuda:0" else device  # the current GPU, as tensors name it
        self.check_types = check_types
        self.xp = array_module(self.device)
        self.stats = Stats()
        self._compiled: dict[str, CompiledFunction] = {}

    def __getitem__(self, name: str) -> CompiledFunction:
        if name not in self._compiled:
            self._compiled[name] = CompiledFunction(self.mod[name], name, self.xp, self.stats, self.check_types,
                                                    self.reuse_buffers, self.specialize_kernels, self.plan_storage)
        return self._compiled[name]


__all__ = ["Executor", "Stats", "array_module"]
