"""Where a traced function found the tensors it captured, so that each call reads the current ones.

A compiled step must compute with the tensors the user's Python holds now, not with those it held when
the step was traced. After a trace, `locate` searches the objects the function can reach (its closure
cells, the globals its code names, defaults, `self` of a bound method, the attributes of objects and
modules, list, tuple and dict items, the globals of methods those objects' classes define) for every
captured tensor, and records each path to it. Before each call, `Sources.resolve` walks the paths again:

- a path's intermediate objects (the model, its submodules, the list of layers, the closure's dict) must
  be the very objects seen at trace time, and containers must keep their length: a new object there may
  compute something else, so the step retraces;
- at the end of every path there must be a concrete tensor of the traced shape, dtype and array type;
  a new tensor object there is simply fed to the compiled step (`m.weight = nn.Parameter(...)`,
  `w = w - lr * g` on a global or closure variable);
- every path to one captured tensor must reach the same object (aliases that diverged retrace).

A tensor found by no path (reached through a C extension, say) cannot be re-read: `locate` reports it
and the caller retraces on every call instead, which is slower but never stale.
"""
from __future__ import annotations

import functools
import operator
import types
import weakref
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from .tensor import Tensor

_MAX_EXPANSIONS = 20_000  # objects expanded during one search
_MAX_DEPTH = 12
_PATHS_PER_OBJECT = 4  # routes searched through one object (aliases); further routes are identity-checked only
_MAX_CONTAINER = 4096  # larger lists, tuples and dicts are data, not searched
_ATOMS = (str, bytes, int, float, complex, bool, type(None), np.ndarray, np.generic, type, range, slice)
_LIBRARY_MODULES = ("tracer", "ir", "autodiff", "nn", "numpy", "builtins", "functools", "typing", "abc")


