"""In-place updates, as in PyTorch: `w -= lr * g`, `w.copy_(v)`, `w.add_(g, alpha=-lr)`.

An eager tensor changes in place (the same object, the same buffer), so every holder of it sees the new
values. Inside a trace there is no buffer to write: a traced value is rebound to the new SSA value (every
Python name holding the Tensor sees it), and an outside tensor that the traced function writes to (a
running statistic, say) is recorded as a write: the compiled step returns its new value and writes it
back into the tensor after each call, so a compiled step updates it as an eager call would.
"""
from __future__ import annotations

import numpy as np

from ir.runtime import anomaly as _anomaly

from . import autograd
from .device import device_of, move
from .math import add, as_tensor, astype, divide, floor_divide, multiply, power, remainder, stop_gradient, subtract
from .tensor import Tensor, TraceError, active_trace, apply


def write(self: Tensor, value: Tensor, what: str) -> Tensor:
    """Make `self` hold `value`: the same shape, cast to self's dtype where the cast keeps its kind."""
    if value.shape != self.shape:
        raise RuntimeError(f"{what}: the result has shape {value.shape} but the tensor has shape {self.shape}; "
                           "an in-place update cannot change a tensor's shape")
    if value.dtype != self.dtype:
        value = astype(value, self.dtype)
    ctx = active_trace()
    if ctx is None:
        if self._var is not None:
            raise TraceError(f"{what}: a traced value ({self._var.type}) escaped the trace that made it")
        if not self._data.flags.writeable:
            raise ValueError(f"{what}: the tensor's memory is read-only")
        autograd.check_inplace(self, value)
        data = value._data
        if type(data) is not type(self._data):  # copy_ across devices, as torch's: a copy onto self's device
            data = move(data, device_of(self._data))
        self._data[...] = data
        autograd.wrote(self, value)
        return self
    if value._var is None or value._trace is not ctx:  # a constant or a captured tensor: give it a name here
        value = apply("broadcast_to", [value], shape=self.shape)
        ctx.views.pop(value._var, None)  # a fresh value, not a view of anything the user holds
    if self._var is not None and self._var in ctx.views:
        raise TraceError(f"{what}: an in-place write to a view ({self._var.type}, from reshape, slicing, ...) inside "
                         "a trace: eagerly it would change the tensor it views, a traced value cannot; write to that "
                         "tensor instead (x[idx] = v), or compute out of place")
    if self._var is not None:
        if self._trace is not ctx:
            raise TraceError(f"{what}: cannot update a value of an enclosing trace ({self._var.type}) in place "
                             "from inside a nested one; return the new value instead")
        self._var = value._var
    elif callable(self._in_trace) and self._in_trace() is ctx and not self._fresh_seed:  # a Parameter holds False
        # a tensor made inside the traced function: from now on it is this traced value
        self._data, self._var, self._trace, self._in_trace = None, value._var, ctx, None
    else:
        ctx.capture(self)  # a parameter even if never read, so that each call finds where to write
        ctx.writes[id(self)] = (self, value._var)
    return self


def _checked_kind(self: Tensor, value: Tensor, what: str) -> Tensor:
    if value.dtype != self.dtype and not np.can_cast(value.dtype, self.dtype, "same_kind"):
        raise TypeError(f"{what}: the result has dtype {value.dtype}, which cannot be stored in the "
                        f"{self.dtype} tensor in place (as in torch); use an out-of-place op")
    return write(self, value, what)


def _inplace(fn, what):
    def method(self, other):
        return _checked_kind(self, fn(self, other), what)
    method.__name__ = what
    method.__doc__ = f"In-place {fn.__name__}: `self = self {what[2:-2]} other` keeping self's object and dtype."
    return method


def copy_(self: Tensor, src) -> Tensor:
    """Copy src's values into self (broadcast to self's shape, cast to its dtype), as torch's copy_.

    >>> import tracer
    >>> t = tracer.zeros((2,))
    >>> t.copy_(tracer.tensor([1.0, 2.0])) is t, t.numpy().tolist()
    (True, [1.0, 2.0])
    """
    src = as_tensor(src)
    if src.shape != self.shape:
        src = apply("broadcast_to", [src], shape=self.shape)
    return write(self, src, "copy_")


def add_(self: Tensor, other, alpha=1) -> Tensor:
    """self += alpha * other, in place."""
    if _direct(self, other, alpha, np.add):
        return self
    return _checked_kind(self, add(self, other if alpha == 1 else multiply(other, alpha)), "add_")


