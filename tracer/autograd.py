"""Autograd on eager tensors, as torch's: the tape that eager ops on requires-grad tensors append to, and
version counters (grad mode is tracer/grad_mode.py; `.grad`, `.requires_grad`, `.backward()` and the other
Tensor attributes are tracer/tensor_grad.py).

An eager op whose inputs include a tensor that requires grad runs as always (`tensor._run_eager`) and
also appends a typed SSA binding to a `Tape`: one dataflow block, emitted with the ir builder the tracer
uses. Every value on a tape has a *slot* (leaves, inputs and bindings in order of creation); the
result tensor carries a `Node` (its tape and slot), which is its `grad_fn`. Alongside each binding the
tape keeps the eager array (what the backward pass reads instead of recomputing the forward), the
version of that array's buffer when it was recorded, and a small hashable *part* naming the op, its
attributes and the slots it read: the tuple of parts is the recorded program's structure, the key the
compiled backward is cached under (autodiff/backward.py, which registers itself here at import:
tracer never imports autodiff). docs/design.md, "loss.backward(): eager values, a recorded tape",
says why.

A tape starts at an op whose tracked inputs are leaves only, so each forward pass gets its own and a
tape lives exactly as long as some tensor recorded on it; an op reading two tapes merges them.
"""
from __future__ import annotations

import weakref

from ir import Builder, Call, TensorType, Tuple, Var
from ir.runtime import anomaly as _anomaly
from ir.runtime.executor import buffer_owner

from .grad_mode import (  # noqa: F401  (torch.autograd's names, here too)
    enable_grad,
    grad_mode,
    inference_mode,
    is_grad_enabled,
    no_grad,
    set_grad_enabled,
)
from .source import user_source
from .tensor import dtype_name

# ---------------------------------------------------------------- version counters


_VERSIONS: dict[int, int] = {}  # id(buffer owner) -> in-place writes so far; an entry goes with its buffer


def bump(array) -> None:
    """Count an in-place write to `array`'s buffer (views share their base's counter, as in torch)."""
    owner = buffer_owner(array)
    key = id(owner)
    v = _VERSIONS.get(key)
    if v is None:
        try:
            weakref.finalize(owner, _VERSIONS.pop, key, None)
        except TypeError:  # no weak references to this kind of buffer: count it for the process
            pass
        v = 0
    _VERSIONS[key] = v + 1


def version(array) -> int:
    """The in-place writes so far to array's buffer (a tuple of arrays: their sum)."""
    if not _VERSIONS or array is None:
        return 0
    if type(array) is tuple:
        return sum(version(a) for a in array)
    return _VERSIONS.get(id(array if array.base is None else buffer_owner(array)), 0)


# ---------------------------------------------------------------- the tape


class _Leaf:
    """The autograd record of a leaf that requires grad (one shared marker)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "LEAF"

    def __reduce__(self):
        return "LEAF"  # copy.deepcopy(model) and pickling keep the one marker


LEAF = _Leaf()


class Node:
    """The `grad_fn` of a recorded result: the op that made it, its tape and slot, and `ver`, the in-place writes
    to the tensor's buffer when it got this node. A later op reading the tensor while its buffer's count differs
    (a write through a view of it, or through the tensor it is a view of: torch rebases the view's graph,
    tracegrad has no such graph) raises instead of recording the values' old history (see `stale`)."""

    __slots__ = ("tape", "slot", "op", "ver")

    def __init__(self, tape: Tape, slot: int, op: str, ver: int = 0):
        self.tape, self.slot, self.op, self.ver = tape, slot, op, ver

    def name(self) -> str:
        """torch's spelling: MatmulBackward0 for a matmul, ReluBackward0 for nn.relu."""
        base = self.op.split(".")[-1]
        return "".join(w.capitalize() for w in base.split("_")) + "Backward0"

    def __repr__(self) -> str:
        return f"<{self.name()} object>"

    def __deepcopy__(self, memo):
        raise RuntimeError("Only Tensors created explicitly by the user (graph leaves) support the deepcopy protocol "
                           "at the moment; detach() the tensor first")