def code_names(code: types.CodeType) -> set[str]:
    """The global and attribute names a code object (and the code nested in it) reads."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= code_names(const)
    return names


def _step(obj, kind: str, key):
    """One step of a path; raises (LookupError, AttributeError, TypeError, ValueError) when it is gone."""
    if kind == "attr":
        return obj.__dict__[key]
    if kind == "item":
        return obj[key]
    if kind == "cell":
        return obj.__closure__[key].cell_contents
    if kind == "global":
        return obj.__globals__[key]
    if kind == "default":
        return obj.__defaults__[key]
    if kind == "kwdefault":
        return obj.__kwdefaults__[key]
    if kind == "self":
        return obj.__self__
    if kind == "func":
        return obj.__func__ if isinstance(obj, types.MethodType) else obj.func
    if kind == "partial_arg":
        return obj.args[key]
    if kind == "partial_kw":
        return obj.keywords[key]
    if kind == "method":  # a class attribute: a tensor, or a function whose globals may hold one
        return getattr(type(obj), key)
    if kind == "modattr":
        return obj.__globals__[key[0]].__dict__[key[1]]
    raise AssertionError(kind)


def _children(obj):
    """(kind, key, child) for each object `obj` holds that may lead to a tensor."""
    if isinstance(obj, types.FunctionType):
        for i, cell in enumerate(obj.__closure__ or ()):
            try:
                yield "cell", i, cell.cell_contents
            except ValueError:  # an empty cell (a name assigned later)
                continue
        glob = obj.__globals__
        names = code_names(obj.__code__)
        for name in sorted(names):
            if name not in glob:
                continue
            value = glob[name]
            if isinstance(value, types.ModuleType) and value.__name__.split(".")[0] not in _LIBRARY_MODULES:
                # `helpers.W` or `helpers.apply(x)`: the module's attributes that this code names
                for attr in sorted(names & value.__dict__.keys()):
                    yield "modattr", (name, attr), value.__dict__[attr]
            else:
                yield "global", name, value
        for i, d in enumerate(obj.__defaults__ or ()):
            yield "default", i, d
        for k, d in (obj.__kwdefaults__ or {}).items():
            yield "kwdefault", k, d
        return
    if isinstance(obj, types.MethodType):
        yield "self", None, obj.__self__
        yield "func", None, obj.__func__
        return
    if isinstance(obj, functools.partial):
        yield "func", None, obj.func
        for i, a in enumerate(obj.args):
            yield "partial_arg", i, a
        for k, a in obj.keywords.items():
            yield "partial_kw", k, a
        return
    if isinstance(obj, (list, tuple, dict)) and len(obj) > _MAX_CONTAINER:
        return  # a data set, not where weights live: its tensors are not searched (see the module doc)
    if isinstance(obj, (list, tuple)):
        for i, item in enumerate(obj):
            yield "item", i, item
        return
    if isinstance(obj, dict):
        for k, item in list(obj.items()):
            if isinstance(k, (str, int)) and not isinstance(k, bool):
                yield "item", k, item
        return
    if isinstance(obj, types.ModuleType):
        return  # a module's tensors are found through the globals of the functions that name them
    attrs = getattr(obj, "__dict__", None)
    if isinstance(attrs, dict):
        mirrors = getattr(type(obj), "_capture_mirrors", ())  # registries whose entries are attributes too
        for k, item in list(attrs.items()):
            if isinstance(k, str) and k not in mirrors:
                yield "attr", k, item
        for name in _class_attributes(type(obj)):
            if name not in attrs:
                try:
                    yield "method", name, getattr(type(obj), name)
                except AttributeError:  # a descriptor that only works on instances (an Enum's member names)
                    continue


@functools.lru_cache(maxsize=512)
def _class_attributes(cls) -> tuple[str, ...]:
    """The methods and plain attributes that user classes in cls's MRO define (not tracegrad's own)."""
    names: list[str] = []
    for klass in cls.__mro__:
        if klass.__module__.split(".")[0] in _LIBRARY_MODULES:
            continue
        names += [n for n, v in vars(klass).items() if n not in names and not (n.startswith("__") and n.endswith("__"))
                  and not isinstance(v, (property, staticmethod, classmethod))]
    return tuple(names)


@dataclass
class _Node:
    """One step of one or more paths. `expect` is the object found there at trace time (guarded by
    identity) for intermediate steps; leaves list the captured tensors they feed."""

    kind: str
    key: object
    expect: object = None
    size: object = None  # what must not change about the object: see _size
    children: list[_Node] = field(default_factory=list)
    feeds: list[int] = field(default_factory=list)
    guard_only: bool = False  # a further route to an object searched through another: checked, not searched
    guard_routes: list[_Node] = field(default_factory=list)


@dataclass
class Sources:
    """The paths to each captured tensor, from the traced function and its non-tensor arguments, flattened
    into one list of steps in depth-first order: (parent slot, getter, expected object, expected length,
    captured indices fed). Slot 0 is the function, slot 1 + i its i-th argument; step j fills slot
    2 + len(args) + j."""

    program: list[tuple]
    types: list[tuple]  # per captured tensor: (shape, dtype, array type) it must keep
    missing: list[int]  # captured tensors no path reaches
    n_args: int
    root_sizes: list[tuple[int, object]]  # (slot, _size) of the function and the arguments searched
    steps: list[tuple] = field(default_factory=list)  # per program step: (kind, key), for `emit`

    def resolve(self, fn, args) -> list[Tensor] | None:
        """The tensors to feed now, in captured order, or None when the step must be traced again."""
        if len(args) != self.n_args:
            return None
        found: list = [None] * len(self.types)
        slots = [fn, *args]
        types_ = self.types
        try:
            for slot, size in self.root_sizes:
                if size_now(slots[slot]) != size:
                    return None
            for parent, get, expect, size, feeds in self.program:
                obj = get(slots[parent])
                slots.append(obj)
                if feeds is None:
                    if type(expect) is weakref.ref:
                        expect = expect()
                    if obj is not expect or (size is not None and size_now(obj) != size):
                        return None
                    continue
                if not isinstance(obj, Tensor) or obj._var is not None:
                    return None
                data = obj._data
                for k in feeds:
                    shape, dtype, kind = types_[k]
                    if found[k] is None:
                        if type(data) is not kind or data.shape != shape or data.dtype != dtype:
                            return None
                        found[k] = obj
                    elif found[k] is not obj:
                        return None
        except (LookupError, AttributeError, TypeError, ValueError):
            return None
        return found

    def emit(self, lines: Lines, fn, args: list[str], expected: dict[int, object] | None = None) -> list[str | None]:
        """`resolve` as straight-line code appended to `lines` (whose failures mean "trace again"): `fn` is the
        function itself (its cells and globals are read directly), `args` the names of the argument leaves;
        `expected`: captured tensors that must be these very objects (checked first, for the caller).
        Returns, per captured tensor, the name the code binds it to (None: not looked up, a fresh seed)."""
        expected = expected or {}
        slots = [lines.const(fn), *args]
        for slot, size in self.root_sizes:
            lines.fail(f"size_now({slots[slot]}) != {lines.const(size)}")
        found: list[str | None] = [None] * len(self.types)
        for (parent, _, expect, size, feeds), (kind, key) in zip(self.program, self.steps, strict=True):
            name = lines.name("s")
            lines.line(f"{name} = {_step_expr(lines, slots[parent], kind, key, fn if parent == 0 else None)}")
            slots.append(name)
            if feeds is None:
                live = expect() if type(expect) is weakref.ref else expect
                want = f"{lines.const(expect)}()" if type(expect) is weakref.ref else lines.const(expect)
                lines.fail(f"{name} is not {want}")
                if size is not None:
                    lines.fail(_size_test(lines, name, live, size))
                continue
            known = next((k for k in feeds if k in expected and found[k] is None), None)
            if known is not None:  # the very tensor (a concrete one): no type test needed
                lines.fail(f"{name} is not {lines.const(expected[known])}")
            else:
                lines.fail(f"not isinstance({name}, Tensor) or {name}._var is not None")
            data = None
            for k in feeds:
                if found[k] is not None:
                    lines.fail(f"{found[k]} is not {name}")
                    continue
                if k in expected and k != known:
                    lines.fail(f"{name} is not {lines.const(expected[k])}")
                found[k] = name
                if data is None:
                    data = f"{name}_data"
                    lines.line(f"{data} = {name}._data")
                shape, dtype, kind_ = self.types[k]
                lines.fail(f"type({data}) is not {lines.const(kind_)} or {data}.shape != {shape!r} or "
                           f"({data}.dtype is not {lines.const(dtype)} and {data}.dtype != {lines.const(dtype)})")
        return found


class Lines:
    """Python source built line by line, with the constants it names: the generated guard and glue functions
    (`AttributeGuards`, `Sources.emit`, autodiff/glue.py) are one straight-line function each, as
    torch.compile's guards are. `fail(cond)` returns `failure` (an expression) when cond holds."""

    def __init__(self, namespace: dict, failure: str = "False", indent: int = 2):
        self.ns, self.failure, self.indent = namespace, failure, indent
        self.lines: list[str] = []
        self._names: dict[str, int] = {}

    def const(self, value) -> str:
        """A name the code reads `value` by (one per distinct object)."""
        key = f"_k{id(value)}"
        if self.ns.get(key, self) is not value:
            key = f"_k{len(self.ns)}"
            while key in self.ns:
                key += "_"
        self.ns[key] = value
        return key

    def name(self, prefix: str) -> str:
        """A fresh local variable name."""
        n = self._names.get(prefix, 0)
        self._names[prefix] = n + 1
        return f"{prefix}{n}"

    def line(self, text: str, extra: int = 0) -> None:
        self.lines.append("    " * (self.indent + extra) + text)

    def fail(self, cond: str) -> None:
        self.line(f"if {cond}:")
        self.line(f"return {self.failure}", 1)