def sub_(self: Tensor, other, alpha=1) -> Tensor:
    """self -= alpha * other, in place."""
    if _direct(self, other, alpha, np.subtract):
        return self
    return _checked_kind(self, subtract(self, other if alpha == 1 else multiply(other, alpha)), "sub_")


def _direct(self: Tensor, other, alpha, ufunc) -> bool:
    """add_/sub_ as NumPy's ufunc into self's buffer, when nothing but the values is at stake: two eager NumPy
    float tensors of one shape and dtype, neither recorded for autograd (`p.data.add_(p.grad, alpha=-lr)`, the
    SGD loop of pytorch/examples), a Python number alpha, no trace, no anomaly check. The values are the general
    path's (self op (other * alpha) in self's dtype, alpha a weak scalar), without its two temporaries and the
    copy back; the buffer's version moves on as there. False: take the general path."""
    if not isinstance(other, Tensor) or self._ag is not None or other._ag is not None:
        return False
    a, b = self._data, other._data
    if (type(a) is not np.ndarray or type(b) is not np.ndarray or a.dtype != b.dtype or a.shape != b.shape
            or a.dtype.kind != "f" or type(alpha) not in (int, float) or not a.flags.writeable
            or self._var is not None or other._var is not None or _anomaly.enabled or active_trace() is not None):
        return False
    ufunc(a, b if alpha == 1 else np.multiply(b, alpha), out=a)
    autograd.bump(a)
    return True


def mul_(self: Tensor, other) -> Tensor:
    """self *= other, in place."""
    return _checked_kind(self, multiply(self, other), "mul_")


def div_(self: Tensor, other) -> Tensor:
    """self /= other, in place."""
    return _checked_kind(self, divide(self, other), "div_")


def pow_(self: Tensor, exponent) -> Tensor:
    """self **= exponent, in place (the result must keep self's dtype kind, as torch's)."""
    return _checked_kind(self, power(self, exponent), "pow_")


def floor_divide_(self: Tensor, other) -> Tensor:
    """self //= other, in place: floor(self / other), as torch's floor_divide_ and Python's //."""
    return _checked_kind(self, floor_divide(self, other), "floor_divide_")


def remainder_(self: Tensor, other) -> Tensor:
    """self %= other, in place, with the sign of other (Python's and torch's %)."""
    return _checked_kind(self, remainder(self, other), "remainder_")


def _get_data(self: Tensor) -> Tensor:
    """torch's `.data`: the same values cut from the gradient, sharing self's buffer (`p.data.mul_(0.5)` changes p).
    Inside a trace it is a view (a stop_gradient), so a later in-place write to either is refused there, as
    for other views, rather than differ from eager."""
    if active_trace() is not None:
        return stop_gradient(self)
    return Tensor.wrap(self._concrete(".data"))


def _set_data(self: Tensor, value) -> None:
    """`p.data = t`: p takes t's values (its shape and dtype too) and shares its buffer, as torch's."""
    if active_trace() is not None:
        raise TraceError("t.data = value inside a trace: replacing a tensor's buffer cannot be recorded; assign "
                         "outside the traced function, or write in place (t.copy_(value))")
    self._concrete(".data = value")
    if not isinstance(value, Tensor):
        raise TypeError(f"t.data = value: value must be a Tensor, got {type(value).__name__}")
    self._data = value._concrete(".data = value")


def zero_(self: Tensor) -> Tensor:
    """Set every element to 0, in place."""
    return copy_(self, np.zeros((), self.dtype))


def fill_(self: Tensor, value) -> Tensor:
    """Set every element to value, in place."""
    return copy_(self, np.asarray(value, self.dtype))


METHODS = {
    "__iadd__": _inplace(add, "__iadd__"), "__isub__": _inplace(subtract, "__isub__"),
    "__imul__": _inplace(multiply, "__imul__"), "__itruediv__": _inplace(divide, "__itruediv__"),
    "__ipow__": _inplace(power, "__ipow__"), "__ifloordiv__": _inplace(floor_divide, "__ifloordiv__"),
    "__imod__": _inplace(remainder, "__imod__"), "pow_": pow_, "floor_divide_": floor_divide_,
    "remainder_": remainder_, "data": property(_get_data, _set_data),
    "copy_": copy_, "add_": add_, "sub_": sub_, "mul_": mul_, "div_": div_, "zero_": zero_, "fill_": fill_,
}
