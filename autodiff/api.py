"""The user's entry points: grad, value_and_grad and gradcheck.

The first call with a given input signature traces `fn`, runs the Gradient pass and the clean-up
passes, and compiles the adjoint; later calls with the same shapes and dtypes replay it. Before each
replay the tensors `fn` captured are looked up again where the trace found them (tracer.capture), so
the step computes with the tensors the user's Python holds now: updated in place, rebound, or replaced
in a module. docs/design.md, "What a compiled step sees", states the rules.
"""
from __future__ import annotations

import functools
import operator
import os
import warnings
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np

import ir
from ir import Executor, IRModule, substitute
from ir.transform.base import paused_gc
from ir.verifier import wanted as verify_wanted
from tracer import Tensor
from tracer.capture import Sources, locate
from tracer.inplace import write
from tracer.rng import fresh_seed
from tracer.tensor import active_trace, to_expr
from tracer.trace import Traced, arg_type, is_scalar_input, trace_function

from . import glue, pytree, step_cache
from .gradient import Gradient, _carries_gradient
from .planner import parse_budget, plan_checkpoints
from .step_args import (
    _array,
    _buffer_key,
    _describe,
    _describe_leaf,
    _differentiable,
    _distinct,
    _feed_arg,
    _mismatch_report,
    _object_refs,
    _on_gpu,
    _refuse_aliased_writes,
    _signature,
    _unshared,
)


class TraceMismatchError(RuntimeError):
    """check=True found that tracing fn again gives another computation than the cached trace: a value
    fn reads from outside (a Python number, a flag, a container's contents) changed since it was traced."""


def _flatten_wrt(wrt):
    """(leaves, a function of the leaves' gradients giving wrt's structure, each leaf's label in messages)."""
    if isinstance(wrt, Tensor):
        return [wrt], lambda gs: gs[0], ["wrt"]
    if isinstance(wrt, dict):
        keys = list(wrt)
        return [wrt[k] for k in keys], lambda gs: dict(zip(keys, gs, strict=True)), \
            [f"wrt[{k!r}]" for k in keys]
    if isinstance(wrt, (list, tuple)):
        leaves, kind = list(wrt), type(wrt) if isinstance(wrt, tuple) else list
        rebuild = (lambda gs: kind(*gs)) if hasattr(kind, "_fields") else \
            kind if kind in (list, tuple) else (lambda gs: kind(gs))
        return leaves, rebuild, [f"wrt[{i}]" for i in range(len(leaves))]
    # generators (model.parameters()) are materialized once
    try:
        leaves = list(wrt)
    except TypeError:
        got = type(wrt).__name__
        raise TypeError(f"wrt must be a Tensor, or a list, tuple or dict of Tensors, got {got}") from None
    return leaves, list, [f"wrt[{i}]" for i in range(len(leaves))]


def _check_argnums(argnums) -> tuple[int, ...]:
    """argnums as JAX takes them: an int (a NumPy integer too) or a sequence of ints, negative ones counting
    from the last positional argument (resolved per call, see `_resolve_argnums`)."""
    seq = isinstance(argnums, (tuple, list))
    nums = tuple(argnums) if seq else (argnums,)
    if not nums or any(isinstance(a, (bool, np.bool_)) or not isinstance(a, (int, np.integer)) for a in nums):
        raise TypeError(f"argnums must be an int or a tuple of ints, got {argnums!r}")
    nums = tuple(int(a) for a in nums)
    if len(set(nums)) != len(nums):
        raise TypeError(f"argnums must not repeat an index, got {argnums!r}")
    return nums


@dataclass
class _Compiled:
    mod: IRModule
    executor: Executor
    traced: IRModule  # what fn computed when traced (with its writes): check=True compares a new trace to it
    out_tree: object
    grad_slots: list[tuple[int, ...]]  # for each wrt leaf: its indices among require_grads (none: unused)
    guards: list  # (getter, value) of the Python values the trace read through tracer.guard (model.training)
    sources: Sources | None  # where each captured tensor is found; None: some cannot be, retrace every call
    captured_leaf: list[int | None]  # per captured tensor: the wrt leaf it was (gradients are routed by it)
    fresh: list[bool]  # per captured tensor: a random seed drawn anew for each call
    writes: list[tuple[str, int, ir.Expr]]  # in-place writes of fn, returned after the result's fields
    n_fields: int  # the result's fields at the top of the returned tuple (2 with has_aux, else 1)
    inputs: list[int]  # positions of the leaves fed as parameters (tensors, Python numbers as inputs)
    rebuild: object  # the gradients (one per wrt leaf or argnums leaf) in the structure handed back
    objects: tuple = ()  # (leaf position, reference) per object leaf keyed by id: the object itself must be back
    glues: dict = field(default_factory=dict)  # the leaves' types -> this entry's generated glue (autodiff/glue.py)

    def __post_init__(self):
        self.step = self.executor["main_adjoint"]  # the compiled adjoint, looked up once
        self.params = self.mod["main_adjoint"].params
        self.any_fresh = any(self.fresh)