def _step_expr(lines: Lines, parent: str, kind: str, key, fn) -> str:
    """One step of a path as an expression (`_step`'s meaning); `fn`: the parent when it is the traced function
    itself, whose cells and globals dict never change (only their contents do)."""
    plain = isinstance(key, str) or (type(key) is int)
    k = repr(key) if plain else lines.const(key)
    if kind == "attr":
        return f"{parent}.__dict__[{k}]"
    if kind == "item":
        return f"{parent}[{k}]"
    if kind == "cell" and fn is not None:
        return f"{lines.const(fn.__closure__[key])}.cell_contents"
    if kind == "cell":
        return f"{parent}.__closure__[{k}].cell_contents"
    if kind == "global" and fn is not None:
        return f"{lines.const(fn.__globals__)}[{k}]"
    if kind == "global":
        return f"{parent}.__globals__[{k}]"
    if kind == "default":
        return f"{parent}.__defaults__[{k}]"
    return f"step({parent}, {kind!r}, {lines.const(key)})"


def _size_test(lines: Lines, name: str, obj, size) -> str:
    """`size_now(name) != size` for the object `obj` found there (checked by identity just before)."""
    if isinstance(obj, (list, tuple)):
        return f"len({name}) != {size!r}"
    if isinstance(obj, dict):
        return f"tuple({name}) != {lines.const(size)}"
    if type(getattr(obj, "__dict__", None)) is dict and not isinstance(obj, (types.FunctionType, types.MethodType)):
        return f"len({name}.__dict__) != {size!r}"
    return f"size_now({name}) != {lines.const(size)}"


