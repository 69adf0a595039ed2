"""torch.distributions.Distribution on tracegrad tensors: shapes, argument validation with torch's messages,
and the defaults the subclasses override. Everything a subclass computes is a tracer op, so log_prob,
entropy, rsample and the moments differentiate through `autodiff.value_and_grad` and `loss.backward()`."""
from __future__ import annotations

import numbers

import numpy as np

import tracer
from tracer.tensor import active_trace

from . import constraints

_DEFAULT_VALIDATE = __debug__  # torch's default: validate unless Python runs with -O


def as_param(value, dtype=None) -> tracer.Tensor:
    """A parameter as a Tensor: Tensors as they are, Python numbers in `dtype` (float32 by default), arrays
    keep their dtype."""
    if isinstance(value, tracer.Tensor):
        return value
    if isinstance(value, numbers.Number):
        return tracer.tensor(np.asarray(value, dtype=dtype or "float32"))
    return tracer.tensor(value)


def broadcast_all(*values) -> list[tracer.Tensor]:
    """torch.distributions.utils.broadcast_all: Python numbers take the tensors' dtype (float32 when all are
    numbers), then every value is broadcast to one shape."""
    tensors = [v for v in values if isinstance(v, tracer.Tensor)]
    dtype = tensors[0].dtype if tensors else "float32"
    out = [as_param(v, dtype) for v in values]
    shape = tuple(np.broadcast_shapes(*(t.shape for t in out)))
    return [t if t.shape == shape else tracer.broadcast_to(t, shape) for t in out]


def _concrete(t) -> bool:
    return active_trace() is None and isinstance(t, tracer.Tensor)


def _numel(t) -> int:
    return int(np.prod(t.shape))


def shown(t):
    """A tensor as torch's messages show it: a one-element tensor as its number, else the tensor."""
    return t.numpy().reshape(-1)[0].item() if _numel(t) == 1 else t


def _size(shape) -> str:
    return f"torch.Size({list(shape)})"


class Distribution:
    """Base of every distribution: `batch_shape`, `event_shape`, `sample(sample_shape)`, `rsample`,
    `log_prob`, `entropy`, `mean`, `mode`, `variance`, `stddev`, `expand`, as torch's."""

    has_rsample = False
    has_enumerate_support = False
    arg_constraints: dict = {}
    support = None

    @staticmethod
    def set_default_validate_args(value: bool) -> None:
        """torch's switch for the default of validate_args."""
        if value not in (True, False):
            raise ValueError("validate_args must be a bool")
        global _DEFAULT_VALIDATE
        _DEFAULT_VALIDATE = value

    def __init__(self, batch_shape=(), event_shape=(), validate_args=None):
        self._batch_shape = tuple(batch_shape)
        self._event_shape = tuple(event_shape)
        self._validate_args = _DEFAULT_VALIDATE if validate_args is None else validate_args
        if self._validate_args:
            for param, constraint in self.arg_constraints.items():
                if constraint is None or param not in self.__dict__:
                    continue  # dependent, or a lazily derived parameter (probs from logits)
                value = self.__dict__[param]
                if not _concrete(value):
                    continue
                valid = np.asarray(constraint.check(np.asarray(value.numpy())))
                if not valid.all():
                    raise ValueError(
                        f"Expected parameter {param} ({type(value).__name__} of shape {tuple(value.shape)}) "
                        f"of distribution {self!r} to satisfy the constraint {constraint!r}, "
                        f"but found invalid values:\n{shown(value)}")

    # ---------------------------------------------------------------- shapes

    @property
    def batch_shape(self) -> tuple:
        return self._batch_shape

    @property
    def event_shape(self) -> tuple:
        return self._event_shape

    def _extended_shape(self, sample_shape=()) -> tuple:
        if isinstance(sample_shape, int):
            sample_shape = (sample_shape,)
        return tuple(sample_shape) + self._batch_shape + self._event_shape

    def expand(self, batch_shape, _instance=None):
        """The same distribution with its parameters broadcast to `batch_shape` (views, no copies)."""
        batch_shape = tuple(batch_shape)
        new = object.__new__(type(self))
        for name, value in self.__dict__.items():
            if isinstance(value, tracer.Tensor) and name in self._expandable():
                tail = value.shape[len(self._batch_shape):]
                value = tracer.broadcast_to(value, batch_shape + tuple(tail))
            new.__dict__[name] = value
        new._batch_shape = batch_shape
        return new

    def _expandable(self) -> tuple:
        """The attributes that carry the batch shape (and then their own event dims)."""
        return tuple(self.arg_constraints)

    # ---------------------------------------------------------------- what subclasses define

    def rsample(self, sample_shape=()):
        raise NotImplementedError(f"{type(self).__name__} has no rsample (not reparameterizable)")

    def sample(self, sample_shape=()):
        """A draw of shape sample_shape + batch_shape + event_shape, with no gradient (torch: under no_grad)."""
        return tracer.stop_gradient(self.rsample(sample_shape))

    def sample_n(self, n: int):
        return self.sample((n,))

    def log_prob(self, value):
        raise NotImplementedError(f"{type(self).__name__}.log_prob")

    def entropy(self):
        raise NotImplementedError(f"{type(self).__name__}.entropy")

    def cdf(self, value):
        raise NotImplementedError(f"{type(self).__name__}.cdf")

    @property
    def mean(self):
        raise NotImplementedError(f"{type(self).__name__}.mean")

    @property
    def mode(self):
        raise NotImplementedError(f"{type(self).__name__}.mode")

    @property
    def variance(self):
        raise NotImplementedError(f"{type(self).__name__}.variance")

    @property
    def stddev(self):
        return tracer.sqrt(self.variance)

    def perplexity(self):
        return tracer.exp(self.entropy())

    # ---------------------------------------------------------------- value checks

    def _validate_sample(self, value) -> None:
        if not isinstance(value, tracer.Tensor):
            raise ValueError("The value argument to log_prob must be a Tensor")
        start = len(value.shape) - len(self._event_shape)
        if tuple(value.shape[start:]) != self._event_shape:
            raise ValueError(f"The right-most size of value must match event_shape: {_size(value.shape)} vs "
                             f"{_size(self._event_shape)}.")
        expected = self._batch_shape + self._event_shape
        for i, j in zip(reversed(value.shape), reversed(expected), strict=False):
            if i != 1 and j != 1 and i != j:
                raise ValueError(f"Value is not broadcastable with batch_shape+event_shape: {_size(value.shape)} vs "
                                 f"{_size(expected)}.")
        support = self.support
        if support is None or not _concrete(value):
            return
        valid = np.asarray(support.check(np.asarray(value.numpy())))
        if not valid.all():
            raise ValueError(f"Expected value argument ({type(value).__name__} of shape {tuple(value.shape)}) "
                             f"to be within the support ({support!r}) of the distribution {self!r}, "
                             f"but found invalid values:\n{shown(value)}")

    def __repr__(self):
        names = [k for k in self.arg_constraints if k in self.__dict__]
        values = [self.__dict__[k] for k in names]
        args = ", ".join(f"{k}: {shown(v) if _numel(v) == 1 else _size(v.shape)}" for k, v in zip(names, values,
                                                                                                    strict=True))
        return f"{type(self).__name__}({args})"


__all__ = ["Distribution", "as_param", "broadcast_all", "constraints", "shown"]