_CACHE_ENTRIES = 16  # traces kept (an old one may hold an old model's structure alive)
_GLUES = 8  # generated glues tried before the generic path


class _GradFunction:
    def __init__(self, fn, wrt, has_aux: bool, return_value: bool, check: bool = False, memory_budget=None,
                 argnums=None):
        self.fn, self.has_aux, self.return_value, self.check = fn, has_aux, return_value, check
        self.memory_budget = None if memory_budget is None else parse_budget(memory_budget)
        self.static_scalars = False  # set when fn cannot take its Python-number arguments as traced inputs
        self.warned_missing = False
        if (wrt is None) == (argnums is None):
            raise TypeError("grad/value_and_grad: give exactly one of wrt= or argnums= (wrt names tensors by "
                            f"identity, argnums the positions of the arguments to differentiate, as in JAX); got "
                            f"{'neither' if wrt is None else 'both'}")
        self.argnums = None if argnums is None else _check_argnums(argnums)
        self.int_argnums = argnums is not None and not isinstance(argnums, (tuple, list))
        self.leaves, self.rebuild, self.labels = _flatten_wrt(() if wrt is None else wrt)
        self.wrt_type = type(wrt)
        for i, t in enumerate(self.leaves):
            if not isinstance(t, Tensor):
                raise TypeError(f"wrt[{i}] must be a Tensor, got {type(t).__name__}")
            if t.dtype not in ir.FLOAT_DTYPES:
                raise TypeError(f"wrt[{i}] has dtype {t.dtype}; only floating-point tensors have gradients")
        self.cache: OrderedDict[tuple, list[_Compiled]] = OrderedDict()  # least recently used first
        self.leaf_index = {id(t): i for i, t in enumerate(self.leaves)}
        self.last: _Compiled | None = None
        self.glues: list = []  # generated per-call glue of recent entries, most recently chosen first

    def options(self) -> tuple:
        """What, beside fn and the wrt tensors, decides what this step computes (autodiff/step_cache.py)."""
        return (self.return_value, self.has_aux, self.argnums, self.int_argnums, self.check, self.memory_budget,
                self.wrt_type, tuple(self.labels))

    @property
    def module(self) -> IRModule:
        """The module (main and the cleaned-up main_adjoint) that the last call ran."""
        if self.last is None:
            raise RuntimeError("no call yet: the module is traced on the first call")
        return self.last.mod

    @property
    def stats(self) -> ir.Stats:
        """The executor's stats of the last call: peak bytes held at once, op counts."""
        if self.last is None:
            raise RuntimeError("no call yet: the module is traced on the first call")
        return self.last.executor.stats

    def memory_profile(self) -> ir.MemoryProfile:
        """The memory timeline of the last call's step (see `ir.memory_profile`): it runs the compiled
        main_adjoint once more, on zeros of the same shapes and dtypes (bytes depend on nothing else)."""
        if self.last is None:
            raise RuntimeError("no call yet: memory_profile() describes the step the last call ran")
        mod, ex = self.last.mod, self.last.executor
        arrays = [ir.runtime.memory.zeros_for(ex.xp, p.type) for p in mod["main_adjoint"].params]
        profile = ir.memory_profile(mod, "main_adjoint", *arrays, device=ex.device)
        profile.step_name = getattr(self.fn, "__qualname__", None) or repr(self.fn)
        return profile

    def __call__(self, *args, **kwargs):
        # The fast path: a compiled signature's generated glue does the whole call, or answers MISS
        for j, fast in enumerate(self.glues):
            out = fast(args, kwargs)
            if out is not glue.MISS:
                if j:
                    self.glues.insert(0, self.glues.pop(j))
                return out
        return self._call(args, kwargs)

    def _call(self, args: tuple, kwargs: dict):
        """The generic path: every call the glue does not serve (first calls, changed guards, retraces, errors)."""
        # Arguments are pytrees: from here on `args` are the flat leaves of args and kwargs, `call` their tree
        flat: list = []
        call = pytree.CallTree(args, kwargs, flat)
        ctx = active_trace()
        if ctx is not None:  # grad of grad, or grad inside any traced function: inline the adjoint
            return self._call_in_trace(ctx, call, flat)
        args = flat
        key = self._key(call, args)
        entries = self.cache.get(key, ())
        compiled, feed = None, None
        for c in entries:
            if c.objects and not all(ref() is args[i] for i, ref in c.objects):
                continue  # an object leaf died and another took its address: what c baked from it is not this
            if not c.guards or all(getter() == value for getter, value in c.guards):
                feed = self._resolve(c, call, args)
                if feed is not None:
                    compiled = c
                    break
        if compiled is None:
            traced = self._trace(call, args)
            compiled, feed = self._compile(traced, call, args), traced.captured
            key = self._key(call, args)  # the trace may have found that fn needs its Python numbers baked in
            self._remember(key, compiled)
        elif self.check or os.environ.get("TRACEGRAD_CHECK") == "1":
            feed = self._check_trace(compiled, call, args, feed)
        if compiled.writes:
            _refuse_aliased_writes(compiled, call, args, feed)
        self.last = compiled
        if not self.check:
            self._adopt_glue(compiled, call, args)
        return self._run(compiled, args, feed)

    def _adopt_glue(self, c: _Compiled, call: pytree.CallTree, args) -> None:
        """Put the glue of entry c for calls shaped like this one first (generated the first time)."""
        types = (call.key, tuple(type(a) if type(a) is not Tensor else (Tensor, type(a._data)) for a in args))
        if types not in c.glues:
            c.glues[types] = glue.build(self, c, call, args)
        fast = c.glues[types]
        if fast is None:
            return
        self.glues = [fast] + [g for g in self.glues if g is not fast][:_GLUES - 1]

    def _remember(self, key, compiled: _Compiled) -> None:
        """Cache compiled first under key; beyond _CACHE_ENTRIES traces, the least recently used go."""
        entries = self.cache.setdefault(key, [])
        # a trace of an object that died can never be replayed again: drop it
        entries[:] = [c for c in entries if all(ref() is not None for _, ref in c.objects)]
        self.cache.move_to_end(key)
        entries.insert(0, compiled)
        while sum(len(v) for v in self.cache.values()) > _CACHE_ENTRIES:
            oldest = next(iter(self.cache))
            self.cache[oldest].pop()
            if not self.cache[oldest]:
                del self.cache[oldest]
        alive = {id(c) for v in self.cache.values() for c in v}
        self.glues = [g for g in self.glues if id(g.compiled) in alive]

    def _key(self, call: pytree.CallTree, args) -> tuple:
        # The tree's structure, and which leaf is which wrt leaf, are part of the signature; any other
        # tensor only by type.
        frozen = tuple(i for i, t in enumerate(self.leaves) if _frozen(t))
        try:
            return (frozen, call.key, *(_signature(a, self.leaf_index, self.static_scalars) for a in args))
        except TypeError:  # an unhashable leaf, or an iterator: name where it is
            for path, a in zip(call.paths(), args, strict=True):
                try:
                    _signature(a, self.leaf_index, self.static_scalars)
                except TypeError as e:
                    raise TypeError(f"grad: argument {path} is {e}") from None
            raise

    def _trace(self, call: pytree.CallTree, args) -> Traced:
        """Trace fn, its Python-number arguments as inputs; if fn needs one as a Python value (a shape, a
        loop count, a probability), trace again with them baked in, and do so from then on."""
        out: dict = {}
        flat, names = pytree.flat_fn(self.fn, call, self.has_aux, out), call.names(self.fn)
        if self.static_scalars or not any(is_scalar_input(a) for a in args):
            traced = trace_function(flat, args, names)
        else:
            try:
                traced = trace_function(flat, args, names, scalars_as_inputs=True)
            except Exception:  # noqa: BLE001 - any failure: the baked trace below raises the real error, if any
                traced = trace_function(flat, args, names)
                self.static_scalars = True
                self.glues = []  # built for Python numbers as inputs: the generic path keys them by value now
        traced.out_tree = out.get("aux")  # how to rebuild aux from the step's aux outputs
        return traced

    def _resolve(self, c: _Compiled, call: pytree.CallTree, args) -> list[Tensor] | None:
        """The captured tensors to feed `c` now, or None when c no longer computes what fn would."""
        if c.sources is None:  # some tensor cannot be found again: trace anew, reuse c if nothing changed
            traced = self._trace(call, args)
            same = ir.structural_equal(_with_writes(traced, self.has_aux), c.traced) and \
                pytree.same_aux(traced.out_tree, c.out_tree)
            feed = traced.captured if same else None
        else:
            feed = c.sources.resolve(self.fn, args)
        if feed is None or self._leaf_routes(feed, c.fresh) != c.captured_leaf:
            return None  # a wrt tensor came or went: the gradients are routed differently
        return feed

    def _leaf_routes(self, captured, fresh) -> list[int | None]:
        """Per captured tensor, the wrt leaf it is (None: not one, or a random seed)."""
        return [None if f else self.leaf_index.get(id(t)) for t, f in zip(captured, fresh, strict=True)]

    def _check_trace(self, c: _Compiled, call: pytree.CallTree, args, feed):
        """check=True: trace fn again and raise if it now computes something else than the cached trace."""
        traced = self._trace(call, args)
        new = _with_writes(traced, self.has_aux)
        if not ir.structural_equal(new, c.traced):
            raise TraceMismatchError(_mismatch_report(c.traced, new))
        if not pytree.same_aux(traced.out_tree, c.out_tree):
            raise TraceMismatchError(f"check=True: fn's aux now has the structure or Python values "
                                     f"{traced.out_tree}, the compiled step's {c.out_tree}")
        for k, (t, fed) in enumerate(zip(traced.captured, feed, strict=True)):
            if not c.fresh[k] and t is not fed:
                raise TraceMismatchError(
                    f"captured tensor {k} ({t.type}, {t._name or 'unnamed'}): fn now reads another tensor object "
                    "than the one the compiled step found where the trace had found it; please report this")
        return traced.captured

    def _compile(self, traced: Traced, call: pytree.CallTree, args) -> _Compiled:
        with paused_gc():  # building IR allocates much and frees little: no full collections meanwhile
            return self._compile_unpaused(traced, call, args)

    def _compile_unpaused(self, traced: Traced, call: pytree.CallTree, args) -> _Compiled:
        mod, slots, rebuild = self._differentiate(traced, call, args)
        # CuPy arrays in (arguments or captured weights) run the compiled step on the GPU
        arrays = [_array(a) for a in args] + [t._data for t in traced.captured]
        device = "cuda" if any(_on_gpu(a) for a in arrays) else "cpu"
        executor = Executor(mod, device=device)
        sources = locate(self.fn, args, traced.captured, traced.objects)  # objects: modules the trace read
        if sources.missing and not self.warned_missing:
            self.warned_missing = True
            warnings.warn(
                "tracegrad: fn reads tensors it cannot find again from its closure, globals, arguments or their "
                "attributes (" + ", ".join(_describe(traced.captured[k]) for k in sources.missing) + "); the "
                "compiled step traces fn on every call to stay current. Pass them as arguments or hold them in a "
                "module or container fn reads.", RuntimeWarning, stacklevel=3)
        fresh = [t._fresh_seed for t in traced.captured]  # False, True, or the Generator to draw from
        return _Compiled(mod, executor, _with_writes(traced, self.has_aux), traced.out_tree, slots,
                         traced.guards, None if sources.missing else sources,
                         self._leaf_routes(traced.captured, fresh), fresh, traced.writes,
                         2 if self.has_aux else 1, traced.inputs, rebuild, _object_refs(args))

    def _differentiate(self, traced, call: pytree.CallTree, args):
        """Gradient and clean-up of a trace: (module, per gradient handed back the indices of the parameters
        whose gradients sum to it (none: None), the function putting the gradients in the user's structure)."""
        self._check_output(traced)
        fn_ir = traced.mod["main"]
        arg_params = fn_ir.params[: len(fn_ir.params) - len(traced.captured)]
        source = _with_writes(traced, self.has_aux)
        if self.argnums is not None:
            param_of = dict(zip(traced.inputs, arg_params, strict=True))
            require, slots, rebuild = self._argnum_targets(call, args, param_of)
        else:
            require, slots = self._wrt_targets(traced, source, args, arg_params)
            rebuild = self.rebuild
        if self.memory_budget is not None:  # the planner writes its checkpoint regions into main
            source = plan_checkpoints(source, self.memory_budget, require_grads=require, target_index=0)
        mod = Gradient("main", require_grads=require, target_index=0)(source)
        mod = ir.transform.optimize()(ir.transform.cleanup()(mod))
        if verify_wanted():  # TRACEGRAD_VERIFY=1 (tests, debugging): the passes' output checked
            ir.verify(mod)
        return mod, slots, rebuild

    def _wrt_targets(self, traced, source: IRModule, args, arg_params):
        """require_grads and slots for wrt, whose leaves are tensors named by identity."""
        # A leaf may reach fn by several routes (passed twice, or passed and captured): one parameter
        # each, and the leaf's gradient is the sum of theirs.
        by_identity: dict[int, list[ir.Var]] = {}
        for a, p in zip([args[i] for i in traced.inputs], arg_params, strict=True):
            by_identity.setdefault(id(a), []).append(p)
        for t, p in zip(traced.captured, source["main"].params[len(arg_params):], strict=True):
            by_identity.setdefault(id(t), []).append(p)
        # read: on a differentiable path to the loss (torch's graph: not only through aux, stop_gradient or an
        # integer op such as argmax), or written in place (x[...] = v: zeros)
        every = source["main"].params
        read = _connected(source["main"]) | {
            every[traced.inputs.index(i)] if kind == "arg" else every[len(arg_params) + i]
            for kind, i, _ in traced.writes if kind != "attr"}  # attr: a module attribute bound in forward
        require, slots, unread = [], [], []
        for k, t in enumerate(self.leaves):
            # a frozen parameter (requires_grad_(False)) gets no gradient, as in torch: None
            params = [p for p in by_identity.get(id(t), []) if p in read] if not _frozen(t) \
                else None
            if params == []:
                unread.append(k)  # None as well, if fn can still reach it
            require.extend(p for p in params or () if p not in require)
            slots.append(tuple(require.index(p) for p in params or ()))
        if unread:
            self._refuse_unreachable(unread, args)
        return require, slots

    def _refuse_unreachable(self, unread: list[int], args) -> None:
        """A wrt leaf fn does not read gets None while fn can still reach it (torch's unused parameter);
        one that fn can no longer reach at all is a ValueError: it is not what fn computes with."""
        passed = {id(a) for a in args}
        search = [k for k in unread if id(self.leaves[k]) not in passed]
        if not search:
            return
        lost = [search[j] for j in locate(self.fn, args, [self.leaves[k] for k in search]).missing]
        if not lost:
            return
        which = "; ".join(f"{self.labels[k]} ({_describe_leaf(self.leaves[k])})" for k in lost)
        raise ValueError(
            f"grad: {which}: neither read by fn nor reachable from what fn holds (its closure, globals, arguments "
            "and their attributes), so its gradient would be a silent zero. fn now computes with other tensors "
            "(a functional update such as params = {k: params[k] - lr * g[k] for k in params}, or a rebound "
            "weight): differentiate with respect to the argument that holds them, value_and_grad(fn, argnums=0), "
            "or make a new step with the new tensors in wrt")

    def _argnum_targets(self, call: pytree.CallTree, args, param_of: dict):
        """require_grads, slots and the rebuild for argnums: every leaf of those arguments, positionally."""
        shown = self.argnums[0] if self.int_argnums else self.argnums
        n = len(call.args)
        if not all(-n <= a < n for a in self.argnums):
            raise ValueError(f"argnums={shown} but the step was called with {n} positional arguments"
                             + (" (keyword arguments have no position: pass them positionally)" if call.kwargs else ""))
        argnums = tuple(a % n for a in self.argnums)  # negative: from the last, as in JAX
        if len(set(argnums)) != len(argnums):
            raise ValueError(f"argnums={shown} names the same argument twice among {n} positional arguments")
        paths = call.paths()
        require, slots = [], []
        for a in argnums:
            for i in call.span(a):
                if args[i] is None:  # an empty subtree, as in JAX: None in the gradients too
                    slots.append(())
                    continue
                kind = _differentiable(args[i])
                if kind is not None:
                    raise TypeError(f"argnums={shown}: {paths[i]} is {kind}; only floating-point Tensors, arrays and "
                                    "numbers can be differentiated (as in JAX): pass it in another argument")
                if i not in param_of:
                    raise TypeError(f"argnums={shown}: {paths[i]} (a Python number) is baked into the trace (fn uses "
                                    "it as a Python value, or the step runs inside another trace), so it has no "
                                    "gradient: pass it as an array")
                require.append(param_of[i])
                slots.append((len(require) - 1,))
        trees = [call.args[a] for a in argnums]

        def rebuild(gs):
            it = iter(gs)
            grads = tuple(pytree.unflatten(t, it) for t in trees)
            return grads[0] if self.int_argnums else grads
        return require, slots, rebuild

    def _call_in_trace(self, ctx, call: pytree.CallTree, args):
        """Inside a trace, the adjoint's bindings are recorded into it, so the result is itself
        differentiable: grad(lambda x: grad(f, wrt=x)(x).sum(), wrt=...) is a second derivative."""
        out: dict = {}
        # nested: outer values fn reads become its parameters; numbers are baked
        traced = trace_function(pytree.flat_fn(self.fn, call, self.has_aux, out), args, call.names(self.fn))
        traced.out_tree = out.get("aux")
        mod, slots, rebuild = self._differentiate(traced, call, args)
        ctx.guards.extend(traced.guards)
        adjoint = mod["main_adjoint"]
        inputs = [a if isinstance(a, Tensor) else Tensor(a) for a in args if arg_type(a) is not None]
        mapping = {p: to_expr(t, ctx) for p, t in zip(adjoint.params, inputs + traced.captured, strict=True)}
        for bd in adjoint.bindings:
            mapping[bd.var] = ctx.builder.emit(substitute(bd.value, mapping), name=bd.var.name)
        value, grads = substitute(adjoint.body, mapping).fields
        if traced.writes:  # fn wrote to tensors in place: the same writes, recorded in the enclosing trace
            n = 2 if self.has_aux else 1
            for (kind, i, _), new in zip(traced.writes, value.fields[n:], strict=True):
                new = Tensor(_var=new, _trace=ctx) if isinstance(new, ir.Var) else Tensor(new.data)
                if kind == "attr":  # a module attribute fn bound a value to: bound in the enclosing trace
                    i.assign(new)
                    continue
                target = inputs[traced.inputs.index(i)] if kind == "arg" else traced.captured[i]
                write(target, new, "in-place write")
            value = value.fields[0] if n == 1 else ir.Tuple(value.fields[:n])

        def tensor(e):
            if isinstance(e, ir.Tuple):
                return tuple(tensor(f) for f in e.fields)
            return Tensor(_var=e, _trace=ctx) if isinstance(e, ir.Var) else Tensor(e.data)
        return self._assemble(tensor(value), tensor(grads), slots, rebuild, traced.out_tree, _traced_leaf)

    def _check_output(self, traced) -> None:
        body = traced.mod["main"].body
        value = body.fields[0] if self.has_aux and isinstance(body, ir.Tuple) else body
        t = value.type
        if not (isinstance(t, ir.TensorType) and t.shape == () and t.is_float):
            which = " as its first value" if self.has_aux else ""
            raise TypeError(f"grad: fn must return a floating-point scalar{which}, got {t}; "
                            "reduce it first (e.g. .sum() or .mean())")

    def _run(self, c: _Compiled, args, captured: list[Tensor]):
        params = c.params
        feed = [_feed_arg(args[i], params[k]) for k, i in enumerate(c.inputs)]
        if c.any_fresh:
            for t, fresh in zip(captured, c.fresh, strict=True):
                # a random op without a seed: a fresh draw each call (from its Generator, if it was given one)
                feed.append(fresh_seed(fresh) if fresh else t._data)
        else:
            feed.extend([t._data for t in captured])
        value, grads = _unshared(c.step(*feed), {id(a) if a.base is None else _buffer_key(a) for a in feed})
        if c.writes:  # fn wrote to tensors in place: write the new values where an eager call would have
            for (kind, i, _), new in zip(c.writes, value[c.n_fields:], strict=True):
                if kind == "attr":  # a module attribute forward bound a traced value to: a new tensor there
                    i.assign(new)
                    continue
                target = args[i] if kind == "arg" else captured[i]
                (target._data if isinstance(target, Tensor) else target)[...] = new
            value = value[0] if c.n_fields == 1 else value[:c.n_fields]
        seen: set[int] = set()  # value, aux and gradients: each a buffer of its own
        value, grads = _distinct(value, seen), _distinct(grads, seen)
        return self._assemble(value, grads, c.grad_slots, c.rebuild, c.out_tree, Tensor.wrap)

    def _assemble(self, value, grads, slots, rebuild, out_tree, leaf):
        """The user's result: gradients in the structure of wrt (or of the argnums arguments), None where a
        slot is empty, and the value (with aux in fn's structure); `leaf` turns each result into a Tensor."""
        handed: set[int] = set()  # a tensor twice in wrt: the second gets a copy (each a buffer of its own)

        def one(s):
            if len(s) != 1:
                return functools.reduce(operator.add, [grads[i] for i in s])
            if s[0] in handed and leaf is not _traced_leaf:
                return grads[s[0]].copy()
            handed.add(s[0])
            return grads[s[0]]
        gradients = rebuild([leaf(one(s)) if s else None for s in slots])
        if self.has_aux:
            aux = pytree.rebuild_aux(value[1], out_tree, leaf)
            if not self.return_value:
                return gradients, aux
            return (leaf(value[0]), aux), gradients
        return (leaf(value), gradients) if self.return_value else gradients