def _weak(obj):
    """A weak reference where the object allows one: a compiled step must not keep an old model alive."""
    try:
        return weakref.ref(obj)
    except TypeError:
        return obj


def _getter(kind: str, key):
    """The step of a path as a function of the object it starts from."""
    if kind == "attr":
        return lambda o: o.__dict__[key]
    if kind == "item":
        return operator.itemgetter(key)
    return functools.partial(_step, kind=kind, key=key)


def _flatten(roots, n_args: int) -> tuple[list[tuple], list[tuple]]:
    """(the program `Sources.resolve` walks, each step's (kind, key))."""
    program: list[tuple] = []
    steps: list[tuple] = []

    def visit(node: _Node, slot: int) -> None:
        for child in node.children:
            feeds = child.feeds or None
            program.append((slot, _getter(child.kind, child.key), _weak(child.expect), child.size, feeds))
            steps.append((child.kind, child.key))
            visit(child, n_args + len(program))

    for i, root in roots:
        visit(root, 0 if i is None else 1 + i)
    return program, steps


def locate(fn, args, captured: list[Tensor], read=()) -> Sources:
    """Search what `fn` and its non-tensor arguments reach for each of `captured` (see the module doc).
    `read`: objects the trace read attributes of (modules, from Traced.objects); a route to one is kept and
    guarded by identity even where no tensor lies beyond it (`act = {"fn": nn.ReLU()}` read by fn)."""
    wanted = {id(t): k for k, t in enumerate(captured) if not t._fresh_seed}
    root_objs = [(None, fn)] + [(i, a) for i, a in enumerate(args) if not _is_atom(a) and not isinstance(a, Tensor)]
    roots = [(i, _Node("root", None)) for i, _ in root_objs]
    seen_paths: dict[int, int] = {}
    reached: set[int] = set()
    queue = deque((node, obj, 0) for (_, node), (_, obj) in zip(roots, root_objs, strict=True))
    expansions = 0
    while queue and expansions < _MAX_EXPANSIONS:
        node, obj, depth = queue.popleft()
        expansions += 1
        if depth >= _MAX_DEPTH:
            continue
        for kind, key, child in _children(obj):
            if isinstance(child, Tensor):
                k = wanted.get(id(child))
                if k is not None:
                    node.children.append(_Node(kind, key, feeds=[k]))
                    reached.add(k)
                continue
            if _is_atom(child):
                continue
            routes = seen_paths.get(id(child), 0)
            seen_paths[id(child)] = routes + 1
            sub = _Node(kind, key, child, _size(child), guard_only=routes >= _PATHS_PER_OBJECT)
            node.children.append(sub)
            if not sub.guard_only:
                queue.append((sub, child, depth + 1))
    useful: set[int] = set()
    keep = {id(o) for o in read}
    for _, root in roots:
        _prune(root, useful, keep)
    for _, root in roots:
        _keep_guards(root, useful)
    types_ = [(t._data.shape, t._data.dtype, type(t._data)) for t in captured]
    missing = [k for k in wanted.values() if k not in reached]
    root_sizes = [(0 if i is None else 1 + i, _size(obj)) for i, obj in root_objs if _size(obj) is not None]
    program, steps = _flatten(roots, len(args))
    return Sources(program, types_, missing, len(args), root_sizes, steps)


