"""Containers, as torch.nn's: Sequential, ModuleList, ModuleDict, ParameterList, ParameterDict.

Every entry is registered as an attribute too (Module's rule: forward reads attributes), so a compiled step
guards what it read (`_modules`, `_parameters`: the same items) and traces again after a swap.
"""
from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Mapping

import numpy as np

from tracer import Tensor

from .module import Module, Parameter, _assign, _unassign


class NoForwardError(NotImplementedError, TypeError):
    """Calling a container that has no forward (ModuleList, ModuleDict, ParameterList/Dict): torch raises
    NotImplementedError; a TypeError too, as tracegrad did before."""


def _index(container, idx, what: str = "") -> int:
    """An int index into `container` as a non-negative position; torch's IndexError / TypeError otherwise."""
    name = type(container).__name__
    if isinstance(idx, bool) or not isinstance(idx, (int, np.integer)):
        raise TypeError(f"{name}{what}: takes an int index, got {type(idx).__name__}")
    n = len(container)
    if not -n <= idx < n:
        raise IndexError(f"index {idx} is out of range for a {name} of {n} modules")
    return int(idx) % n


def _rebuild(module: Module, registry: dict, entries: list) -> None:
    """Replace every entry of `registry` by `entries` [(name, value)], in that order (attributes too)."""
    for key in list(registry):
        _unassign(module, key)
    for key, value in entries:
        _assign(module, key, value)


def _delete(container, idx) -> None:
    """`del container[idx]` (an int or a slice) for Sequential and ModuleList: the rest renumbered "0", "1", ...,
    as torch's."""
    keys = list(container._modules)
    for key in keys[idx] if isinstance(idx, slice) else [keys[_index(container, idx)]]:
        delattr(container, key)
    _rebuild(container, container._modules, [(str(i), m) for i, m in enumerate(container._modules.values())])


def _quiet_copy(cls, items) -> Module:
    """A new container holding `items` [(name, module)] under those names without renaming the modules'
    parameters (their `_name` stays the one the owning model gave, which the IR prints)."""
    part = cls()
    for name, m in items:
        part._modules[name] = m
        object.__setattr__(part, name, m)
    return part


class _Ordered(Module):
    """What Sequential and ModuleList share: len, iteration over the modules, `del`, pop (renumbering)."""

    def __delitem__(self, idx) -> None:
        """`del seq[i]` (or a slice): the rest renumbered "0", "1", ..., as torch's."""
        _delete(self, idx)

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def pop(self, key: int) -> Module:
        """Remove and return the module at position `key`, renumbering the rest."""
        m = self[key]
        del self[key]
        return m


class Sequential(_Ordered):
    """Modules applied in order, registered as "0", "1", ... (or under the names of one OrderedDict), as
    torch.nn.Sequential: indexable, sliceable (a Sequential), assignable, iterable, append/extend/insert.

    >>> from collections import OrderedDict
    >>> from nn.layers import Linear
    >>> [n for n, _ in Sequential(OrderedDict(fc=Linear(2, 2))).named_parameters()]
    ['fc.weight', 'fc.bias']
    """

    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for key, module in args[0].items():
                self.add_module(key, module)
        else:
            for idx, module in enumerate(args):
                self.add_module(str(idx), module)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return _quiet_copy(type(self), list(self._modules.items())[idx])
        return list(self._modules.values())[_index(self, idx)]

    def __setitem__(self, idx, module: Module) -> None:
        """`seq[i] = module` replaces the i-th module, keeping its name and place, as torch's."""
        if not isinstance(module, Module):
            raise TypeError(f"{type(self).__name__}[{idx!r}] = value: value must be a Module, got "
                            f"{type(module).__name__}")
        setattr(self, list(self._modules)[_index(self, idx, f'[{idx!r}] = value')], module)

    def __add__(self, other: Sequential) -> Sequential:
        if not isinstance(other, Sequential):
            raise ValueError(f"add operator supports only objects of Sequential class, but {type(other)} is given.")
        return type(self)(*self, *other)

    def __iadd__(self, other: Sequential) -> Sequential:
        if not isinstance(other, Sequential):
            raise ValueError(f"add operator supports only objects of Sequential class, but {type(other)} is given.")
        return self.extend(other)

    def append(self, module: Module) -> Sequential:
        """Add `module` at the end (named by its position, as torch); returns self."""
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules: Iterable[Module]) -> Sequential:
        """Append each of `modules`; returns self."""
        for m in modules:
            self.append(m)
        return self

    def insert(self, index: int, module: Module) -> Sequential:
        """Put `module` before position `index` (-len..len), renumbering the rest, as torch's; returns self."""
        if not isinstance(module, Module):
            raise AssertionError(f"module should be of type: {Module}")
        n = len(self)
        if not -n <= index <= n:
            raise IndexError(f"Index out of range: {index}")
        index = index + n if index < 0 else index
        mods = list(self._modules.values())
        mods.insert(index, module)
        _rebuild(self, self._modules, [(str(i), m) for i, m in enumerate(mods)])
        return self

    def forward(self, x):
        for m in self:
            x = m(x)
        return x