class Tape:
    """One recorded forward program: per slot, its part (structure), var, binding (None for a parameter:
    a leaf or an input), eager value and the value's buffer version at recording."""

    def __init__(self):
        # with detect_anomaly on, each binding records the user's line its message names (a frame walk per op)
        self.builder = Builder(locate=user_source if _anomaly.enabled else None)
        self.parts: list[tuple] = []
        self.vars: list[Var] = []
        self.bindings: list = []
        self.values: list = []
        self.versions: list[int] = []
        self.leaves: dict[int, object] = {}  # slot -> the leaf Tensor (kept alive: gradients go there)
        self.leaf_slot: dict[int, int] = {}  # id(leaf Tensor) -> its slot
        self.input_slot: dict[int, int] = {}  # id(array) of a tensor that does not require grad -> its slot
        self.retained: dict[int, weakref.ref] = {}  # slot -> a non-leaf whose .grad is kept (retain_grad)
        self.freed: set[int] = set()  # binding slots a backward without retain_graph has released
        self.into: Tape | None = None  # merged into that tape, at self.offset
        self.offset = 0
        # (parts, slots read) of the last backward: while this tape records the same parts, values that
        # backward never read are not kept (None); a backward that needs one after all recomputes it
        self.hint = _hint

    def _follows_hint(self, slot: int, part) -> bool:
        hint = self.hint
        if slot < len(hint[0]) and hint[0][slot] == part:
            return True
        self.hint = None
        return False

    def restore(self, slots) -> None:
        """Recompute now the values of `slots` (and of the values they are made from) that the hint let go: the
        tape left the last backward's program, and an op off it reads them, so its backward may need them; their
        sources still hold the values they were computed from (a leaf or input written in place later, by an
        optimizer step before backward, would otherwise make that backward raise where torch's does not)."""
        values, bindings, parts, freed = self.values, self.bindings, self.parts, self.freed
        need, stack = set(), [s for s in slots if values[s] is None]
        while stack:
            s = stack.pop()
            if s in need or values[s] is not None or bindings[s] is None or s in freed:
                continue
            need.add(s)
            part = parts[s]
            stack.extend([part[2]] if part[0] == "item" else part[2])
        if not need:
            return
        from .tensor import Tensor, apply

        where = {id(v): i for i, v in enumerate(self.vars)}
        with no_grad():
            for s in sorted(need):
                part = parts[s]
                if part[0] == "item":
                    whole = values[part[2]]
                    if whole is None:
                        continue
                    values[s] = whole[part[1]]
                else:
                    call = bindings[s].value
                    args = call.args[0].fields if len(call.args) == 1 and isinstance(call.args[0], Tuple) else None
                    at = [where.get(id(a)) for a in (args if args is not None else call.args)]
                    if None in at or any(values[i] is None for i in at):
                        continue  # left to the backward, which recomputes what it needs
                    ins = [Tensor.wrap(values[i]) for i in at]
                    out = apply(call.op, [ins] if args is not None else ins, **call.attrs)
                    values[s] = tuple(o._data for o in out) if type(out) is tuple else out._data
                v = values[s]
                self.versions[s] = 0 if type(v) is tuple or v.base is None else version(v)

    def _param(self, part, var: Var, value) -> int:
        slot = len(self.vars)
        if self.hint is not None:
            self._follows_hint(slot, part)
        self.parts.append(part)
        self.vars.append(var)
        self.bindings.append(None)
        self.values.append(value)
        self.versions.append(version(value))
        return slot

    def slot_of(self, t) -> int:
        ag = t._ag
        if ag is None:
            data = t._data
            slot = self.input_slot.get(id(data))
            if slot is None:
                var = Var("x", _type(data))
                slot = self.input_slot[id(data)] = self._param(("input", data.shape, data.dtype), var, data)
            return slot
        if ag is LEAF:
            slot = self.leaf_slot.get(id(t))
            if slot is None:
                data = t._data
                var = Var(_var_name(t._name), _type(data))
                slot = self.leaf_slot[id(t)] = self._param(("leaf", data.shape, data.dtype), var, data)
                self.leaves[slot] = t
            return slot
        return resolve(ag)[1]

    def bound(self, var: Var, part, value) -> int:
        """Give the binding just emitted (defining var) its slot, with its part and eager value."""
        slot = len(self.vars)
        if self.hint is not None and self._follows_hint(slot, part) and slot not in self.hint[1]:
            value = None  # the backward compiled for this program does not read it: not kept
        self.parts.append(part)
        self.vars.append(var)
        self.bindings.append(self.builder.bindings[-1])
        self.values.append(value)
        # a buffer the kernel just made has no version yet: only views of older buffers are looked up
        self.versions.append(0 if value is None or type(value) is not tuple and value.base is None else version(value))
        return slot


_hint: tuple | None = None


def set_hint(parts: tuple, read: frozenset) -> None:
    """After a backward: the program it ran (its parts) and the slots it read, for the next tapes to follow."""
    global _hint
    _hint = (parts, read)


_TYPES: dict[tuple, TensorType] = {}
_NAMES: dict[str, str] = {}


def _var_name(name: str) -> str:
    """A leaf's IR name from its tensor's (a parameter's dotted name): fc1.weight -> fc1_weight."""
    hit = _NAMES.get(name)
    if hit is None:
        hit = "".join(c if c.isalnum() or c == "_" else "_" for c in (name or "w"))
        hit = _NAMES[name] = hit if hit[0].isalpha() else "w_" + hit
        if len(_NAMES) > 4096:
            _NAMES.clear()
    return hit


