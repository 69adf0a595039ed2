"""Module forward hooks, as torch's `register_forward_pre_hook` / `register_forward_hook`, and their handles
(backward hooks are stored here too; nn/backward_hooks.py runs them).

A module's hooks live in one `_Hooks` object on the instance, made anew on every registration and removal
(copy-on-write). A module without hooks has none in its `__dict__` and reads the class default `None`, so an
eager call pays one attribute lookup; inside a trace that read is recorded like any other attribute read, so a
compiled step whose module later gains or loses a hook finds a different object there (or none) and traces
again, running the hooks as an eager call would. Hooks run while a trace records (their tensor ops become
part of the step), not on each replay of a compiled step, as torch.compile runs them when it traces.
"""
from __future__ import annotations

import itertools
import weakref

from .backward_hooks import call_cut

_ids = itertools.count()


class _Hooks:
    """A module's hooks: each a tuple of (id, fn, with_kwargs, always_call) in calling order."""

    __slots__ = ("pre", "forward", "backward_pre", "backward", "__weakref__")

    def __init__(self, pre=(), forward=(), backward_pre=(), backward=()):
        self.pre, self.forward, self.backward_pre, self.backward = pre, forward, backward_pre, backward

    def with_(self, kind: str, entries: tuple) -> _Hooks | None:
        parts = {"pre": self.pre, "forward": self.forward, "backward_pre": self.backward_pre,
                 "backward": self.backward, kind: entries}
        return _Hooks(**parts) if any(parts.values()) else None


class RemovableHandle:
    """What a `register_*_hook` call returns: `handle.remove()` unregisters the hook (again: nothing happens).
    Usable as a context manager, as torch's `torch.utils.hooks.RemovableHandle`."""

    def __init__(self, module, kind: str, hook_id: int):
        self._module, self._kind, self.id = weakref.ref(module), kind, hook_id

    def remove(self) -> None:
        module = self._module()
        hooks = None if module is None else module.__dict__.get("_hooks")
        if hooks is None:
            return
        kept = tuple(e for e in getattr(hooks, self._kind) if e[0] != self.id)
        _store(module, hooks.with_(self._kind, kept))

    def __enter__(self) -> RemovableHandle:
        return self

    def __exit__(self, *exc) -> None:
        self.remove()


def _store(module, hooks: _Hooks | None) -> None:
    d = module.__dict__
    if hooks is None:
        d.pop("_hooks", None)
    else:
        d["_hooks"] = hooks


def add_hook(module, kind: str, hook, prepend: bool, with_kwargs: bool, always_call: bool = False):
    if not callable(hook):
        raise TypeError(f"{type(module).__name__}.register_{kind}_hook: hook must be callable, got "
                        f"{type(hook).__name__}")
    hooks = module.__dict__.get("_hooks") or _Hooks()
    entry = (next(_ids), hook, bool(with_kwargs), bool(always_call))
    old = getattr(hooks, kind)
    _store(module, hooks.with_(kind, (entry,) + old if prepend else old + (entry,)))
    return RemovableHandle(module, kind, entry[0])


def call_with_hooks(module, hooks: _Hooks, args: tuple, kwargs: dict):
    """module(*args, **kwargs) with its hooks, in torch's order: pre-hooks (each may replace the arguments),
    forward, forward hooks (each may replace the output); always_call hooks run even when forward raises.
    With backward hooks, forward and forward hooks run inside the cut that nn/backward_hooks.py makes."""
    for _, hook, with_kwargs, _ in hooks.pre:
        if with_kwargs:
            result = hook(module, args, kwargs)
            if result is not None:
                if not (isinstance(result, tuple) and len(result) == 2):
                    raise RuntimeError("forward pre-hook must return None or a tuple of (new_args, new_kwargs), "
                                       f"but got {result}.")
                args, kwargs = result
        else:
            result = hook(module, args)
            if result is not None:
                args = result if isinstance(result, tuple) else (result,)
    if hooks.backward or hooks.backward_pre:
        return call_cut(module, hooks, lambda args: _forward(module, hooks, args, kwargs), args)
    return _forward(module, hooks, args, kwargs)


def _forward(module, hooks: _Hooks, args: tuple, kwargs: dict):
    try:
        output = module.forward(*args, **kwargs)
    except Exception:
        for _, hook, with_kwargs, always in hooks.forward:
            if always:
                _ = hook(module, args, kwargs, None) if with_kwargs else hook(module, args, None)
        raise
    for _, hook, with_kwargs, _ in hooks.forward:
        result = hook(module, args, kwargs, output) if with_kwargs else hook(module, args, output)
        if result is not None:
            output = result
    return output