def _is_atom(obj) -> bool:
    return isinstance(obj, _ATOMS) or type(obj).__module__.startswith("cupy")


def _size(obj):
    """What must stay the same about an object on a route, beside its identity: a list's or tuple's length,
    a dict's keys in order (fn may iterate it), the number of an object's attributes (a module that gained
    a layer, a parameter or an attribute may compute something else)."""
    if isinstance(obj, (list, tuple)):
        return len(obj)
    if isinstance(obj, dict):
        return tuple(obj)
    attrs = getattr(obj, "__dict__", None)
    if isinstance(attrs, dict) and not isinstance(obj, (types.FunctionType, types.MethodType)):
        return len(attrs)
    return None


def size_now(obj):
    """_size of obj as it is now, on the hot path of `Sources.resolve`."""
    if type(obj) is dict:
        return tuple(obj)
    if type(obj) is list or type(obj) is tuple:
        return len(obj)
    return _size(obj)


def _prune(node: _Node, useful: set[int], keep: set[int]) -> bool:
    """Drop the branches that lead to no captured tensor and no object in `keep` (and, for now, every
    guard-only route); True if this node leads to one. `useful` collects the objects on the routes kept."""
    node.guard_routes = [c for c in node.children if c.guard_only]
    node.children = [c for c in node.children if not c.guard_only and _prune(c, useful, keep)]
    kept = node.expect is not None and id(node.expect) in keep
    if (node.children or kept) and node.expect is not None:
        useful.add(id(node.expect))
    return bool(node.children or node.feeds or kept)


def _keep_guards(node: _Node, useful: set[int]) -> None:
    """Restore the guard-only routes to objects that lead to a captured tensor (the sixth slot holding
    one shared block): replacing the object there must retrace too."""
    guards = [c for c in node.guard_routes if id(c.expect) in useful]
    for child in node.children:
        _keep_guards(child, useful)
    node.children += guards


# ---------------------------------------------------------------- guards on what a trace read from modules
#
# ---------------------------------------------------------------- traced values left behind
def _held(obj):
    """(kind, key, child) for what find_escapes looks through: what _children yields, and also dict entries
    under any key (a tuple, a float), set members, deque items and __slots__ attributes: routes to weights
    need none of these, but a traced value forward stores there must still be found."""
    if isinstance(obj, dict) and len(obj) <= _MAX_CONTAINER:
        for k, item in list(obj.items()):
            if isinstance(k, Tensor):  # a tensor as a key (tensors hash by identity, as torch's)
                yield "key", k, k
            yield "item", k, item
        return
    if isinstance(obj, (set, frozenset)) and len(obj) <= _MAX_CONTAINER:
        for item in list(obj):
            yield "member", item, item
        return
    if isinstance(obj, deque) and len(obj) <= _MAX_CONTAINER:
        for i, item in enumerate(list(obj)):
            yield "item", i, item
        return
    yield from _children(obj)
    if not isinstance(obj, (types.FunctionType, types.MethodType, functools.partial, list, tuple)):
        for name in _slot_names(type(obj)):
            try:
                yield "slot", name, object.__getattribute__(obj, name)
            except AttributeError:  # an empty slot
                continue