def _type(array) -> TensorType:
    """The TensorType of an array, made once per shape and dtype."""
    key = (array.shape, array.dtype)
    t = _TYPES.get(key)
    if t is None:
        if len(_TYPES) > 4096:
            _TYPES.clear()
        t = _TYPES[key] = TensorType(array.shape, dtype_name(array.dtype))
    return t


def resolve(node: Node) -> tuple[Tape, int]:
    """The live tape and slot of a node (following merges, and shortening the path for next time)."""
    tape = node.tape
    if tape.into is not None:
        slot = node.slot
        while tape.into is not None:
            slot += tape.offset
            tape = tape.into
        node.tape, node.slot = tape, slot
    return node.tape, node.slot


def _shifted(part: tuple, off: int) -> tuple:
    kind = part[0]
    if kind == "leaf" or kind == "input":
        return part
    if kind == "item":
        return (kind, part[1], part[2] + off)
    return (kind, part[1], tuple([s + off for s in part[2]]))


def merge(a: Tape, b: Tape) -> Tape:
    """One tape holding both programs (the smaller appended to the larger); returns it."""
    if len(b.vars) > len(a.vars):
        a, b = b, a
    off = len(a.vars)
    a.parts.extend([_shifted(p, off) for p in b.parts])
    a.vars += b.vars
    a.bindings += b.bindings
    a.builder.bindings += b.builder.bindings
    a.values += b.values
    a.versions += b.versions
    for s, t in b.leaves.items():
        a.leaves[s + off] = t
    for table, other in ((a.leaf_slot, b.leaf_slot), (a.input_slot, b.input_slot)):
        for k, s in other.items():
            table.setdefault(k, s + off)
    a.retained.update({s + off: r for s, r in b.retained.items()})
    a.freed.update(s + off for s in b.freed)
    # the merged slots follow the last backward's program if it began the same way (a forward that starts
    # two tapes, token and position embeddings, merges them alike every step)
    hint = _hint
    n = len(a.parts)
    a.hint = hint if hint is not None and len(hint[0]) >= n and hint[0][:n] == tuple(a.parts) else None
    b.into, b.offset = a, off
    b.__dict__.update(parts=[], vars=[], bindings=[], values=[], versions=[], leaves={}, leaf_slot={},
                      input_slot={}, retained={}, freed=set(), builder=None)
    return a


def _records(t) -> bool:
    if isinstance(t, TensorType):
        return t.is_float
    return any(_records(f) for f in t.fields)


def record(op_name: str, attrs: dict, type_, attrs_key_, inputs, result, tuple_input: bool) -> None:
    """Append the eager op that made `result` from `inputs` (some of which require grad) to their tape:
    `attrs` are its normalized attributes, `type_` its result type, `attrs_key_` the attributes' hashable key."""
    if not (type_.is_float if type(type_) is TensorType else _records(type_)):
        return  # integer and boolean results never require grad, as in torch
    tape = None
    for t in inputs:
        ag = t._ag
        if ag is not None and ag is not LEAF:
            other = ag.tape if ag.tape.into is None else resolve(ag)[0]
            tape = other if tape is None or other is tape else merge(tape, other)
    if tape is None:
        tape = Tape()
    slots, args, vars_ = [], [], tape.vars
    for t in inputs:
        ag = t._ag
        if _VERSIONS and type(ag) is Node and version(t._data) != ag.ver:
            stale(t)
        s = ag.slot if ag is not None and ag is not LEAF and ag.tape is tape else tape.slot_of(t)
        slots.append(s)
        args.append(vars_[s])
    var = tape.builder.emit(Call(op_name, (Tuple(args),) if tuple_input else tuple(args), dict(attrs), type_))
    part = (op_name, attrs_key_, tuple(slots))
    if type(result) is tuple:
        slot = tape.bound(var, part, tuple(r._data for r in result))
        for i, r in enumerate(result):
            item = tape.bound(tape.builder.get_item(var, i), ("item", i, slot), r._data)
            if _records(type_.fields[i]):
                r._ag = Node(tape, item, op_name, version(r._data) if _VERSIONS else 0)
    else:
        result._ag = Node(tape, tape.bound(var, part, result._data), op_name,
                          version(result._data) if _VERSIONS else 0)
    if tape.hint is None:
        values = tape.values
        for s in slots:
            if values[s] is None:  # off the last backward's program, reading a value it let go (Tape.restore)
                tape.restore(slots)
                break


