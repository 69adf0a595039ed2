"""The autograd attributes of a Tensor, as torch's: `.requires_grad`, `.grad`, `.is_leaf`, `.grad_fn`, `.data`,
`requires_grad_()`, `retain_grad()`, `backward()` (installed on Tensor by tracer/__init__.py)."""
from __future__ import annotations

import warnings
import weakref

import numpy as np

from .autograd import LEAF, Node, _impl, after_backward, resolve
from .tensor import Tensor, TraceError


def _concrete_float(t, what: str) -> None:
    if t._var is not None:
        raise TraceError(f"{what} of a traced value: inside a trace, gradients come from autodiff.grad / "
                         "value_and_grad, which differentiate the whole traced function")
    if np.dtype(t._data.dtype).kind != "f":
        raise RuntimeError("only Tensors of floating point and complex dtype can require gradients")


def _get_requires_grad(self) -> bool:
    return self._ag is not None


def _set_requires_grad(self, value) -> None:
    value = bool(value)
    if isinstance(self._ag, Node):
        if not value:
            raise RuntimeError("you can only change requires_grad flags of leaf variables. If you want to use a "
                               "computed variable in a subgraph that doesn't require differentiation use "
                               "var_no_grad = var.detach().")
        return
    if value:
        _concrete_float(self, "requires_grad")
    self._ag = LEAF if value else None


def made(t, requires_grad: bool):
    """A constructor's result, a leaf that requires grad when asked (`zeros(3, requires_grad=True)`); inside a
    trace the flag changes nothing (the trace records every op)."""
    if requires_grad and t._var is None:
        _set_requires_grad(t, True)
    return t


def requires_grad_(self, requires_grad: bool = True):
    """Make this leaf require grad (or stop, with False); returns self, as torch's."""
    _set_requires_grad(self, requires_grad)
    return self


_NON_LEAF_GRAD = ("The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. Its .grad attribute "
                  "won't be populated during autograd.backward(). If you indeed want the .grad field to be populated "
                  "for a non-leaf Tensor, use .retain_grad() on the non-leaf Tensor.")


def _get_grad(self):
    if self._grad is None and isinstance(self._ag, Node) and not _retains_grad(self):
        warnings.warn(_NON_LEAF_GRAD, UserWarning, stacklevel=2)  # torch's warning: h.grad stays None
    return self._grad


def _set_grad(self, value) -> None:
    if value is not None:
        if not isinstance(value, Tensor):
            raise TypeError(f"assigned grad expected to be a Tensor or None but got grad of type "
                            f"{type(value).__name__}")
        if value.shape != self.shape:
            raise RuntimeError(f"assigned grad has data of a different size: {value.shape} for a tensor of "
                               f"shape {self.shape}")
        if value.dtype != self.dtype:
            raise RuntimeError(f"assigned grad has data of a different type: {value.dtype} for a {self.dtype} "
                               "tensor")
    self._grad = value


def _is_leaf(self) -> bool:
    return not isinstance(self._ag, Node)


def _grad_fn(self):
    return self._ag if isinstance(self._ag, Node) else None


def retain_grad(self) -> None:
    """Keep .grad on this non-leaf after backward (leaves keep theirs anyway)."""
    if self._ag is None:
        raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
    if isinstance(self._ag, Node):
        tape, slot = resolve(self._ag)
        tape.retained[slot] = weakref.ref(self)


def _retains_grad(self) -> bool:
    if not isinstance(self._ag, Node):
        return False
    tape, slot = resolve(self._ag)
    ref = tape.retained.get(slot)
    return ref is not None and ref() is self


def tensor_backward(self, gradient=None, retain_graph=None, create_graph: bool = False, inputs=None) -> None:
    """Accumulate d(self)/d(leaf) (times `gradient`, needed when self is not a scalar) into every leaf's .grad.

    >>> import tracer, autodiff
    >>> w = tracer.tensor([1.0, 2.0], requires_grad=True)
    >>> (w * w).sum().backward()
    >>> w.grad.tolist()
    [2.0, 4.0]
    """
    _impl().backward([self], None if gradient is None else [gradient], retain_graph, create_graph, inputs)
    after_backward(retain_graph, create_graph)


def detach_(self):
    """Detach this tensor from the graph that made it, in place: it becomes a leaf that does not require grad."""
    if self._var is None:
        self._ag = None
    return self


def _data(self):
    """The same values, untracked (shares the buffer); `p.data = t` replaces p's values, as torch's."""
    if self._var is not None:
        return self
    return Tensor.wrap(self._data)


def _set_data(self, value) -> None:
    if not isinstance(value, Tensor) or value._data is None:
        raise TypeError(f"data must be set to a concrete Tensor, got {type(value).__name__}")
    self._data = value._data


PROPERTIES = {
    "requires_grad": property(_get_requires_grad, _set_requires_grad, doc="Whether ops on it are recorded."),
    "grad": property(_get_grad, _set_grad, doc="The gradient backward() accumulated (None until then)."),
    "is_leaf": property(_is_leaf, doc="False for the result of a recorded op, as torch's."),
    "grad_fn": property(_grad_fn, doc="The recorded op that made this tensor (None for leaves)."),
    "retains_grad": property(_retains_grad, doc="Whether retain_grad() was called on this non-leaf."),
    "data": property(_data, _set_data, doc="The values as an untracked tensor sharing the buffer."),
}

METHODS = {"requires_grad_": requires_grad_, "retain_grad": retain_grad, "backward": tensor_backward,
           "detach_": detach_}
