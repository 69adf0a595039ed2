"""Autograd on eager tensors, as torch's: grad mode, the tape that eager ops on requires-grad tensors
append to, version counters, and the Tensor attributes (`.grad`, `.requires_grad`, `.backward()`, ...).

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

import contextlib
import functools
import threading
import weakref

import numpy as np

from ir import Builder, Call, TensorType, Tuple, Var
from ir.executor import buffer_owner

from .tensor import Tensor, TraceError, dtype_name

# ---------------------------------------------------------------- grad mode


class _Mode(threading.local):
    def __init__(self):
        self.enabled = True


grad_mode = _Mode()


def is_grad_enabled() -> bool:
    """True unless inside no_grad() / inference_mode() / set_grad_enabled(False)."""
    return grad_mode.enabled


class _GradMode(contextlib.ContextDecorator):
    """A context manager and decorator that sets grad mode while it is active (and restores it after)."""

    _enable = True

    def __new__(cls, *args, **kwargs):
        if cls is not set_grad_enabled and len(args) == 1 and callable(args[0]) and not kwargs:
            return cls()(args[0])  # `@no_grad` without parentheses, as torch allows
        return super().__new__(cls)

    def __init__(self):
        self._prev: list[bool] = []

    def __enter__(self):
        self._prev.append(grad_mode.enabled)
        grad_mode.enabled = self._enable
        return self

    def __exit__(self, *exc):
        grad_mode.enabled = self._prev.pop()
        return False


class no_grad(_GradMode):
    """Ops run eagerly without being recorded: results do not require grad (torch.no_grad)."""

    _enable = False


class enable_grad(_GradMode):
    """Recording on, also inside no_grad (torch.enable_grad)."""


class inference_mode(_GradMode):
    """As no_grad (torch.inference_mode); `inference_mode(False)` changes nothing."""

    def __init__(self, mode: bool = True):
        super().__init__()
        self._mode = bool(mode)

    def __enter__(self):
        self._prev.append(grad_mode.enabled)
        if self._mode:
            grad_mode.enabled = False
        return self


class set_grad_enabled(_GradMode):
    """`set_grad_enabled(False)` switches recording off at once (as a call), until the `with` block it opens
    ends; as a decorator, for the calls of the function only (torch.set_grad_enabled)."""

    def __init__(self, mode: bool):
        super().__init__()
        self._mode = bool(mode)
        self._prev.append(grad_mode.enabled)
        grad_mode.enabled = self._mode

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self._prev:
            grad_mode.enabled = self._prev.pop()
        return False

    def __call__(self, fn):
        if self._prev:  # a decorator: undo the switch the construction made, apply it per call
            grad_mode.enabled = self._prev.pop()
        mode = self._mode

        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            with set_grad_enabled(mode):
                return fn(*args, **kwargs)
        return wrapped


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
    """The `grad_fn` of a recorded result: the op that made it, its tape and slot."""

    __slots__ = ("tape", "slot", "op")

    def __init__(self, tape: Tape, slot: int, op: str):
        self.tape, self.slot, self.op = tape, slot, op

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
        self.builder = Builder()
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

    def _param(self, part, var: Var, value) -> int:
        slot = len(self.vars)
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
        self.parts.append(part)
        self.vars.append(var)
        self.bindings.append(self.builder.bindings[-1])
        self.values.append(value)
        # a buffer the kernel just made has no version yet: only views of older buffers are looked up
        self.versions.append(0 if type(value) is not tuple and value.base is None else version(value))
        return slot


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
                r._ag = Node(tape, item, op_name)
        return
    result._ag = Node(tape, tape.bound(var, part, result._data), op_name)


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
    bump(t._data)
    if value is not None and value._ag is not None and grad_mode.enabled and t._ag is not LEAF:
        t._ag = value._ag


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


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph: bool = False, inputs=None) -> None:
    """torch.autograd.backward: accumulate d(sum of tensors . grad_tensors)/d(leaf) into each leaf's .grad."""
    _impl().backward(tensors, grad_tensors, retain_graph, create_graph, inputs)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph: bool = False,
         allow_unused: bool = False, materialize_grads: bool = False):
    """torch.autograd.grad: the gradients of outputs with respect to inputs, as a tuple (no .grad is written)."""
    return _impl().grad(outputs, inputs, grad_outputs, retain_graph, create_graph, allow_unused, materialize_grads)


# ---------------------------------------------------------------- Tensor attributes


