"""Module and Parameter: models as Python classes, with PyTorch's parameter names and state dicts."""
from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

import numpy as np

import tracer
from tracer import Tensor
from tracer.capture import MISSING
from tracer.device import is_device, move, parse
from tracer.tensor import array_module_of
from tracer.trace import add_trace_hooks, note_read, note_write


def _is_dtype(name: str) -> bool:
    try:
        np.dtype(name)
    except TypeError:
        return False
    return True


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
    _is_parameter = True  # requires_grad False: frozen (value_and_grad gives None, optimizers skip it)

    def __init__(self, data, dtype=None, requires_grad: bool = True):
        if isinstance(data, Tensor):
            data = data.numpy() if data._var is not None else data._data
        xp = array_module_of(data) if type(data).__module__.startswith("cupy") else np  # a GPU array stays there
        arr = xp.asarray(data, dtype=dtype)
        if arr.dtype.kind != "f":
            arr = arr.astype("float32")
        super().__init__(xp.ascontiguousarray(arr))  # Tensor copies: the parameter owns its memory, updated in place
        # a Parameter made inside a trace is still a weight (captured), never a baked-in constant
        self._in_trace = False
        self.requires_grad = bool(requires_grad)  # a leaf whose eager ops are recorded (tracer/autograd.py)

    def requires_grad_(self, requires_grad: bool = True) -> Parameter:
        """Freeze (False) or unfreeze the parameter: optimizers leave a frozen parameter alone, as in torch."""
        self.requires_grad = bool(requires_grad)
        return self

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

    # dicts that mirror attributes (every entry is also set on the instance, which is what forward reads):
    # tracer.capture, re-finding captured tensors before each compiled call, follows the attributes alone
    _capture_mirrors = ("_parameters", "_modules", "_buffers")

    def __init__(self):
        object.__setattr__(self, "_parameters", {})
        object.__setattr__(self, "_modules", {})
        object.__setattr__(self, "_buffers", {})
        object.__setattr__(self, "_non_persistent", set())
        object.__setattr__(self, "_training", True)

    def __setattr__(self, name: str, value) -> None:
        if _tracing:  # inside a trace: a traced value bound here is an output of the step (tracer.trace.note_write)
            note_write(self, name, _restore_attribute)
        _assign(self, name, value)

    def __delattr__(self, name: str) -> None:
        if _tracing:
            note_write(self, name, _restore_attribute)
        _unassign(self, name)

    def forward(self, *args, **kwargs):
        """What the module computes; every subclass defines it, and calling the module calls it."""
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
        """This module and every descendant, once each (named_modules without the names)."""
        return (m for _, m in self.named_modules())

    def named_children(self) -> Iterator[tuple[str, Module]]:
        """(name, module) of the direct children, in the order they were assigned."""
        return iter(self._modules.items())

    def children(self) -> Iterator[Module]:
        """The direct children, in the order they were assigned."""
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
        """Evaluation mode (dropout off, BatchNorm uses its running statistics): train(False)."""
        return self.train(False)

    # ------------------------------------------------------------ state
    def _state_items(self, prefix: str = "") -> Iterator[tuple[str, Tensor]]:
        """Every (dotted name, Parameter or persistent buffer) path, in torch's state_dict order: a module's
        parameters, then its buffers, then each child's; a shared parameter once per name."""
        for n, p in self._parameters.items():
            yield prefix + n, p
        for n, b in self._buffers.items():
            if b is not None and n not in self._non_persistent:
                yield prefix + n, b
        for n, m in self._modules.items():
            yield from m._state_items(f"{prefix}{n}.")

    def state_dict(self) -> dict[str, np.ndarray]:
        """Dotted parameter and buffer name -> a copy of its values as a NumPy array. A parameter shared by two
        modules appears under each of its names, as in torch (so tied weights load from torch and back)."""
        return {name: np.array(p.numpy(), copy=True) for name, p in self._state_items()}

    def load_state_dict(self, state, strict: bool = True) -> IncompatibleKeys:
        """Copy values (arrays or Tensors) into the parameters and buffers, in place; returns
        (missing_keys, unexpected_keys) as torch's.

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
                # an int64 buffer (num_batches_tracked) keeps its dtype; a GPU one takes a device copy
                p._data[...] = array_module_of(p._data).asarray(values[k])
        return IncompatibleKeys(missing, unexpected)

    # ------------------------------------------------------------ buffers
    def register_buffer(self, name: str, tensor, persistent: bool = True) -> None:
        """Register a Tensor that is state but not a parameter (BatchNorm's running statistics): it is in
        state_dict (unless persistent=False), moves with to(), and optimizers never see it.

        >>> import tracer
        >>> m = Module()
        >>> m.register_buffer("count", tracer.zeros(()))
        >>> list(m.state_dict())
        ['count']
        """
        if not isinstance(name, str) or not name or "." in name:
            raise KeyError(f"{type(self).__name__}.register_buffer: name must be a non-empty string without '.', "
                           f"got {name!r}")
        if name in self._parameters or name in self._modules:
            raise KeyError(f"{type(self).__name__}.register_buffer: {name!r} is already a parameter or module")
        if tensor is not None and not isinstance(tensor, Tensor):
            tensor = tracer.tensor(np.asarray(tensor))
        self._buffers[name] = tensor
        if not persistent:
            self._non_persistent.add(name)
        object.__setattr__(self, name, tensor)

    def named_buffers(self) -> list[tuple[str, Tensor]]:
        """(dotted name, buffer) pairs, own buffers first, then each child's."""
        return [(f"{prefix}.{n}" if prefix else n, b) for prefix, m in self.named_modules()
                for n, b in m._buffers.items() if b is not None]

    def buffers(self) -> list[Tensor]:
        """The buffers (named_buffers without the names)."""
        return [b for _, b in self.named_buffers()]

    # ------------------------------------------------------------ helpers
    def apply(self, fn) -> Module:
        """Call fn(module) on every child (recursively), then on this module, as torch; returns self."""
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    def requires_grad_(self, requires_grad: bool = True) -> Module:
        """Freeze (False) or unfreeze every parameter; optimizers leave frozen ones alone."""
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clear every parameter's `.grad` that backward() accumulated: None (torch's default), or zeros in place
        with set_to_none=False."""
        zero_grads(self.parameters(), set_to_none)

    def to(self, *args, dtype=None, device=None, non_blocking: bool = False) -> Module:
        """Cast floating-point parameters and buffers to `dtype` and/or move every one to `device` ("cpu" or
        "cuda"), in place, as torch's Module.to; returns self. Make the optimizer after calling it.

        >>> import numpy as np
        >>> class Scale(Module):
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.w = Parameter(np.ones(2, "float32"))
        >>> Scale().to("float64").w.dtype
        'float64'
        """
        for a in args:
            if isinstance(a, tracer.Tensor):  # torch's to(tensor): its dtype and device
                dtype, device = dtype or a.dtype, device or a.device
            elif is_device(a) and not (isinstance(a, str) and _is_dtype(a)):
                device = a
            else:
                dtype = tracer.Tensor(np.zeros((), a)).dtype if not isinstance(a, str) else a
        where = None if device is None else parse(device, f"{type(self).__name__}.to: device must be 'cpu' or 'cuda'")
        for t in self.parameters() + self.buffers():
            data = t._data
            if dtype is not None and np.dtype(data.dtype).kind == "f":
                data = data.astype(dtype)
            t._data = data if where is None else move(data, where)
        if dtype is not None and np.dtype(dtype).kind == "f":
            for m in self.modules():  # the dtype a layer without weights (affine=False) checks its input against
                if isinstance(m.__dict__.get("_dtype"), str):
                    object.__setattr__(m, "_dtype", np.dtype(dtype).name)
        return self

    def cuda(self, device=None) -> Module:
        """Move every parameter and buffer to a GPU (torch's model.cuda()); returns self."""
        return self.to(tracer.device("cuda", device) if isinstance(device, int) else device or "cuda")

    def cpu(self) -> Module:
        """Move every parameter and buffer to the CPU (torch's model.cpu()); returns self."""
        return self.to("cpu")

    # ------------------------------------------------------------ printing
    def extra_repr(self) -> str:
        """The arguments shown between the parentheses of this module's repr, as torch's."""
        return ""

    def __repr__(self) -> str:
        children = [f"({n}): " + repr(m).replace("\n", "\n  ") for n, m in self._modules.items()]
        if not children:
            return f"{type(self).__name__}({self.extra_repr()})"
        lines = ([self.extra_repr()] if self.extra_repr() else []) + children
        return f"{type(self).__name__}(\n  " + "\n  ".join(lines) + "\n)"


_raw_getattribute = object.__getattribute__
_tracing = False  # True while some trace runs: Module then records attribute reads and writes


def _assign(module: Module, name: str, value) -> None:
    """module.name = value, registering parameters, submodules and buffers (Module.__setattr__ without the
    trace's bookkeeping). It reads the instance's own dicts directly, so that a trace records only what
    forward itself reads."""
    d = _raw_getattribute(module, "__dict__")
    if "_parameters" not in d:
        raise AttributeError(f"{type(module).__name__}: call super().__init__() before assigning attributes")
    params, modules, buffers = d["_parameters"], d["_modules"], d["_buffers"]
    # as torch: a registered name takes only its own kind (or None), never silently stops being registered
    if value is not None and name in params and not isinstance(value, Parameter):
        raise TypeError(f"{type(module).__name__}: cannot assign a {type(value).__name__} as parameter {name!r} "
                        "(nn.Parameter or None expected)")
    if value is not None and name in modules and not isinstance(value, (Module, Parameter)):
        raise TypeError(f"{type(module).__name__}: cannot assign a {type(value).__name__} as child module "
                        f"{name!r} (nn.Module or None expected)")
    if name in buffers and isinstance(value, (Parameter, Module)):
        buffers.pop(name)  # as torch: a parameter or module assigned to a buffer's name replaces it
        d["_non_persistent"].discard(name)
    if name in buffers:
        if value is not None and not isinstance(value, Tensor):
            raise TypeError(f"{type(module).__name__}: cannot assign a {type(value).__name__} as buffer {name!r} "
                            "(a Tensor or None expected)")
        buffers[name] = value
        object.__setattr__(module, name, value)
        return
    # reassigning a registered name keeps its place in the order, as torch's dict update does
    if not isinstance(value, Parameter):
        params.pop(name, None)
    if not isinstance(value, Module):
        modules.pop(name, None)
    if isinstance(value, Parameter):
        params[name] = value
        value._name = name
    elif isinstance(value, Module):
        modules[name] = value
        for sub, p in value.named_parameters():
            p._name = f"{name}.{sub}"  # the IR names captured weights after this
    object.__setattr__(module, name, value)


def _unassign(module: Module, name: str) -> None:
    d = _raw_getattribute(module, "__dict__")
    d["_parameters"].pop(name, None)
    d["_modules"].pop(name, None)
    d["_buffers"].pop(name, None)
    d["_non_persistent"].discard(name)
    object.__delattr__(module, name)


def _restore_attribute(module: Module, name: str, old) -> None:
    """Put back what module.name held before a trace assigned it (MISSING: it did not exist)."""
    if old is MISSING:
        if name in _raw_getattribute(module, "__dict__"):
            _unassign(module, name)
    else:
        _assign(module, name, old)


def _recording_getattribute(self, name: str):
    """Module.__getattribute__ while a trace runs: each attribute read is reported to the trace, which
    guards it (a submodule by identity, a number by value, ...: tracer.capture.AttributeGuards)."""
    try:
        value = _raw_getattribute(self, name)
    except AttributeError:
        if name[:2] != "__":
            note_read(self, name, MISSING)
        raise
    if name[:2] != "__":
        note_read(self, name, value)
    return value


def _begin_recording() -> None:
    global _tracing
    Module.__getattribute__ = _recording_getattribute
    _tracing = True


def _end_recording() -> None:
    global _tracing
    _tracing = False
    del Module.__getattribute__  # back to object's attribute lookup: eager code pays nothing


add_trace_hooks(_begin_recording, _end_recording)


def zero_grads(params, set_to_none: bool = True) -> None:
    """p.grad = None for each parameter, or (set_to_none=False) its gradient zeroed in place, as torch's zero_grad."""
    for p in params:
        if set_to_none:
            p._grad = None
        elif p.grad is not None:
            p.grad._data[...] = 0


def check_input(layer: Module, x, dtype: str, what: str = "input"):
    """`x` as a Tensor, after checking that its dtype is the layer's weights' `dtype`: torch raises when a float64
    or an integer batch meets float32 weights, and so does tracegrad, rather than running the step in float64.

    >>> import numpy as np
    >>> check_input(Module(), np.zeros(2, "float64"), "float32")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    TypeError: Module: input dtype float64 does not match the layer's weight dtype float32; ...
    """
    x = x if isinstance(x, Tensor) else tracer.tensor(x)
    if x.dtype != dtype:
        hint = f"x.astype({dtype!r})" + (f" or the model: model.to({x.dtype!r})" if x.dtype.startswith("float") else "")
        raise TypeError(f"{type(layer).__name__}: {what} dtype {x.dtype} does not match the layer's weight dtype "
                        f"{dtype}; convert the input: {hint}")
    return x