class ModuleList(_Ordered):
    """Modules held in a list, registered as "0", "1", ..., as torch.nn.ModuleList: indexing, slicing (a new
    ModuleList, renumbered), assignment, `del`, len, iteration, append, extend, insert, `+=`, `+`; no forward.

    >>> from nn.layers import Linear
    >>> blocks = ModuleList([Linear(2, 2) for _ in range(3)])
    >>> len(blocks), [name for name, _ in blocks.named_parameters()][:2]
    (3, ['0.weight', '0.bias'])
    """

    def __init__(self, modules: Iterable[Module] | None = None):
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return _quiet_copy(type(self), [(str(i), m) for i, m in enumerate(list(self._modules.values())[idx])])
        return self._modules[str(_index(self, idx))]

    def __setitem__(self, idx, module: Module) -> None:
        setattr(self, str(_index(self, idx)), module)

    def __iadd__(self, modules: Iterable[Module]) -> ModuleList:
        return self.extend(modules)

    def __add__(self, other: Iterable[Module]) -> ModuleList:
        return ModuleList([*self, *other])

    def append(self, module: Module) -> ModuleList:
        """Add `module` at the end; returns self."""
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules: Iterable[Module]) -> ModuleList:
        """Append each of `modules` (any iterable); returns self."""
        if not isinstance(modules, Iterable):
            raise TypeError("ModuleList.extend should be called with an iterable, but got " + type(modules).__name__)
        for m in list(modules):
            self.append(m)
        return self

    def insert(self, index: int, module: Module) -> None:
        """Put `module` before position `index` (as list.insert), renumbering the rest."""
        mods = list(self._modules.values())
        mods.insert(index, module)
        _rebuild(self, self._modules, [(str(i), m) for i, m in enumerate(mods)])

    def forward(self, *args, **kwargs):
        raise NoForwardError("ModuleList has no forward: iterate over it and call each module")

    def __repr__(self) -> str:
        """torch's: runs of equal children are printed once, as "(0-2): 3 x Linear(...)"."""
        if not self._modules:
            return "ModuleList()"
        reprs = [repr(m).replace("\n", "\n  ") for m in self]
        lines, start = [], 0
        for i in range(1, len(reprs) + 1):
            if i == len(reprs) or reprs[i] != reprs[start]:
                count = i - start
                head = f"({start})" if count == 1 else f"({start}-{i - 1}): {count} x "
                lines.append(head + (": " if count == 1 else "") + reprs[start])
                start = i
        return "ModuleList(\n  " + "\n  ".join(lines) + "\n)"


