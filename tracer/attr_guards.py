"""The guards of the module attributes a trace read: a flat list of dict lookups checked before each replay.

Routes (tracer.capture) reach captured tensors; a trace also reads objects that hold none. nn.Module
reports each attribute read during a trace and each write; `attribute_guards` turns one trace's record into
an `AttributeGuards`, which the compiled step's glue (autodiff.glue) emits as straight-line checks.
"""
from __future__ import annotations

import types
import weakref

from .capture import Lines, _step, size_now
from .tensor import Tensor

# Routes reach captured tensors; a trace also reads objects that hold none: a submodule without parameters
# (an activation, a Dropout), a Python value on a module (Dropout's p, LayerNorm's eps, `self.scale = 0.5`),
# a method. nn.Module reports each attribute read during a trace (note_read) and each write (note_write);
# the trace turns them into one AttributeGuards, a flat list of dict lookups checked before each replay.

class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "<missing>"


MISSING = _Missing()  # an attribute that was not there
_EQ, _IS, _SNAP, _TENSOR, _WEAK = 0, 1, 2, 3, 4  # by value, by identity, a container's items, a tensor's
# type, by identity through a weak reference (a submodule: the guard must not keep the old one alive)
_SNAP_MAX = 256  # larger lists and dicts read from a module are guarded by identity alone
_VALUE_TYPES = frozenset((int, float, complex, str, bytes, bool, type(None)))


def _is_value(v) -> bool:
    """A value compared by equality: a number, string, None, or a small tuple/frozenset of such."""
    t = type(v)
    if t in _VALUE_TYPES:
        return True
    if t is tuple or t is frozenset:
        return len(v) <= _SNAP_MAX and all(_is_value(e) for e in v)
    return False


def _snapshot(c) -> tuple:
    return tuple(c) if type(c) is list else tuple(c.items())


def _same(a, b) -> bool:
    """One item of a container read from a module, then and now: the same object, or an equal value.
    Tensors compare equal: a captured one is checked (and fed) through its route, like any other."""
    if a is b:
        return True
    if isinstance(a, Tensor) and isinstance(b, Tensor):
        return True
    return type(a) is type(b) and _is_value(a) and a == b


def _same_items(c, snap: tuple) -> bool:
    if type(c) is list:
        return len(c) == len(snap) and all(map(_same, c, snap))
    if len(c) != len(snap):
        return False
    return all(k == k0 and _same(v, v0) for (k, v), (k0, v0) in zip(c.items(), snap, strict=True))


def class_value(cls, name: str):
    """What `cls.name` is (a classmethod as its function, which is new per lookup), or MISSING."""
    try:
        v = getattr(cls, name)
    except AttributeError:
        return MISSING
    return v.__func__ if type(v) is types.MethodType else v


def _value_guard(name: str, value):
    """(name, mode, expected) for an instance attribute holding value; None when nothing is to check."""
    if _is_value(value):
        return name, _EQ, value
    t = type(value)
    if (t is list or t is dict) and len(value) <= _SNAP_MAX:
        return name, _SNAP, (value, _snapshot(value))
    if isinstance(value, Tensor):
        if value._var is not None:
            return None  # a value of the trace itself (written in forward)
        return name, _TENSOR, (weakref.ref(value), type(value._data), value._data.shape, value._data.dtype)
    if value is MISSING:
        return name, _IS, value
    try:
        return name, _WEAK, weakref.ref(value)
    except TypeError:
        return name, _IS, value


class _Record:
    """What one trace read from module attributes and wrote to them (see TraceContext)."""

    __slots__ = ("objects", "classes", "writes")

    def __init__(self):
        self.objects: dict[int, tuple] = {}  # id -> (weakref, class, {name: (name, mode, expected) | None})
        self.classes: dict[tuple, object] = {}  # (class, name) -> class_value then
        self.writes: dict[tuple[int, str], tuple] = {}  # (id, name) -> (object, name, value before, restore)

    def entry(self, obj):
        hit = self.objects.get(id(obj))
        if hit is None or hit[0]() is not obj:
            hit = self.objects[id(obj)] = (weakref.ref(obj), type(obj), {})
        return hit[2]

    def read(self, obj, name: str, value) -> None:
        hit = self.objects.get(id(obj))
        if hit is not None and name in hit[2] and hit[0]() is obj:
            return  # read before: the first read is what the guard checks
        names = self.entry(obj)
        cls = type(obj)
        raw = self.classes.get((cls, name), MISSING)
        if raw is MISSING:
            raw = class_value(cls, name)
            if raw is not MISSING:
                self.classes[(cls, name)] = raw
        if raw is not MISSING and hasattr(type(raw), "__set__"):
            names[name] = None  # a property: the attributes its getter reads are recorded themselves
            return
        names[name] = _value_guard(name, value if name in object.__getattribute__(obj, "__dict__") else MISSING)

    def written(self, obj, name: str) -> None:
        """After the trace: the attribute's value then is what a replay must find (an eager call would
        assign it again; a different value traces again, which assigns it)."""
        names = self.entry(obj)
        guard = _value_guard(name, object.__getattribute__(obj, "__dict__").get(name, MISSING))
        key = name if name not in names else (name, "written")
        names[key] = guard


