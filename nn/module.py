"""Module and Parameter: models as Python classes, with PyTorch's parameter names and state dicts."""
from __future__ import annotations

from collections.abc import Iterator

import numpy as np

import tracer
from tracer import Tensor
from tracer.attr_guards import MISSING
from tracer.device import is_device, move, parse
from tracer.trace import add_trace_hooks, note_read, note_write

from . import layer_errors, module_state
from .hooks import add_hook, call_with_hooks
from .module_state import IncompatibleKeys, StateDictError  # noqa: F401  (their home before)
from .parameter import Parameter, factory_dtype, place  # noqa: F401  (re-exported: layers import them from here)


def _is_dtype(name: str) -> bool:
    try:
        np.dtype(name)
    except TypeError:
        return False
    return True


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

    _hooks = None  # a hooks.Hooks on an instance that has some: read as an attribute, so a trace guards it

    def __call__(self, *args, **kwargs):
        hooks = self._hooks
        try:  # free when nothing raises (Python 3.11); a layer's error gains its path in the model on the way out
            if hooks is None:
                return self.forward(*args, **kwargs)
            return call_with_hooks(self, hooks, args, kwargs)
        except Exception as exc:
            layer_errors.escaped(exc, self)
            raise

    # ------------------------------------------------------------ hooks
    def register_forward_pre_hook(self, hook, *, prepend: bool = False, with_kwargs: bool = False):
        """hook(module, args) (with_kwargs: hook(module, args, kwargs)) before each forward; a non-None result
        replaces the arguments, as torch's. Returns a handle whose remove() unregisters it."""
        return add_hook(self, "pre", hook, prepend, with_kwargs)

    def register_forward_hook(self, hook, *, prepend: bool = False, with_kwargs: bool = False,
                              always_call: bool = False):
        """hook(module, args, output) (with_kwargs: hook(module, args, kwargs, output)) after each forward; a
        non-None result replaces the output, as torch's. Returns a handle whose remove() unregisters it."""
        return add_hook(self, "forward", hook, prepend, with_kwargs, always_call)

    def register_full_backward_hook(self, hook, prepend: bool = False):
        """hook(module, grad_input, grad_output) after loss.backward() computed the gradients with respect to the
        module's tensor arguments (grad_input) from those of its outputs (grad_output), tuples as torch's; a
        non-None result replaces grad_input. Not callable inside a compiled step (raises). See nn/backward_hooks."""
        return add_hook(self, "backward", hook, prepend, False)

    def register_full_backward_pre_hook(self, hook, prepend: bool = False):
        """hook(module, grad_output) before the module's gradients are computed; a non-None result replaces
        grad_output, as torch's. Returns a handle whose remove() unregisters it."""
        return add_hook(self, "backward_pre", hook, prepend, False)

    register_backward_hook = register_full_backward_hook

    # ------------------------------------------------------------ traversal
    def named_modules(self, memo: set | None = None, prefix: str = "", remove_duplicate: bool = True
                      ) -> Iterator[tuple[str, Module]]:
        """This module and every descendant with dotted names ("" for this one), depth first, as torch's;
        a module reached twice is listed once unless remove_duplicate=False."""
        memo = set() if memo is None else memo
        if self in memo:
            return
        if remove_duplicate:
            memo.add(self)
        yield prefix, self
        for name, m in self._modules.items():
            if m is not None:
                yield from m.named_modules(memo, f"{prefix}.{name}" if prefix else name, remove_duplicate)

    def modules(self) -> Iterator[Module]:
        """This module and every descendant, once each (named_modules without the names)."""
        for _, m in self.named_modules():
            yield m

    def named_children(self) -> Iterator[tuple[str, Module]]:
        """(name, module) of the direct children, in the order they were assigned (each module once)."""
        seen = set()
        for name, m in self._modules.items():
            if m is not None and id(m) not in seen:
                seen.add(id(m))
                yield name, m

    def children(self) -> Iterator[Module]:
        """The direct children, in the order they were assigned."""
        for _, m in self.named_children():
            yield m

    def _named_members(self, members, prefix: str, recurse: bool, remove_duplicate: bool):
        seen: set[int] = set()
        owners = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse else [(prefix, self)]
        for owner, m in owners:
            for n, t in members(m).items():
                if t is None or id(t) in seen:
                    continue
                if remove_duplicate:
                    seen.add(id(t))
                yield (f"{owner}.{n}" if owner else n), t

    def named_parameters(self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True
                         ) -> Iterator[tuple[str, Parameter]]:
        """(dotted name, Parameter) pairs in PyTorch's order: own parameters first, then each child's;
        a parameter shared by two modules is listed once (unless remove_duplicate=False)."""
        return self._named_members(lambda m: m._parameters, prefix, recurse, remove_duplicate)

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        """The parameters, as a generator (torch's), in the order optimizers and `autodiff.grad(wrt=...)` use."""
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True
                      ) -> Iterator[tuple[str, Tensor]]:
        """(dotted name, buffer) pairs, own buffers first, then each child's (non-persistent ones too)."""
        return self._named_members(lambda m: m._buffers, prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        """The buffers (named_buffers without the names), as a generator."""
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def get_submodule(self, target: str) -> Module:
        """The descendant at the dotted path `target` ("" is this module), as torch's."""
        mod = self
        for item in target.split(".") if target else ():
            if not hasattr(mod, item):
                raise AttributeError(f"{type(mod).__name__} has no attribute `{item}`")
            mod = getattr(mod, item)
            if not isinstance(mod, Module):
                raise AttributeError(f"`{item}` is not an nn.Module")
        return mod

    def _get_member(self, target: str, registry: str, what: str):
        path, _, name = target.rpartition(".")
        mod = self.get_submodule(path)
        if not hasattr(mod, name):
            raise AttributeError(f"{type(mod).__name__} has no attribute `{name}`")
        if name not in getattr(mod, registry):
            raise AttributeError(f"`{name}` is not {what}")
        return getattr(mod, name)

    def get_parameter(self, target: str) -> Parameter:
        """The parameter at the dotted path `target` ("fc1.weight"), as torch's."""
        return self._get_member(target, "_parameters", "an nn.Parameter")

    def get_buffer(self, target: str) -> Tensor:
        """The buffer at the dotted path `target` ("bn.running_mean"), as torch's."""
        return self._get_member(target, "_buffers", "a buffer")

    # ------------------------------------------------------------ registration
    def _check_name(self, kind: str, name, registry: dict) -> None:
        """torch's checks on a name given to register_buffer / register_parameter / add_module."""
        if not isinstance(name, str):
            raise TypeError(f"{kind} name should be a string. Got {type(name).__name__}")
        if "." in name:
            raise KeyError(f'{kind} name can\'t contain ".", got: {name}')
        if name == "":
            raise KeyError(f'{kind} name can\'t be empty string ""')
        if hasattr(self, name) and name not in registry:
            raise KeyError(f"attribute '{name}' already exists")

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        """Add a parameter under `name` (None: an attribute holding None, as an absent bias), as torch's."""
        self._check_name("parameter", name, self._parameters)
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{type(param).__name__}' object to parameter '{name}' "
                            "(torch.nn.Parameter or None required)")
        setattr(self, name, param)

    def add_module(self, name: str, module: Module | None) -> None:
        """Add a child module under `name`, as torch's (register_module is the same)."""
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        self._check_name("module", name, self._modules)
        setattr(self, name, module)

    def register_module(self, name: str, module: Module | None) -> None:
        """Add a child module under `name` (add_module)."""
        self.add_module(name, module)

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
        """Set training mode (dropout active) on this module and every descendant; returns self."""
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        for m in self.modules():
            object.__setattr__(m, "_training", bool(mode))
        return self

    def eval(self) -> Module:
        """Evaluation mode (dropout off, BatchNorm uses its running statistics): train(False)."""
        return self.train(False)

    # ------------------------------------------------------------ state
    def state_dict(self, destination=None, prefix: str = "", keep_vars: bool = False) -> dict:
        """Dotted parameter and persistent buffer name -> a copy of its values as a NumPy array (keep_vars=True:
        the tensor itself), in torch's order and names. A parameter shared by two modules appears under each of
        its names, as in torch (so tied weights load from torch and back)."""
        return module_state.state_dict(self, destination, prefix, keep_vars)

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False) -> IncompatibleKeys:
        """Copy values (arrays, Tensors or torch tensors) into the parameters and buffers, in place (assign=True:
        bind new tensors holding them); returns torch's (missing_keys, unexpected_keys) named tuple.

        Missing and unexpected keys (strict=True) and mis-shaped values are reported in torch's words in one
        StateDictError, a RuntimeError as torch's (and a KeyError and ValueError). Nothing is written unless the
        whole dict is accepted. A missing `num_batches_tracked` is left as it is, as torch's BatchNorm does.
        """
        return module_state.load_state_dict(self, state_dict, strict, assign)

    def register_buffer(self, name: str, tensor, persistent: bool = True) -> None:
        """Register a Tensor that is state but not a parameter (BatchNorm's running statistics): it is in
        state_dict (unless persistent=False), moves with to(), and optimizers never see it.

        >>> import tracer
        >>> m = Module()
        >>> m.register_buffer("count", tracer.zeros(()))
        >>> list(m.state_dict())
        ['count']
        """
        self._check_name("buffer", name, self._buffers)
        if not (tensor is None or isinstance(tensor, (Tensor, np.ndarray))):
            raise TypeError(f"cannot assign '{type(tensor).__name__}' object to buffer '{name}' "
                            "(torch Tensor or None required)")
        if isinstance(tensor, np.ndarray):
            tensor = tracer.tensor(tensor)
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent.discard(name)
        else:
            self._non_persistent.add(name)
        object.__setattr__(self, name, tensor)

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
        if dtype is not None and np.dtype(dtype).kind != "f":
            raise TypeError(f"{type(self).__name__}.to only accepts floating point dtypes, but got desired dtype="
                            f"{np.dtype(dtype).name}")
        return self._cast(dtype, where)

    def _cast(self, dtype, where=None, floating_only: bool = True) -> Module:
        """Every parameter and buffer cast to dtype (the floating-point ones only, unless floating_only=False)
        and/or moved to the device `where`, in place; returns self."""
        for t in [*self.parameters(), *self.buffers()]:
            data = t._data
            if dtype is not None and (np.dtype(data.dtype).kind == "f" or not floating_only):
                data = data.astype(dtype)
            t._data = data if where is None else move(data, where)
        if dtype is not None and np.dtype(dtype).kind == "f":
            for m in self.modules():  # the dtype a layer without weights (affine=False) checks its input against
                if isinstance(m.__dict__.get("_dtype"), str):
                    object.__setattr__(m, "_dtype", np.dtype(dtype).name)
        return self

    def double(self) -> Module:
        """Floating-point parameters and buffers to float64, in place (torch's model.double()); returns self."""
        return self._cast("float64")

    def float(self) -> Module:
        """Floating-point parameters and buffers to float32, in place; returns self."""
        return self._cast("float32")

    def half(self) -> Module:
        """Floating-point parameters and buffers to float16, in place; returns self."""
        return self._cast("float16")

    def type(self, dst_type) -> Module:
        """Every parameter and buffer to dst_type, integer buffers too (num_batches_tracked), as torch's."""
        return self._cast(np.dtype(dst_type).name, floating_only=False)

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
        """torch's layout: extra_repr's lines, then "(name): child" lines indented by two spaces."""
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        children = [f"({n}): " + repr(m).replace("\n", "\n  ") for n, m in self._modules.items()]
        if not children and len(extra_lines) <= 1:
            return f"{type(self).__name__}({extra})"
        return f"{type(self).__name__}(\n  " + "\n  ".join(extra_lines + children) + "\n)"


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
    guards it (a submodule by identity, a number by value, ...: tracer.attr_guards.AttributeGuards)."""
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
