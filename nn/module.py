"""Module and Parameter: models as Python classes, with PyTorch's parameter names and state dicts."""
from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

import numpy as np

import tracer
from tracer import Tensor


class Parameter(Tensor):
    """A trainable tensor: always concrete, floating point, and owned by the model.

    Optimizers update `_data` in place, so a compiled function that captured the parameter sees the
    new values on its next call without retracing.

    >>> import numpy as np
    >>> p = Parameter(np.zeros((2, 3), "float32"))
    >>> p.shape, p.dtype
    ((2, 3), 'float32')
    """

    __slots__ = ()

    def __init__(self, data, dtype=None):
        if isinstance(data, Tensor):
            data = data.numpy()
        arr = np.array(data, dtype=dtype, copy=True)  # own the memory: updates happen in place
        if arr.dtype.kind != "f":
            arr = arr.astype("float32")
        super().__init__(np.ascontiguousarray(arr))
        # a Parameter made inside a trace is still a weight (captured), never a baked-in constant
        self._in_trace = False

    def __repr__(self) -> str:
        return "Parameter" + super().__repr__()[len("Tensor"):]


class IncompatibleKeys(NamedTuple):
    """What load_state_dict(strict=False) skipped, as torch's `_IncompatibleKeys`."""

    missing_keys: list[str]
    unexpected_keys: list[str]


