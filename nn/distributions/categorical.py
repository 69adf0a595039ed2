"""Categorical and Bernoulli, as torch.distributions': from probs (normalised) or logits, with torch's
clamping of probs into logits (eps = the dtype's machine epsilon)."""
from __future__ import annotations

import numpy as np

import tracer
from nn import functional as F

from . import constraints
from .distribution import Distribution, as_param, broadcast_all


def _one_of(probs, logits):
    if (probs is None) == (logits is None):
        raise ValueError("Either `probs` or `logits` must be specified, but not both.")


def _eps(t):
    return float(np.finfo(t.dtype).eps)


def probs_to_logits(probs, is_binary: bool = False):
    """torch.distributions.utils.probs_to_logits: log of probs clamped into [eps, 1 - eps]."""
    eps = _eps(probs)
    p = tracer.clamp(probs, eps, 1 - eps)
    return tracer.log(p) - tracer.log1p(-p) if is_binary else tracer.log(p)


class Categorical(Distribution):
    """Categorical(probs=None, logits=None): integer outcomes 0..K-1 over the last axis."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        _one_of(probs, logits)
        if probs is not None:
            probs = as_param(probs)
            if probs.ndim < 1:
                raise ValueError("`probs` parameter must be at least one-dimensional.")
            self.probs = probs / probs.sum(-1, keepdim=True)
        else:
            logits = as_param(logits)
            if logits.ndim < 1:
                raise ValueError("`logits` parameter must be at least one-dimensional.")
            self.logits = logits - logits.logsumexp(-1, keepdim=True)
        self._param = self.probs if probs is not None else self.logits
        self._num_events = self._param.shape[-1]
        super().__init__(self._param.shape[:-1], validate_args=validate_args)

    def __getattr__(self, name):  # the lazy parameter: logits from probs or probs from logits
        given = self.__dict__
        if name == "logits" and "probs" in given:
            return probs_to_logits(given["probs"])
        if name == "probs" and "logits" in given:
            return tracer.softmax(given["logits"], -1)
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def _expandable(self):
        return ("probs", "logits", "_param")

    @property
    def support(self):
        return constraints.integer_interval(0, self._num_events - 1)

    @property
    def param_shape(self):
        return self._param.shape

    @property
    def mean(self):
        return tracer.full(self._extended_shape(), float("nan"), dtype=self._param.dtype)

    @property
    def mode(self):
        return self.probs.argmax(-1)

    @property
    def variance(self):
        return self.mean

    def sample(self, sample_shape=()):
        """int64 draws of shape sample_shape + batch_shape, by inverting the CDF at uniforms."""
        shape = self._extended_shape(sample_shape)
        cdf = tracer.stop_gradient(tracer.cumsum(self.probs, -1))
        u = tracer.rand(shape + (1,), dtype=cdf.dtype) * cdf[..., -1:]
        index = tracer.astype(cdf <= u, "int64").sum(-1)
        return tracer.clamp(index, 0, self._num_events - 1)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        value = tracer.astype(as_param(value), "int64").unsqueeze(-1)
        logits = self.logits
        shape = tuple(np.broadcast_shapes(value.shape, logits.shape))
        value = tracer.broadcast_to(value, shape[:-1] + (1,))
        logits = tracer.broadcast_to(logits, shape)
        return tracer.gather(logits, -1, value).squeeze(-1)

    def entropy(self):
        logits = tracer.clamp(self.logits, min=float(np.finfo(self._param.dtype).min))
        return -(logits * self.probs).sum(-1)

    def enumerate_support(self, expand: bool = True):
        values = tracer.arange(self._num_events).reshape((-1,) + (1,) * len(self._batch_shape))
        return tracer.broadcast_to(values, (-1,) + self._batch_shape) if expand else values


class Bernoulli(Distribution):
    """Bernoulli(probs=None, logits=None): 0 or 1 (floats in the parameter's dtype)."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.boolean
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        _one_of(probs, logits)
        if probs is not None:
            (self.probs,) = broadcast_all(probs)
        else:
            (self.logits,) = broadcast_all(logits)
        self._param = self.probs if probs is not None else self.logits
        super().__init__(self._param.shape, validate_args=validate_args)

    def __getattr__(self, name):
        given = self.__dict__
        if name == "logits" and "probs" in given:
            return probs_to_logits(given["probs"], is_binary=True)
        if name == "probs" and "logits" in given:
            return tracer.sigmoid(given["logits"])
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def _expandable(self):
        return ("probs", "logits", "_param")

    @property
    def param_shape(self):
        return self._param.shape

    @property
    def mean(self):
        return self.probs

    @property
    def mode(self):
        p = self.probs
        half = float("nan") * tracer.astype(p == 0.5, p.dtype)
        return tracer.where(p == 0.5, half, tracer.astype(p >= 0.5, p.dtype))

    @property
    def variance(self):
        return self.probs * (1 - self.probs)

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        p = tracer.stop_gradient(tracer.broadcast_to(self.probs, shape))
        return tracer.astype(tracer.rand(shape, dtype=p.dtype) < p, p.dtype)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        return -F.binary_cross_entropy_with_logits(logits, value, reduction="none")

    def entropy(self):
        return F.binary_cross_entropy_with_logits(self.logits, self.probs, reduction="none")

    def enumerate_support(self, expand: bool = True):
        values = tracer.arange(2, dtype=self._param.dtype).reshape((-1,) + (1,) * len(self._batch_shape))
        return tracer.broadcast_to(values, (2,) + self._batch_shape) if expand else values