def _frozen(t) -> bool:
    """A parameter with requires_grad False gets no gradient (None), as in torch. Any other tensor in wrt is
    differentiated whether it requires grad or not: wrt names what to differentiate, as in JAX."""
    return t._is_parameter and not t.requires_grad


def _traced_leaf(t):
    return t  # results made inside a trace are Tensors already


def _connected(fn: ir.Function) -> set:
    """The variables whose gradient is not None. First those the loss (fn's result, or its first field)
    depends on through floating-point values: torch's autograd graph of the loss, so a variable read only for
    aux, through stop_gradient (detach), or through an integer or boolean value (argmax, a comparison) is not
    in it; zeros_like and its kin keep their input in the graph (dropout(p=1) is one, and torch's is x * 0).
    Then, as zeros, those read by a computation whose result nothing uses: the trace of a nested derivative
    that simplified to a constant (d/dx of d/dx x), where torch's create_graph would keep them in the graph."""
    body = fn.body
    target = body.fields[0] if isinstance(body, ir.Tuple) else body
    reach = {target} if isinstance(target, ir.Var) else set()
    live = set(ir.free_vars(body))
    for bd in reversed(fn.bindings):
        if bd.var in reach and not (isinstance(bd.value, ir.Call) and bd.value.op == "grad.stop_gradient"):
            reach.update(v for v in ir.free_vars(bd.value) if _carries_gradient(v.type))
        if bd.var in live:
            live.update(ir.free_vars(bd.value))
    for bd in fn.bindings:
        if bd.var not in live:  # dead: read, as before this rule (zeros)
            reach.update(ir.free_vars(bd.value))
    return reach