class StateDictError(KeyError, ValueError):
    """load_state_dict found missing, unexpected or mis-shaped keys (catchable as either error)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class Module:
    """Base class of models: Parameters and Modules assigned as attributes are registered in order.

    >>> import numpy as np
    >>> class Affine(Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.scale = Parameter(np.ones(3, "float32"))
    ...     def forward(self, x):
    ...         return x * self.scale
    >>> [name for name, _ in Affine().named_parameters()]
    ['scale']
    """

    def __init__(self):
        object.__setattr__(self, "_parameters", {})
        object.__setattr__(self, "_modules", {})
        object.__setattr__(self, "_training", True)

    def __setattr__(self, name: str, value) -> None:
        if "_parameters" not in self.__dict__:
            raise AttributeError(f"{type(self).__name__}: call super().__init__() before assigning attributes")
        # as torch: a registered name takes only its own kind (or None), never silently stops being registered
        if value is not None and name in self._parameters and not isinstance(value, Parameter):
            raise TypeError(f"{type(self).__name__}: cannot assign a {type(value).__name__} as parameter {name!r} "
                            "(nn.Parameter or None expected)")
        if value is not None and name in self._modules and not isinstance(value, (Module, Parameter)):
            raise TypeError(f"{type(self).__name__}: cannot assign a {type(value).__name__} as child module "
                            f"{name!r} (nn.Module or None expected)")
        # reassigning a registered name keeps its place in the order, as torch's dict update does
        if not isinstance(value, Parameter):
            self._parameters.pop(name, None)
        if not isinstance(value, Module):
            self._modules.pop(name, None)
        if isinstance(value, Parameter):
            self._parameters[name] = value
            value._name = name
        elif isinstance(value, Module):
            self._modules[name] = value
            for sub, p in value.named_parameters():
                p._name = f"{name}.{sub}"  # the IR names captured weights after this
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        self._parameters.pop(name, None)
        self._modules.pop(name, None)
        object.__delattr__(self, name)

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} must define forward()")

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    # ------------------------------------------------------------ traversal
    def named_modules(self, prefix: str = "") -> Iterator[tuple[str, Module]]:
        """This module and every descendant, once each, with dotted names ("" for this one)."""
        seen: set[int] = set()
        stack = [(prefix, self)]
        while stack:
            name, m = stack.pop()
            if id(m) in seen:
                continue
            seen.add(id(m))
            yield name, m
            children = [(f"{name}.{n}" if name else n, c) for n, c in m._modules.items()]
            stack.extend(reversed(children))

    def modules(self) -> Iterator[Module]:
        return (m for _, m in self.named_modules())

    def named_children(self) -> Iterator[tuple[str, Module]]:
        return iter(self._modules.items())

    def children(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def named_parameters(self) -> list[tuple[str, Parameter]]:
        """(dotted name, Parameter) pairs in PyTorch's order: own parameters first, then each child's;
        a parameter shared by two modules is listed once."""
        seen: set[int] = set()
        out = []
        for prefix, m in self.named_modules():
            for n, p in m._parameters.items():
                if id(p) not in seen:
                    seen.add(id(p))
                    out.append((f"{prefix}.{n}" if prefix else n, p))
        return out

    def parameters(self) -> list[Parameter]:
        """The parameters as a list, the order optimizers and `autodiff.grad(wrt=...)` use."""
        return [p for _, p in self.named_parameters()]

    # ------------------------------------------------------------ modes
    @property
    def training(self) -> bool:
        """Training mode. Read inside a trace, it becomes a guard of the compiled function, so
        switching with train()/eval() retraces once per mode instead of replaying a stale trace."""
        return tracer.guard(lambda: self._training)

    @training.setter
    def training(self, mode: bool) -> None:
        """`m.training = False` sets this module's flag only, as in torch; eval() sets every descendant's."""
        object.__setattr__(self, "_training", bool(mode))

    def train(self, mode: bool = True) -> Module:
        """Set training mode (dropout active) on this module and every descendant."""
        for m in self.modules():
            object.__setattr__(m, "_training", bool(mode))
        return self

    def eval(self) -> Module:
        return self.train(False)

    # ------------------------------------------------------------ state
    def _state_items(self, prefix: str = "") -> Iterator[tuple[str, Parameter]]:
        """Every (dotted name, Parameter) path, a shared parameter once per name, as torch's state_dict."""
        for n, p in self._parameters.items():
            yield prefix + n, p
        for n, m in self._modules.items():
            yield from m._state_items(f"{prefix}{n}.")

    def state_dict(self) -> dict[str, np.ndarray]:
        """Dotted parameter name -> a copy of its values as a NumPy array. A parameter shared by two modules
        appears under each of its names, as in torch (so tied weights load from torch and back)."""
        return {name: np.array(p.numpy(), copy=True) for name, p in self._state_items()}

    def load_state_dict(self, state, strict: bool = True) -> IncompatibleKeys:
        """Copy values (arrays or Tensors) into the parameters, in place; returns (missing_keys, unexpected_keys)
        as torch's.

        Every missing, unexpected and mis-shaped key is named in one StateDictError (a KeyError and a
        ValueError); with strict=False missing and unexpected keys are ignored, shapes still checked.
        Nothing is written unless the whole dict is accepted.
        """
        params = dict(self._state_items())
        values = {k: np.asarray(v) for k, v in state.items()}
        missing = [k for k in params if k not in values]
        unexpected = [k for k in values if k not in params]
        mis_shaped = [f"{k}: expected {params[k].shape}, got {values[k].shape}"
                      for k in params if k in values and values[k].shape != params[k].shape]
        problems = []
        if strict and missing:
            problems.append("missing keys: " + ", ".join(missing))
        if strict and unexpected:
            problems.append("unexpected keys: " + ", ".join(unexpected))
        if mis_shaped:
            problems.append("shape mismatch: " + "; ".join(mis_shaped))
        if problems:
            raise StateDictError(f"{type(self).__name__}.load_state_dict: " + " | ".join(problems))
        for k, p in params.items():
            if k in values:
                p._data[...] = values[k]
        return IncompatibleKeys(missing, unexpected)

    # ------------------------------------------------------------ printing
    def extra_repr(self) -> str:
        return ""

    def __repr__(self) -> str:
        children = [f"({n}): " + repr(m).replace("\n", "\n  ") for n, m in self._modules.items()]
        if not children:
            return f"{type(self).__name__}({self.extra_repr()})"
        lines = ([self.extra_repr()] if self.extra_repr() else []) + children
        return f"{type(self).__name__}(\n  " + "\n  ".join(lines) + "\n)"