class ModuleDict(Module):
    """Modules held under string keys, in insertion order, as torch.nn.ModuleDict (`d[key]`, `d.key`, keys,
    items, values, update, pop, clear, `in`, len, iteration over the keys); no forward.

    >>> from nn.layers import Linear
    >>> d = ModuleDict({"wte": Linear(2, 3), "head": Linear(3, 2)})
    >>> list(d), [n for n, _ in d.named_parameters()][:1]
    (['wte', 'head'], ['wte.weight'])
    """

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key: str) -> Module:
        return self._modules[key]

    def __setitem__(self, key: str, module: Module) -> None:
        self.add_module(key, module)

    def __delitem__(self, key: str) -> None:
        if key not in self._modules:
            raise KeyError(key)
        delattr(self, key)

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key) -> bool:
        return key in self._modules

    def clear(self) -> None:
        """Remove every module, as dict.clear."""
        for key in list(self._modules):
            delattr(self, key)

    def pop(self, key: str) -> Module:
        """Remove the module under `key` and return it."""
        m = self[key]
        del self[key]
        return m

    def keys(self):
        """The names, in insertion order."""
        return self._modules.keys()

    def items(self):
        """(name, module) pairs, in insertion order."""
        return self._modules.items()

    def values(self):
        """The modules, in insertion order."""
        return self._modules.values()

    def update(self, modules) -> None:
        """Add or replace entries from a mapping (in its order) or an iterable of (key, module) pairs."""
        if isinstance(modules, (Mapping, ModuleDict)):
            for key, m in modules.items():
                self[key] = m
            return
        if not isinstance(modules, Iterable):
            raise TypeError("ModuleDict.update should be called with an iterable of key/value pairs, but got "
                            + type(modules).__name__)
        for j, pair in enumerate(modules):
            if not isinstance(pair, Iterable) or isinstance(pair, (str, Module)):
                raise TypeError(f"ModuleDict update sequence element #{j} should be Iterable; is "
                                + type(pair).__name__)
            pair = tuple(pair)
            if len(pair) != 2:
                raise ValueError(f"ModuleDict update sequence element #{j} has length {len(pair)}; 2 is required")
            self[pair[0]] = pair[1]

    def forward(self, *args, **kwargs):
        raise NoForwardError("ModuleDict has no forward: look a module up by its key and call it")


def _as_parameter(value):
    """torch's rule: a plain tensor (or array) put into a ParameterList/Dict becomes a Parameter."""
    if isinstance(value, Parameter):
        return value
    if isinstance(value, (Tensor, np.ndarray)):
        return Parameter(value)
    return value


_TYPENAMES = {"float32": "FloatTensor", "float64": "DoubleTensor", "float16": "HalfTensor", "int64": "LongTensor",
               "int32": "IntTensor", "int16": "ShortTensor", "int8": "CharTensor", "uint8": "ByteTensor",
               "bool": "BoolTensor"}


def _describe(p, typename: bool) -> str:
    """One entry of a ParameterList's (typename False: "torch.float32") or ParameterDict's (typename True:
    torch.typename's "torch.FloatTensor") repr, in torch's words."""
    if isinstance(p, Tensor):
        size = "x".join(str(d) for d in p.shape)
        cuda = str(getattr(p, "device", "cpu")).startswith("cuda")
        where = f" ({p.device})" if cuda else ""
        kind = "Parameter" if isinstance(p, Parameter) else "Tensor"
        dtype = f"torch.{'cuda.' if cuda else ''}{_TYPENAMES[p.dtype]}" if typename else f"torch.{p.dtype}"
        return f"{kind} containing: [{dtype} of size {size}{where}]"
    return f"Object of type: {type(p).__name__}"