def _with_writes(traced: Traced, has_aux: bool) -> IRModule:
    """The traced module returning the result's fields (value, or value and aux) and then fn's writes."""
    if not traced.writes:
        return traced.mod
    body = traced.mod["main"].body
    return traced.with_writes(list(body.fields) if has_aux and isinstance(body, ir.Tuple) else [body])


def grad(fn, wrt=None, has_aux: bool = False, *, argnums=None):
    """The gradient of scalar `fn` with respect to `wrt` (a Tensor, or a list, tuple or dict of them, named
    by identity), or, as in JAX, with respect to the arguments at positions `argnums` (an int or a tuple of
    ints; each a pytree whose leaves are floating-point Tensors, arrays or numbers): gradients shaped like
    wrt, or like those arguments (a tuple of them for a tuple argnums). Give exactly one of the two.

    A wrt tensor fn does not read gets None while fn can still reach it (through its closure, globals,
    arguments or their attributes), as torch's unused parameters; one fn can no longer reach is a
    ValueError. A leaf of an argnums argument that fn does not read gets zeros, as in JAX.

    >>> import numpy as np, tracer, autodiff
    >>> w = tracer.tensor(np.ones((3, 2), "float32"))
    >>> g = autodiff.grad(lambda x: (x @ w).sum(), wrt=[w])(np.ones((4, 3), "float32"))
    >>> g[0].shape, float(g[0].numpy()[0, 0])
    ((3, 2), 4.0)
    >>> params = {"w": np.ones(3, "float32")}
    >>> autodiff.grad(lambda p, x: (x @ p["w"]).sum(), argnums=0)(params, np.ones((4, 3), "float32"))["w"].numpy()
    array([4., 4., 4.], dtype=float32)
    """
    return _made(_GradFunction(fn, wrt, has_aux, return_value=False, argnums=argnums))


