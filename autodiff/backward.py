"""`loss.backward()` and `autograd.grad`: the backward half of a recorded tape, compiled once per structure
(with create_graph=True evaluated through the eager ops instead, so that it is recorded too).

The tape (tracer/autograd.py) holds the forward program as bindings and its eager values. On the first
backward of a structure, the slice of the tape that the targets depend on becomes a function `main`
(parameters: the leaves and inputs it reads); the Gradient pass adds `main_adjoint`; the adjoint's
forward bindings are then turned into parameters, fed the saved eager arrays, so the forward is never
computed twice; cleanup() and optimize() run, and ir.Executor compiles what is left, the backward
alone. The result is cached under the tape's parts (op, attributes, argument slots; shapes and dtypes of
leaves and inputs), a tuple grown as ops are recorded, so a training loop compiles on step 1 only.
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

import ir
from ir import Binding, Block, Builder, Executor, Function, IRModule, TupleType, Var, free_vars
from ir.ops import get_op
from ir.transform.base import paused_gc
from tracer import Tensor
from tracer import autograd as ag
from tracer.tensor import apply, dtype_name

from .gradient import Gradient
from .step_args import _buffer_key

_CACHE: OrderedDict[tuple, _Compiled] = OrderedDict()
_CACHE_ENTRIES = 32
compiles = 0  # backward functions compiled so far (tests read it: a replayed step compiles nothing)

_SECOND_TIME = ("Trying to backward through the graph a second time (or directly access saved tensors after they "
                "have already been freed). Saved intermediate values of the graph are freed when you call "
                ".backward() or autograd.grad(). Specify retain_graph=True if you need to backward through the "
                "graph a second time or if you need to access saved tensors after calling backward.")


@dataclass
class _Compiled:
    step: object  # the compiled backward: saved arrays (and seeds) in, gradients out
    mod: IRModule
    feeds: list[int]  # per parameter: the tape slot whose value it takes (-1 - k: the k-th seed)
    wanted: list[int]  # per returned gradient: the slot it is the gradient of
    ops: list[int]  # the binding slots the backward passes through (released after it, unless retain_graph)
    in_slice: frozenset  # every slot the targets depend on
    read: frozenset  # the slots whose values it reads (the targets too: their tensors' values stay on the tape)


def _tape_of(tensors) -> tuple[ag.Tape, list[int]]:
    tape, slots = None, []
    for i, t in enumerate(tensors):
        if not isinstance(t._ag, ag.Node):
            raise RuntimeError(f"element {i} of tensors does not require grad and does not have a grad_fn")
        other = ag.resolve(t._ag)[0]
        tape = other if tape is None or other is tape else ag.merge(tape, other)
    for t in tensors:
        slots.append(ag.resolve(t._ag)[1])
    return tape, slots


def _seeds(tensors, grad_tensors) -> list:
    """Per target, the array its gradient starts from (None: a scalar's implicit 1)."""
    if grad_tensors is None:
        grad_tensors = [None] * len(tensors)
    elif isinstance(grad_tensors, (Tensor, np.ndarray)) or not isinstance(grad_tensors, (list, tuple)):
        grad_tensors = [grad_tensors]
    if len(grad_tensors) != len(tensors):
        raise RuntimeError(f"grad can be implicitly created only for scalar outputs: got {len(grad_tensors)} "
                           f"gradients for {len(tensors)} tensors")
    out = []
    for i, (t, g) in enumerate(zip(tensors, grad_tensors, strict=True)):
        if g is None:
            if t.shape != ():
                raise RuntimeError("grad can be implicitly created only for scalar outputs")
            out.append(None)
            continue
        g = g._data if isinstance(g, Tensor) else np.asarray(g)
        if tuple(g.shape) != t.shape:
            raise RuntimeError(f"Mismatch in shape: grad_output[{i}] has a shape of {tuple(g.shape)} and output[{i}] "
                               f"has a shape of {t.shape}.")
        out.append(g if g.dtype == t._data.dtype else g.astype(t._data.dtype))
    return out


def _slice(parts: list[tuple], targets: list[int]) -> set[int]:
    """The slots the targets depend on."""
    seen, stack = set(), list(targets)
    while stack:
        s = stack.pop()
        if s in seen:
            continue
        seen.add(s)
        part = parts[s]
        kind = part[0]
        if kind == "item":
            stack.append(part[2])
        elif kind != "leaf" and kind != "input":
            stack.extend(part[2])
    return seen


def _run(tape: ag.Tape, targets: list[int], seeds: list, wanted_key, retain_graph: bool) -> tuple[_Compiled, tuple]:
    """Compile (or find) and run the backward from `targets`; returns the entry and the gradients."""
    parts, values = tape.parts, tape.values
    top = max(targets)
    device = "cpu" if type(values[0]) is np.ndarray else "cuda"  # slot 0 is a parameter: always kept
    seed_key = tuple(None if g is None else (g.shape, g.dtype) for g in seeds)
    program = tuple(parts[:top + 1])
    key = (program, tuple(targets), seed_key, wanted_key, device)
    entry = _CACHE.get(key)
    if entry is not None and any(values[s] is None for s in entry.feeds if s >= 0) and not (
            tape.freed and not tape.freed.isdisjoint(entry.ops)):
        entry = None  # it reads a value this tape did not keep: compiled again, recomputing what is missing
    if entry is None:
        # values the tape did not keep (tracer.autograd's hint: the last backward of the same program never read
        # them) are recomputed from the ones it kept; the entry stays valid while its own reads are kept
        entry = _compile(tape, targets, seeds, wanted_key, device, set(_dropped(tape, top)))
        _CACHE[key] = entry
        if len(_CACHE) > _CACHE_ENTRIES:
            _CACHE.popitem(last=False)
    else:
        _CACHE.move_to_end(key)
    if tape.freed and not tape.freed.isdisjoint(entry.ops):
        raise RuntimeError(_SECOND_TIME)
    ag.set_hint(program, entry.read)
    feed = []
    for s in entry.feeds:
        feed.append(values[s] if s >= 0 else seeds[-1 - s])
    if ag._VERSIONS:
        _check_versions(tape, entry.feeds)
    grads = _owned(entry.step(*feed), feed)
    if not retain_graph:
        tape.freed.update(entry.ops)
        for s in entry.ops:
            values[s] = None
    return entry, grads


def _dropped(tape: ag.Tape, top: int) -> tuple:
    """The binding slots up to `top` whose values the tape did not keep (released ones are not: those raise)."""
    values, bindings, freed = tape.values, tape.bindings, tape.freed
    return tuple(s for s in range(top + 1) if values[s] is None and bindings[s] is not None and s not in freed)


def _owned(grads: tuple, feed: list) -> list:
    """The gradients, each in a buffer of its own: one that is (a view of) an array fed in, or shares a buffer
    with another gradient, or is read-only (a broadcast), is copied; `.grad` is the user's to write into."""
    fed = {_buffer_key(a) for a in feed}  # numba's results name their allocation, not their MemInfo
    out, seen = [], set()
    for g in grads:
        owner = _buffer_key(g)
        if owner in fed or owner in seen or not getattr(g.flags, "writeable", True):
            g = g.copy()
            owner = id(g)
        seen.add(owner)
        out.append(g)
    return out


def _check_versions(tape: ag.Tape, feeds: list[int]) -> None:
    version, values, versions = ag.version, tape.values, tape.versions
    for s in feeds:
        if s >= 0 and version(values[s]) != versions[s]:
            part, value = tape.parts[s], tape.values[s]
            made = "a leaf" if part[0] == "leaf" else "an input" if part[0] == "input" else \
                f"output 0 of {ag.Node(tape, s, part[0] if part[0] != 'item' else tape.parts[part[2]][0]).name()}"
            raise RuntimeError(
                "one of the variables needed for gradient computation has been modified by an inplace operation: "
                f"[{dtype_name(value.dtype)} {tuple(value.shape)}], which is {made}, is at version "
                f"{ag.version(value)}; expected version {tape.versions[s]} instead. Hint: compute out of place "
                "(y = x + 1) where a value is still needed by backward, or clone() it first.")


def _compile(tape: ag.Tape, targets, seeds, wanted_key, device, dropped: set) -> _Compiled:
    global compiles
    with paused_gc():
        in_slice = _slice(tape.parts, targets)
        order = sorted(in_slice)
        wanted = _wanted(tape, order, in_slice, wanted_key)
        step, mod, feeds = _backward_function(tape, order, targets, seeds, wanted, device, dropped)
        compiles += 1
    ops = [s for s in order if tape.bindings[s] is not None]
    read = frozenset(s for s in feeds if s >= 0) | frozenset(targets)
    return _Compiled(step, mod, feeds, wanted, ops, frozenset(in_slice), read)


def _wanted(tape: ag.Tape, order, in_slice, wanted_key) -> list[int]:
    if wanted_key[0] == "leaves":  # backward(): every leaf, and each retained non-leaf, in the slice
        retained = set(wanted_key[1])
        return [s for s in order if s in tape.leaves or s in retained]
    return [s for s in wanted_key[1] if s in in_slice]  # autograd.grad(inputs=...): those the targets depend on


def _run_recorded(tape: ag.Tape, targets, seeds, wanted_key) -> tuple[list[int], list[Tensor]]:
    """create_graph=True: the backward IR evaluated binding by binding through the eager ops, so each of its
    ops is recorded on the tape like any other and the gradients can be differentiated again."""
    in_slice = _slice(tape.parts, targets)
    order = sorted(in_slice)
    if tape.freed and not tape.freed.isdisjoint(s for s in order if tape.bindings[s] is not None):
        raise RuntimeError(_SECOND_TIME)
    wanted = _wanted(tape, order, in_slice, wanted_key)
    fn, where = _backward_ir(tape, order, targets, seeds, wanted, set(_dropped(tape, max(targets))))
    mod, feeds = _pruned(ir.transform.DeadCodeElimination()(IRModule({"backward": fn})), where)
    _check_versions(tape, feeds)
    fn = mod["backward"]
    env = {p: _slot_tensor(tape, s, seeds) for p, s in zip(fn.params, feeds, strict=True)}
    with ag.enable_grad():
        for bd in fn.bindings:
            env[bd.var] = _evaluate(bd.value, env)
        grads = [_evaluate(f, env) for f in fn.body.fields]
        # a gradient that is a leaf or a fed value itself (d(w1 * w2)/dw1 = w2) becomes a tensor of its own
        grads = [apply("astype", [g], dtype=g.dtype) if g._ag is not None and not isinstance(g._ag, ag.Node) or
                 g._ag is None else g for g in grads]
    return wanted, grads


def _slot_tensor(tape: ag.Tape, s: int, seeds) -> Tensor:
    """The tensor standing for slot s while the backward is evaluated eagerly: the leaf itself, a recorded
    value (its Node), or an input (untracked)."""
    if s < 0:
        return Tensor.wrap(seeds[-1 - s])
    kind = tape.parts[s][0]
    if kind == "leaf":
        return tape.leaves[s]
    t = Tensor.wrap(tape.values[s])
    if kind != "input":
        t._ag = ag.Node(tape, s, tape.parts[tape.parts[s][2]][0] if kind == "item" else kind, ag.version(t._data))
    return t


def _evaluate(e, env):
    if isinstance(e, Var):
        return env[e]
    if isinstance(e, ir.Constant):
        return Tensor.wrap(e.data)
    if isinstance(e, ir.Tuple):
        return tuple(_evaluate(f, env) for f in e.fields)
    if isinstance(e, ir.TupleGetItem):
        return _evaluate(e.tuple_value, env)[e.index]
    args = [_evaluate(a, env) for a in e.args]
    return apply(e.op, [list(args[0])] if get_op(e.op).tuple_input else args, **e.attrs)


def _backward_ir(tape: ag.Tape, order, targets, seeds, wanted, dropped: set):
    """The backward as IR: Gradient of the slice, forward bindings made parameters (see the module doc), but
    those whose values the tape did not keep (`dropped`), which are recomputed from what it kept; returns the
    function and, per parameter, where its value comes from (a slot, or -1 - k: seed k)."""
    params = [tape.vars[s] for s in order if tape.bindings[s] is None]
    source = {tape.vars[s]: s for s in order}
    bindings = [tape.bindings[s] for s in order if tape.bindings[s] is not None]
    b = Builder()
    seed_vars = []
    total = None
    for k, (s, g) in enumerate(zip(targets, seeds, strict=True)):
        term = tape.vars[s]
        if g is not None:  # sum(y * seed): its gradient with respect to y is the seed
            seed = Var(f"grad_output{k}", ir.TensorType(tuple(g.shape), dtype_name(g.dtype)))
            seed_vars.append(seed)
            source[seed] = -1 - k
            term = b.call("sum", b.call("multiply", term, seed), axis=None)
        total = term if total is None else b.call("add", total, term)
    main = Function(params + seed_vars, [Block(bindings + b.bindings)], total)
    mod = Gradient("main", require_grads=[tape.vars[s] for s in wanted])(IRModule({"main": main}))
    adjoint = mod["main_adjoint"]
    n_forward = len(main.bindings)
    forward, backward = adjoint.bindings[:n_forward], adjoint.bindings[n_forward:]
    # the adjoint's parameters and forward bindings stand for main's, in the same order
    origin = dict(zip(adjoint.params, main.params, strict=True))
    for new, old in zip(forward, main.bindings, strict=True):
        origin[new.var] = old.var
    kept = [bd for bd, old in zip(forward, main.bindings, strict=True) if old.var not in source]  # the seeds' sums
    grads = adjoint.body.fields[1]
    read = set(free_vars(grads))
    for bd in kept + backward:
        read.update(free_vars(bd.value))
    new_params, rebuilt, recomputed = list(adjoint.params), [], []
    for bd in reversed(forward):  # last first: a recomputed value's own inputs are read too
        old = origin[bd.var]
        if bd.var not in read or old not in source:
            continue
        if source[old] in dropped:
            recomputed.append(bd)
            read.update(free_vars(bd.value))
            continue
        if isinstance(bd.var.type, TupleType):  # a tuple-valued op (split): its fields, fed one by one
            fields = [Var(f"{bd.var.name}_{i}", f) for i, f in enumerate(bd.var.type.fields)]
            for i, f in enumerate(fields):
                origin[f] = tape.vars[source[old] + 1 + i]  # the items follow their tuple on the tape
            new_params += fields
            rebuilt.append(Binding(bd.var, ir.Tuple(fields)))
        else:
            new_params.append(bd.var)
    fn = Function(new_params, [Block(rebuilt + recomputed[::-1] + kept + backward)], grads)
    return fn, lambda p: source[origin.get(p, p)]


def _pruned(mod: IRModule, where) -> tuple[IRModule, list[int]]:
    """The module with the parameters its function no longer reads removed, and each kept one's feed."""
    fn = mod["backward"]
    used = set(free_vars(fn.body))
    for bd in fn.bindings:
        used.update(free_vars(bd.value))
    fn = Function([p for p in fn.params if p in used], fn.blocks, fn.body)
    out = IRModule({"backward": fn})
    ir.verify(out)
    return out, [where(p) for p in fn.params]


def _backward_function(tape: ag.Tape, order, targets, seeds, wanted, device, dropped: set):
    """The compiled backward: the backward IR after cleanup() and optimize(), on ir.Executor."""
    fn, where = _backward_ir(tape, order, targets, seeds, wanted, dropped)
    mod, feeds = _pruned(ir.transform.optimize()(ir.transform.cleanup()(IRModule({"backward": fn}))), where)
    return Executor(mod, device=device)["backward"], mod, feeds


# ---------------------------------------------------------------- the entry points tracer.autograd calls


def _targets(tensors):
    if isinstance(tensors, Tensor):
        return [tensors]
    return list(tensors)


def backward(tensors, grad_tensors, retain_graph, create_graph, inputs) -> None:
    tensors = _targets(tensors)
    if any(t._var is not None for t in tensors):
        raise tracer_error()
    seeds = _seeds(tensors, grad_tensors)
    if inputs is not None:
        inputs = _targets(inputs)
        grads = _grad(tensors, inputs, seeds, retain_graph, True, False, create_graph)
        for t, g in zip(inputs, grads, strict=True):
            if g is not None:
                _accumulate(t, g, create_graph)
        return
    for t, g in zip(tensors, seeds, strict=True):  # `w.backward()` on a leaf: its gradient is the seed
        if t._ag is ag.LEAF:
            _accumulate(t, Tensor.wrap(np.ones(t.shape, t._data.dtype) if g is None else g.copy()), False)
    recorded = [(t, g) for t, g in zip(tensors, seeds, strict=True) if t._ag is not ag.LEAF]
    if not recorded and len(recorded) < len(tensors):
        return
    tape, slots = _tape_of([t for t, _ in recorded])
    retained = tuple(sorted(s for s, r in tape.retained.items() if r() is not None))
    wanted, grads = _backward_any(tape, slots, [g for _, g in recorded], ("leaves", retained), retain_graph,
                                  create_graph)
    for s, g in zip(wanted, grads, strict=True):
        t = tape.leaves.get(s)
        if t is None:
            t = tape.retained[s]()
        if t is not None:
            _accumulate(t, g, create_graph)


def _backward_any(tape, slots, seeds, wanted_key, retain_graph, create_graph):
    """(wanted slots, gradients): compiled arrays, or with create_graph recorded Tensors (as torch, retain_graph
    defaults to create_graph)."""
    retain = create_graph if retain_graph is None else bool(retain_graph)
    if not create_graph:
        entry, grads = _run(tape, slots, seeds, wanted_key, retain)
        return entry.wanted, [Tensor.wrap(g) for g in grads]
    wanted, grads = _run_recorded(tape, slots, seeds, wanted_key)
    if not retain:
        ops = [s for s in _slice(tape.parts, slots) if tape.bindings[s] is not None]
        tape.freed.update(ops)
    return wanted, grads


def _accumulate(t: Tensor, g: Tensor, recorded: bool) -> None:
    """t.grad += g, as torch's AccumulateGrad: the first gradient is stored; later ones are added in place, or
    out of place when either side is recorded (create_graph), so the sum stays differentiable."""
    if t._grad is None:
        t._grad = g
        return
    old = t._grad
    if recorded or old._ag is not None:
        t._grad = old + g
        return
    a = old._data
    if a.shape == g.shape and a.dtype == g._data.dtype and getattr(a.flags, "writeable", True):
        a += g._data
        ag.bump(a)
    else:
        t._grad = Tensor.wrap(a + g._data)


def grad(outputs, inputs, grad_outputs, retain_graph, create_graph, allow_unused, materialize_grads):
    outputs = _targets(outputs)
    if any(t._var is not None for t in outputs):
        raise tracer_error()
    return _grad(outputs, _targets(inputs), _seeds(outputs, grad_outputs), retain_graph, allow_unused,
                 materialize_grads, create_graph)


def _grad(outputs, inputs, seeds, retain_graph, allow_unused, materialize_grads, create_graph) -> tuple:
    for t in inputs:
        if not isinstance(t, Tensor) or t._ag is None:
            raise RuntimeError("One of the differentiated Tensors does not require grad")
    tape, slots = _tape_of(outputs)
    per_input = []  # the slots of each input on this tape (a leaf can have several, after tapes merge)
    for t in inputs:
        if t._ag is ag.LEAF:
            per_input.append([s for s, leaf in tape.leaves.items() if leaf is t])
        else:
            other, s = ag.resolve(t._ag)
            per_input.append([s] if other is tape else [])
    asked = tuple(sorted({s for ss in per_input for s in ss}))
    wanted, grads = _backward_any(tape, slots, seeds, ("inputs", asked), retain_graph, create_graph)
    by_slot = dict(zip(wanted, grads, strict=True))
    out = []
    for t, ss in zip(inputs, per_input, strict=True):
        got = [by_slot[s] for s in ss if s in by_slot]
        if not got:
            if not allow_unused and not materialize_grads:
                raise RuntimeError("One of the differentiated Tensors appears to not have been used in the graph. "
                                   "Set allow_unused=True if this is the desired behavior.")
            out.append(Tensor.wrap(np.zeros(t.shape, t._data.dtype)) if materialize_grads else None)
            continue
        total = got[0]
        for g in got[1:]:
            total = total + g
        out.append(total)
    return tuple(out)


def tracer_error():
    from tracer import TraceError
    return TraceError("backward() of a traced value: inside autodiff.grad / value_and_grad the whole traced "
                      "function is differentiated; return the loss instead of calling backward() on it")


class _Backend:
    backward = staticmethod(backward)
    grad = staticmethod(grad)


ag.register(_Backend)
