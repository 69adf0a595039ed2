"""Grad mode, as torch's: whether eager ops on tensors that require grad are recorded (tracer/autograd.py).

`no_grad()`, `enable_grad()`, `inference_mode()` and `set_grad_enabled(mode)` are context managers and
decorators; the mode is per thread.
"""
from __future__ import annotations

import contextlib
import functools
import threading


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


__all__ = ["enable_grad", "grad_mode", "inference_mode", "is_grad_enabled", "no_grad", "set_grad_enabled"]