def value_and_grad(fn, wrt=None, has_aux: bool = False, *, argnums=None, check: bool = False,
                   memory_budget=None):
    """Like `grad`, returning `(value, gradients)`, or `((value, aux), gradients)` with has_aux.

    check=True (or the environment variable TRACEGRAD_CHECK=1) traces fn again on every call and raises
    TraceMismatchError, naming the first difference, when the new trace differs from the one the step would
    replay: the way to find a Python value read from outside that was baked into the trace.

    memory_budget (bytes, or a string like "64MiB") lets `autodiff.plan_checkpoints` choose checkpoint
    regions so that the step's peak_bytes fits it with the least recomputation; ValueError when no plan can.
    """
    return _made(_GradFunction(fn, wrt, has_aux, return_value=True, check=check, memory_budget=memory_budget,
                               argnums=argnums))


def _made(step: _GradFunction) -> _GradFunction:
    """The step made before with the same code, captures and options (made again in a loop), else step."""
    return step_cache.reuse(step, step.fn, step.options())


def gradcheck(fn, *args, eps: float = 1e-6, rtol: float = 1e-5, atol: float = 1e-7) -> bool:
    """Check fn's gradients from the Gradient pass against float64 central differences.

    Floating arguments are promoted to float64; a non-scalar result is reduced with fixed random
    weights (checking one vector-Jacobian product). Returns True, or raises AssertionError naming the
    argument, the worst element and both values.

    >>> import tracer, autodiff
    >>> autodiff.gradcheck(lambda x: (x * x).sum(), tracer.tensor([1.0, 2.0]))
    True
    """
    tensors = [Tensor(np.asarray(_array(a), dtype="float64")) if _is_float_arg(a) else a for a in args]
    wrt = [t for t, a in zip(tensors, args, strict=True) if _is_float_arg(a)]
    if not wrt:
        raise TypeError("gradcheck: no floating-point argument to check")
    weights: dict[tuple, np.ndarray] = {}

    def scalar_fn(*xs):
        out = fn(*xs)
        if out.shape == ():
            return out
        w = weights.setdefault(out.shape, np.random.default_rng(0).uniform(0.5, 1.5, out.shape))
        return (out * Tensor(w.astype(out.dtype))).sum()

    analytic = _GradFunction(scalar_fn, wrt, False, return_value=False)(*tensors)  # a closure of this call: not kept
    traced = trace_function(scalar_fn, tensors)
    forward = Executor(traced.mod)["main"]

    def value(xs):
        feed = [_array(x) for x in xs if arg_type(x) is not None]
        return float(forward(*feed, *[t._data for t in traced.captured]))

    for k, (t, g) in enumerate(zip(wrt, analytic, strict=True)):
        base = t._data
        numeric = np.zeros_like(base)
        for idx in np.ndindex(base.shape):
            orig = base[idx]
            base[idx] = orig + eps
            hi = value(tensors)
            base[idx] = orig - eps
            lo = value(tensors)
            base[idx] = orig
            numeric[idx] = (hi - lo) / (2 * eps)
        got = np.zeros_like(base) if g is None else np.asarray(g)  # None: fn does not read it
        err = np.abs(got - numeric) - (atol + rtol * np.abs(numeric))
        if err.size and err.max() > 0:
            worst = tuple(int(i) for i in np.unravel_index(int(np.argmax(err)), err.shape))
            raise AssertionError(
                f"gradcheck: gradient of float argument {k} (shape {base.shape}) disagrees at index {worst}: "
                f"Gradient pass {float(got[worst])!r}, finite differences {float(numeric[worst])!r} "
                f"(max abs error {np.abs(got - numeric).max():.3g})")
    return True


def _is_float_arg(a) -> bool:
    t = arg_type(a)
    return t is not None and t.is_float