class AttributeGuards:
    """The attributes (and classes) a trace read, as they were: calling it says whether they still are.

    Each module read is held weakly and must keep its class; each attribute read must hold the same object
    (submodules, functions, arrays), an equal value (numbers, strings, None, tuples of them), a list or dict
    with the same items, a tensor of the same type, shape and dtype, or still be missing. A class attribute
    read (a method, a class-level constant) must be the same object on the class.

    The checks are generated once as straight-line Python (one dict lookup and an `is` or `==` each), as
    torch.compile builds its guard functions: no loop or dispatch per check on the hot path.
    """

    __slots__ = ("objects", "classes", "size", "check", "source")

    def __init__(self, objects: list[tuple], classes: list[tuple]):
        self.objects, self.classes = objects, classes
        self.size = sum(len(items) for _, _, items in objects) + len(classes)
        self.source, namespace = _guard_source(objects, classes)
        exec(compile(self.source, "<attribute guards>", "exec"), namespace)  # noqa: S102 - our own text
        self.check = namespace["check"]

    def __call__(self) -> bool:
        return self.check()

    def emit(self, lines: Lines) -> None:
        """These checks inlined into another generated function (`lines`' failure when one fails)."""
        emit_attribute_checks(lines, self.objects, self.classes)

    def __repr__(self) -> str:
        return f"AttributeGuards({self.size} checks)"


GUARD_NAMES = {"M": MISSING, "Tensor": Tensor, "same_items": _same_items, "class_value": class_value,
               "size_now": size_now, "step": _step}  # the names generated checks read


def _guard_source(objects: list[tuple], classes: list[tuple]) -> tuple[str, dict]:
    """The text of `check()` and the constants it names."""
    lines = Lines(dict(GUARD_NAMES))
    emit_attribute_checks(lines, objects, classes)
    text = ["def check():", "    try:", *lines.lines,
            "    except Exception:  # an attribute that cannot be compared any more: trace again",
            "        return False", "    return True"]
    return "\n".join(text) + "\n", lines.ns


def emit_attribute_checks(lines: Lines, objects: list[tuple], classes: list[tuple]) -> None:
    """The checks of AttributeGuards(objects, classes) appended to `lines` (locals o, d, v, a)."""
    const, fail = lines.const, lines.fail
    for ref, cls, items in objects:
        fail(f"(o := {const(ref)}()) is None or type(o) is not {const(cls)}")
        lines.line("d = o.__dict__")
        for name, mode, expect in items:
            key = repr(name)
            if mode == _IS:
                fail(f"{key} in d" if expect is MISSING else f"d.get({key}, M) is not {const(expect)}")
            elif mode == _WEAK:
                fail(f"d.get({key}, M) is not {const(expect)}()")
            elif mode == _EQ:
                e = const(expect)
                fail(f"(v := d.get({key}, M)) is not {e} and not (type(v) is type({e}) and v == {e})")
            elif mode == _SNAP:
                fail(f"(v := d.get({key}, M)) is not {const(expect[0])} or not same_items(v, {const(expect[1])})")
            else:  # _TENSOR
                _, kind, shape, dtype = expect
                fail(f"not (isinstance(v := d.get({key}, M), Tensor) and v._var is None and type(a := v._data) is "
                     f"{const(kind)} and a.shape == {const(shape)} and a.dtype == {const(dtype)})")
    for cls, name, raw in classes:
        c, r = const(cls), const(raw)
        fail(f"getattr({c}, {name!r}, M) is not {r} and class_value({c}, {name!r}) is not {r}")



def attribute_guards(record: _Record, captured: dict[int, object]) -> AttributeGuards | None:
    """The guards of a finished trace: modules that died during it (temporaries, `seq[1:]`) are dropped, and
    tensors that were captured are left to their routes."""
    objects = []
    for ref, cls, names in record.objects.values():
        if ref() is None:
            continue
        items = []
        for guard in names.values():
            if guard is None:
                continue
            if guard[1] == _TENSOR:
                t = guard[2][0]()
                if t is None or id(t) in captured:
                    continue
                guard = (guard[0], _TENSOR, (None, *guard[2][1:]))
            items.append(guard)
        if items:
            objects.append((ref, cls, tuple(items)))
    classes = [(cls, name, raw) for (cls, name), raw in record.classes.items()]
    if not objects and not classes:
        return None
    return AttributeGuards(objects, classes)
