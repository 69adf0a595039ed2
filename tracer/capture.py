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


def _code_names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _code_names(const)
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
        names = _code_names(obj.__code__)
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


def _flatten(roots, n_args: int) -> list[tuple]:
    program: list[tuple] = []

    def visit(node: _Node, slot: int) -> None:
        for child in node.children:
            feeds = child.feeds or None
            program.append((slot, _getter(child.kind, child.key), _weak(child.expect), child.size, feeds))
            visit(child, n_args + len(program))

    for i, root in roots:
        visit(root, 0 if i is None else 1 + i)
    return program


def locate(fn, args, captured: list[Tensor]) -> Sources:
    """Search what `fn` and its non-tensor arguments reach for each of `captured` (see the module doc)."""
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
    for _, root in roots:
        _prune(root, useful)
    for _, root in roots:
        _keep_guards(root, useful)
    types_ = [(t._data.shape, t._data.dtype, type(t._data)) for t in captured]
    missing = [k for k in wanted.values() if k not in reached]
    root_sizes = [(0 if i is None else 1 + i, _size(obj)) for i, obj in root_objs if _size(obj) is not None]
    return Sources(_flatten(roots, len(args)), types_, missing, len(args), root_sizes)


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


def _prune(node: _Node, useful: set[int]) -> bool:
    """Drop the branches that lead to no captured tensor (and, for now, every guard-only route); True if
    this node leads to one. `useful` collects the objects on the routes kept."""
    node.guard_routes = [c for c in node.children if c.guard_only]
    node.children = [c for c in node.children if not c.guard_only and _prune(c, useful)]
    if node.children and node.expect is not None:
        useful.add(id(node.expect))
    return bool(node.children or node.feeds)


def _keep_guards(node: _Node, useful: set[int]) -> None:
    """Restore the guard-only routes to objects that lead to a captured tensor (the sixth slot holding
    one shared block): replacing the object there must retrace too."""
    guards = [c for c in node.guard_routes if id(c.expect) in useful]
    for child in node.children:
        _keep_guards(child, useful)
    node.children += guards