def stale(t) -> None:
    """t's buffer was written in place through another tensor (a view of t, or the tensor t is a view of) after t
    was recorded: its recorded history no longer makes its values, so reading it would differentiate the old
    ones (torch rebases the view; tracegrad raises)."""
    raise RuntimeError(
        f"a recorded tensor ({dtype_name(t._data.dtype)} {tuple(t._data.shape)}, from {t._ag.name()}) is read after "
        "an in-place write into its memory through a view of it (or through the tensor it is a view of): torch "
        "rebases the view's graph, tracegrad cannot, and would differentiate the values before the write. "
        "Write through the tensor itself (h[1:3] = v, not v = h[1:3]; v[:] = ...), or clone() the view first.")


def check_inplace(t, value) -> None:
    """An in-place op on a leaf that requires grad, whose new value depends on another tensor that requires grad,
    raises torch's error: the leaf would have to become a recorded result. One that reads only the leaf itself
    (and tensors that do not require grad: `w -= lr * g`, `w.copy_(array)`) updates the leaf untracked, as
    under no_grad, where torch raises; the buffer's version moves on, so a recorded backward that still needs
    the old values raises instead of reading the new ones (docs/design.md)."""
    if t._ag is not LEAF or not grad_mode.enabled or not isinstance(value._ag, Node):
        return
    tape, slot = resolve(value._ag)
    seen, stack = set(), [slot]
    while stack:
        s = stack.pop()
        if s in seen:
            continue
        seen.add(s)
        part = tape.parts[s]
        if part[0] == "leaf" and tape.leaves[s] is not t:
            raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
        stack.extend([part[2]] if part[0] == "item" else part[2] if part[0] not in ("leaf", "input") else [])


def wrote(t, value) -> None:
    """After an eager in-place op wrote `value` (its out-of-place result) into t's buffer: the buffer's version
    moves on (a backward that needs its old values raises), and t is now the recorded result, as in torch."""
    if grad_mode.enabled and type(t._ag) is Node and value is not None and value._ag is None:
        # overwritten by values that do not require grad (zero_, fill_, copy_ of a constant, h[...] = c): t's old
        # history no longer makes any of its values, so its gradient is zero from here on, as torch's
        value = _severed(t, value)
    bump(t._data)
    if value is not None and value._ag is not None and grad_mode.enabled and t._ag is not LEAF:
        ag = value._ag
        t._ag = Node(ag.tape, ag.slot, ag.op, version(t._data)) if type(ag) is Node else ag
    elif type(t._ag) is Node:  # written untracked (no_grad) or with a value that does not require grad
        ag = t._ag
        t._ag = Node(ag.tape, ag.slot, ag.op, version(t._data))


def _severed(t, value):
    """value, recorded as a function of t that passes it no gradient: where(False, t, value)."""
    from .math import where
    from .tensor import Tensor, array_module_of

    never = Tensor.wrap(array_module_of(t._data).zeros(t._data.shape, dtype=bool))
    return where(never, t, value)


def wants_record(target, value) -> bool:
    """Whether an eager `target[key] = value` must be recorded: target is a recorded result, or value requires
    grad (a leaf target then raises torch's error, see check_inplace)."""
    return grad_mode.enabled and (isinstance(target._ag, Node) or getattr(value, "_ag", None) is not None)


# ---------------------------------------------------------------- the backward implementation (autodiff)

_backend = None


def register(backend) -> None:
    """autodiff installs the backward pass here (tracer does not import autodiff)."""
    global _backend
    _backend = backend


def _impl():
    if _backend is None:
        raise RuntimeError("backward() and autograd.grad() need tracegrad's autodiff package: import autodiff "
                           "(or nn, which imports it) first")
    return _backend


_after_backward: list = []  # callables run after each backward() (nn's module backward hooks continue there)


def add_after_backward(fn) -> None:
    """Call fn(retain_graph, create_graph) after every backward(): nn.hooks runs module backward hooks there."""
    _after_backward.append(fn)


def after_backward(retain_graph, create_graph) -> None:
    for fn in _after_backward:
        fn(retain_graph, create_graph)


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph: bool = False, inputs=None) -> None:
    """torch.autograd.backward: accumulate d(sum of tensors . grad_tensors)/d(leaf) into each leaf's .grad."""
    _impl().backward(tensors, grad_tensors, retain_graph, create_graph, inputs)
    after_backward(retain_graph, create_graph)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph: bool = False,
         allow_unused: bool = False, materialize_grads: bool = False):
    """torch.autograd.grad: the gradients of outputs with respect to inputs, as a tuple (no .grad is written)."""
    return _impl().grad(outputs, inputs, grad_outputs, retain_graph, create_graph, allow_unused, materialize_grads)


__all__ = ["Node", "Tape", "backward", "enable_grad", "grad", "inference_mode", "is_grad_enabled", "no_grad",
           "set_grad_enabled"]
