"""Pytrees, as in JAX: tuples, lists, dicts, OrderedDicts and namedtuples (nested) are containers; anything
else is a leaf. A compiled step flattens its arguments (and keyword arguments) into leaves, so that every
array, Tensor and number at a leaf is an input read on every call, and keys its cache by the tree's
structure. Dict keys keep their insertion order (not sorted as in JAX): `fn` may iterate the dict.

A treedef is a hashable nested tuple: LEAF, or (kind, meta, children) with kind one of "tuple", "list",
"dict", "odict", "namedtuple"; meta holds the dict keys in order, or the namedtuple's type.

has_aux's aux is a pytree too: its Tensors (and NumPy arrays, made Tensors) are outputs of the step, its
other leaves (None, numbers, strings) are kept as traced and handed back as they were.
"""
from __future__ import annotations

import inspect
from collections import OrderedDict

import numpy as np

from tracer import Tensor

LEAF = None
_MAX_DEPTH = 100


def _node(obj):
    """(kind, meta, children) when obj is a container, else None."""
    t = type(obj)
    if t is tuple:
        return "tuple", None, obj
    if t is list:
        return "list", None, obj
    if t is dict:
        return "dict", tuple(obj), obj.values()
    if t is OrderedDict:
        return "odict", tuple(obj), obj.values()
    if isinstance(obj, tuple) and hasattr(t, "_fields"):
        return "namedtuple", t, obj
    return None


def flatten(obj, leaves: list, depth: int = 0):
    """Append obj's leaves to `leaves`; return its treedef."""
    node = _node(obj)
    if node is None:
        leaves.append(obj)
        return LEAF
    if depth > _MAX_DEPTH:
        raise TypeError(f"a pytree argument nests containers more than {_MAX_DEPTH} deep (does it contain itself?)")
    kind, meta, children = node
    return kind, meta, tuple(flatten(c, leaves, depth + 1) for c in children)


def unflatten(tree, leaves):
    """The structure `tree` with its leaves taken in order from the iterator `leaves`."""
    if tree is LEAF:
        return next(leaves)
    kind, meta, children = tree
    values = [unflatten(c, leaves) for c in children]
    if kind == "tuple":
        return tuple(values)
    if kind == "list":
        return values
    if kind == "dict":
        return dict(zip(meta, values, strict=True))
    if kind == "odict":
        return OrderedDict(zip(meta, values, strict=True))
    return meta(*values)


def count(tree) -> int:
    return 1 if tree is LEAF else sum(count(c) for c in tree[2])


def paths(tree, prefix: str) -> list[str]:
    """Each leaf's path in Python syntax: `args[0]['x']`, `kwargs['y'][1]`, `aux.mean`."""
    if tree is LEAF:
        return [prefix]
    kind, meta, children = tree
    if kind in ("dict", "odict"):
        steps = [f"[{k!r}]" for k in meta]
    elif kind == "namedtuple":
        steps = [f".{f}" for f in meta._fields]
    else:
        steps = [f"[{i}]" for i in range(len(children))]
    return [p for s, c in zip(steps, children, strict=True) for p in paths(c, prefix + s)]


def _ident(text: str) -> str:
    name = "".join(c if c.isalnum() or c == "_" else "_" for c in text).strip("_")
    while "__" in name:
        name = name.replace("__", "_")
    return name if name and name[0].isalpha() else "arg_" + name


class CallTree:
    """The pytree of one call's positional and keyword arguments: `leaves` in order, `key` hashable."""

    __slots__ = ("args", "kwargs", "key")

    def __init__(self, args: tuple, kwargs: dict, leaves: list):
        self.args = tuple(flatten(a, leaves) for a in args)
        self.kwargs = tuple((k, flatten(v, leaves)) for k, v in kwargs.items())
        self.key = (self.args, self.kwargs)

    def rebuild(self, leaves) -> tuple[tuple, dict]:
        """(args, kwargs) rebuilt from the flat leaves."""
        it = iter(leaves)
        return tuple(unflatten(t, it) for t in self.args), {k: unflatten(t, it) for k, t in self.kwargs}

    def paths(self) -> list[str]:
        out = [p for i, t in enumerate(self.args) for p in paths(t, f"args[{i}]")]
        return out + [p for k, t in self.kwargs for p in paths(t, f"kwargs[{k!r}]")]

    def span(self, i: int) -> range:
        """The flat positions of positional argument i's leaves."""
        start = sum(count(t) for t in self.args[:i])
        return range(start, start + count(self.args[i]))

    def names(self, fn) -> list[str]:
        """IR parameter names: fn's parameter name (or the keyword), then the path inside (`batch_x`)."""
        try:
            params = [p.name for p in inspect.signature(fn).parameters.values()
                      if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        except (TypeError, ValueError):
            params = []
        out = []
        for i, t in enumerate(self.args):
            base = params[i] if i < len(params) else f"arg{i}"
            out += [_ident(p) for p in paths(t, base)]
        for k, t in self.kwargs:
            out += [_ident(p) for p in paths(t, str(k))]
        return out


def flat_fn(fn, call: CallTree, has_aux: bool, out: dict):
    """fn as a function of the call's flat leaves; with has_aux it returns (value, aux's tensors) and
    leaves aux's structure in out["aux"] (see `split_aux`)."""
    def flat(*leaves):
        args, kwargs = call.rebuild(leaves)
        result = fn(*args, **kwargs)
        if not has_aux:
            return result
        if not (isinstance(result, (tuple, list)) and len(result) == 2):
            raise TypeError(f"has_aux=True: fn must return a pair (value, aux), got {type(result).__name__}")
        tensors, out["aux"] = split_aux(result[1])
        return result[0], tuple(tensors)
    return flat


_OUTPUT = object()  # an aux leaf that is an output of the step


def split_aux(aux):
    """(the Tensors in aux, what `rebuild_aux` needs to put aux back together from their values)."""
    leaves: list = []
    tree = flatten(aux, leaves)
    tensors, static = [], []
    for leaf in leaves:
        if isinstance(leaf, np.ndarray) or type(leaf).__module__.startswith("cupy"):
            leaf = Tensor(leaf)  # made inside the trace: a constant of it
        if isinstance(leaf, Tensor):
            tensors.append(leaf)
            leaf = _OUTPUT
        static.append(leaf)
    return tensors, (tree, tuple(static))


def rebuild_aux(values, aux_tree, leaf):
    """aux from the step's aux outputs (`leaf` makes each a Tensor) and the static leaves `split_aux` kept."""
    tree, static = aux_tree
    it = iter(values)
    return unflatten(tree, iter([leaf(next(it)) if s is _OUTPUT else s for s in static]))


def same_aux(a, b) -> bool:
    """Whether two traces' aux structures (and static leaves) agree."""
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - a static leaf whose == is not a bool: compare by identity
        return a is b