class ParameterList(Module):
    """Parameters held in a list, registered as "0", "1", ..., as torch.nn.ParameterList (tensors given to it
    become Parameters): indexing, slicing, assignment, len, iteration, append, extend, `+=`.

    >>> import numpy as np
    >>> ps = ParameterList([np.zeros(2, "float32"), np.ones((2, 3), "float32")])
    >>> [n for n, _ in ps.named_parameters()], ps[1].shape
    (['0', '1'], (2, 3))
    """

    def __init__(self, values=None):
        super().__init__()
        object.__setattr__(self, "_size", 0)
        if values is not None:
            self.extend(values)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return ParameterList([self[i] for i in range(len(self))[idx]])
        return getattr(self, str(_index(self, idx)))

    def __setitem__(self, idx, param) -> None:
        setattr(self, str(_index(self, idx)), _as_parameter(param))

    def __len__(self) -> int:
        return self._size

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __iadd__(self, values) -> ParameterList:
        return self.extend(values)

    def append(self, value) -> ParameterList:
        """Add a parameter at the end (a Tensor or array becomes an nn.Parameter); returns self."""
        n = len(self)
        object.__setattr__(self, "_size", n + 1)
        setattr(self, str(n), _as_parameter(value))
        return self

    def extend(self, values) -> ParameterList:
        """Append each of `values`; returns self."""
        if not isinstance(values, Iterable) or isinstance(values, Tensor):
            raise TypeError("ParameterList.extend should be called with an iterable, but got "
                            + type(values).__name__)
        for v in list(values):
            self.append(v)
        return self

    def extra_repr(self) -> str:
        return "\n".join(f"  ({k}): {_describe(p, False)}" for k, p in enumerate(self))

    def forward(self, *args, **kwargs):
        raise NoForwardError("ParameterList has no forward")


class ParameterDict(Module):
    """Parameters held under string keys, in insertion order, as torch.nn.ParameterDict (tensors given to it
    become Parameters): `d[key]`, keys, items, values, update, pop, `in`, len, iteration over the keys.

    >>> import numpy as np
    >>> pd = ParameterDict({"scale": np.ones(3, "float32")})
    >>> list(pd.state_dict()), "scale" in pd
    (['scale'], True)
    """

    def __init__(self, parameters=None):
        super().__init__()
        object.__setattr__(self, "_keys", {})
        if parameters is not None:
            self.update(parameters)

    def __getitem__(self, key: str):
        return getattr(self, key) if key in self._keys else self._missing(key)

    @staticmethod
    def _missing(key):
        raise KeyError(key)

    def __setitem__(self, key: str, value) -> None:
        if not isinstance(key, str):
            raise TypeError(f"ParameterDict keys must be strings, got {type(key).__name__}")
        self._keys[key] = None
        setattr(self, key, _as_parameter(value))

    def __delitem__(self, key: str) -> None:
        del self._keys[key]
        delattr(self, key)

    def __len__(self) -> int:
        return len(self._keys)

    def __iter__(self):
        return iter(list(self._keys))

    def __contains__(self, key) -> bool:
        return key in self._keys

    def keys(self):
        """The names, in insertion order."""
        return list(self._keys)

    def items(self):
        """(name, parameter) pairs, in insertion order."""
        return [(k, self[k]) for k in self._keys]

    def values(self):
        """The parameters, in insertion order."""
        return [self[k] for k in self._keys]

    def pop(self, key: str):
        """Remove the parameter under `key` and return it."""
        v = self[key]
        del self[key]
        return v

    def update(self, parameters) -> None:
        """Add or replace parameters from a mapping or (name, parameter) pairs, as dict.update."""
        pairs = parameters.items() if isinstance(parameters, (Mapping, ParameterDict)) else parameters
        for key, value in pairs:
            self[key] = value

    def extra_repr(self) -> str:
        return "\n".join(f"  ({k}): {_describe(p, True)}" for k, p in self.items())

    def forward(self, *args, **kwargs):
        raise NoForwardError("ParameterDict has no forward")


__all__ = ["ModuleDict", "ModuleList", "ParameterDict", "ParameterList", "Sequential"]