@functools.lru_cache(maxsize=512)
def _slot_names(cls) -> tuple[str, ...]:
    names: list[str] = []
    for klass in cls.__mro__:
        if klass.__module__.split(".")[0] in _LIBRARY_MODULES:
            continue
        slots = vars(klass).get("__slots__", ())
        for name in (slots,) if isinstance(slots, str) else slots:
            if name not in ("__dict__", "__weakref__") and name not in names:
                names.append(name)
    return tuple(names)


def find_escapes(roots, is_escaped) -> list[tuple[str, object, str, object]]:
    """(where, container, kind, key) of each traced value that `roots` ((name, object) pairs) still reach
    after a trace, in a breadth-first search like locate's. (container, kind, key) says what to take out:
    the value itself, or, inside a tuple or frozenset (which cannot lose an item), the outermost such
    container from the mutable object that holds it (a list item, a dict entry, an attribute, a global)."""
    found = []
    seen: set[int] = set()
    queue = deque((name, obj, 0, None) for name, obj in roots)
    expansions = 0
    while queue and expansions < _MAX_EXPANSIONS:
        where, obj, depth, link = queue.popleft()
        if id(obj) in seen or depth >= _MAX_DEPTH:
            continue
        seen.add(id(obj))
        expansions += 1
        try:
            children = list(_held(obj))
        except Exception:  # noqa: BLE001 - an object that cannot be searched holds nothing we can find
            continue
        frozen = isinstance(obj, (tuple, frozenset)) and link is not None
        for kind, key, child in children:
            out = link if frozen else (obj, kind, key)  # how to take `child` out of what the roots reach
            if isinstance(child, Tensor):
                if is_escaped(child):
                    found.append((_where(where, obj, kind, key), *out))
                continue
            if _is_atom(child) or id(child) in seen:
                continue
            queue.append((_where(where, obj, kind, key), child, depth + 1, out))
    return found


def _where(prefix: str, obj, kind: str, key) -> str:
    """A readable path: model.history[2], cache['h'], fn's closure variable `log`."""
    if kind in ("attr", "method", "slot"):
        return f"{prefix}.{key}"
    if kind == "member":
        return f"a member of the set {prefix}"
    if kind == "key":
        return f"a key of {prefix}"
    if kind == "item":
        return f"{prefix}[{key!r}]"
    if kind == "cell":
        return obj.__code__.co_freevars[key]
    if kind == "global":
        return key
    if kind == "modattr":
        return f"{key[0]}.{key[1]}"
    if kind == "self":
        return f"{prefix}.__self__"
    if kind in ("default", "kwdefault"):
        return f"{prefix}'s default {key!r}"
    return prefix


def remove_escape(obj, kind: str, key) -> None:
    """Take the traced value out of where it was left (a list item, a dict entry, an attribute)."""
    if kind == "item":
        if isinstance(obj, tuple):
            return  # a tuple that is itself a root (an argument): it cannot lose an item
        del obj[key]
    elif kind == "key":
        obj.pop(key, None)
    elif kind == "member":
        if not isinstance(obj, frozenset):
            obj.discard(key)
    elif kind == "slot":
        object.__delattr__(obj, key)
    elif kind == "attr":
        obj.__dict__.pop(key, None)
    elif kind == "method":
        delattr(type(obj), key)
    elif kind == "cell":
        del obj.__closure__[key].cell_contents
    elif kind == "global":
        obj.__globals__.pop(key, None)
    elif kind == "modattr":
        obj.__globals__[key[0]].__dict__.pop(key[1], None)