def _concrete_float(t, what: str) -> None:
    if t._var is not None:
        raise TraceError(f"{what} of a traced value: inside a trace, gradients come from autodiff.grad / "
                         "value_and_grad, which differentiate the whole traced function")
    if np.dtype(t._data.dtype).kind != "f":
        raise RuntimeError("only Tensors of floating point and complex dtype can require gradients")


def _get_requires_grad(self) -> bool:
    return self._ag is not None


def _set_requires_grad(self, value) -> None:
    value = bool(value)
    if isinstance(self._ag, Node):
        if not value:
            raise RuntimeError("you can only change requires_grad flags of leaf variables. If you want to use a "
                               "computed variable in a subgraph that doesn't require differentiation use "
                               "var_no_grad = var.detach().")
        return
    if value:
        _concrete_float(self, "requires_grad")
    self._ag = LEAF if value else None


def made(t, requires_grad: bool):
    """A constructor's result, a leaf that requires grad when asked (`zeros(3, requires_grad=True)`); inside a
    trace the flag changes nothing (the trace records every op)."""
    if requires_grad and t._var is None:
        _set_requires_grad(t, True)
    return t


def requires_grad_(self, requires_grad: bool = True):
    """Make this leaf require grad (or stop, with False); returns self, as torch's."""
    _set_requires_grad(self, requires_grad)
    return self


def _get_grad(self):
    return self._grad


def _set_grad(self, value) -> None:
    if value is not None:
        if not isinstance(value, Tensor):
            raise TypeError(f"assigned grad expected to be a Tensor or None but got grad of type "
                            f"{type(value).__name__}")
        if value.shape != self.shape:
            raise RuntimeError(f"assigned grad has data of a different size: {value.shape} for a tensor of "
                               f"shape {self.shape}")
        if value.dtype != self.dtype:
            raise RuntimeError(f"assigned grad has data of a different type: {value.dtype} for a {self.dtype} "
                               "tensor")
    self._grad = value


def _is_leaf(self) -> bool:
    return not isinstance(self._ag, Node)


def _grad_fn(self):
    return self._ag if isinstance(self._ag, Node) else None


def retain_grad(self) -> None:
    """Keep .grad on this non-leaf after backward (leaves keep theirs anyway)."""
    if self._ag is None:
        raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
    if isinstance(self._ag, Node):
        tape, slot = resolve(self._ag)
        tape.retained[slot] = weakref.ref(self)


def _retains_grad(self) -> bool:
    if not isinstance(self._ag, Node):
        return False
    tape, slot = resolve(self._ag)
    ref = tape.retained.get(slot)
    return ref is not None and ref() is self


def tensor_backward(self, gradient=None, retain_graph=None, create_graph: bool = False, inputs=None) -> None:
    """Accumulate d(self)/d(leaf) (times `gradient`, needed when self is not a scalar) into every leaf's .grad.

    >>> import tracer, autodiff
    >>> w = tracer.tensor([1.0, 2.0], requires_grad=True)
    >>> (w * w).sum().backward()
    >>> w.grad.tolist()
    [2.0, 4.0]
    """
    _impl().backward([self], None if gradient is None else [gradient], retain_graph, create_graph, inputs)


def _data(self):
    """The same values, untracked (shares the buffer); `p.data = t` replaces p's values, as torch's."""
    if self._var is not None:
        return self
    return Tensor.wrap(self._data)


def _set_data(self, value) -> None:
    if not isinstance(value, Tensor) or value._data is None:
        raise TypeError(f"data must be set to a concrete Tensor, got {type(value).__name__}")
    self._data = value._data


PROPERTIES = {
    "requires_grad": property(_get_requires_grad, _set_requires_grad, doc="Whether ops on it are recorded."),
    "grad": property(_get_grad, _set_grad, doc="The gradient backward() accumulated (None until then)."),
    "is_leaf": property(_is_leaf, doc="False for the result of a recorded op, as torch's."),
    "grad_fn": property(_grad_fn, doc="The recorded op that made this tensor (None for leaves)."),
    "retains_grad": property(_retains_grad, doc="Whether retain_grad() was called on this non-leaf."),
    "data": property(_data, _set_data, doc="The values as an untracked tensor sharing the buffer."),
}

METHODS = {"requires_grad_": requires_grad_, "retain_grad": retain_grad, "backward": tensor_backward}

__all__ = ["Node", "Tape", "backward", "enable_grad", "grad", "inference_mode", "is_grad_enabled", "no_grad",
           "set_grad_enabled"]
