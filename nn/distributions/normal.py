"""Normal and Uniform, as torch.distributions'; rsample = loc + scale * eps, low + (high - low) * u."""
from __future__ import annotations

import math

import numpy as np

import tracer
from tracer.tensor import active_trace

from . import constraints
from .distribution import Distribution, broadcast_all, shown


class Normal(Distribution):
    """Normal(loc, scale): the Gaussian of mean loc and standard deviation scale."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        super().__init__(self.loc.shape, validate_args=validate_args)

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def stddev(self):
        return self.scale

    @property
    def variance(self):
        return self.scale ** 2

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        eps = tracer.randn(shape, dtype=self.loc.dtype)
        return self.loc + eps * self.scale

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        var = self.scale ** 2
        return -((value - self.loc) ** 2) / (2 * var) - tracer.log(self.scale) - math.log(math.sqrt(2 * math.pi))

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 0.5 * (1 + tracer.erf((value - self.loc) / (self.scale * math.sqrt(2))))

    def icdf(self, value):
        return self.loc + self.scale * tracer.erfinv(2 * value - 1) * math.sqrt(2)

    def entropy(self):
        return 0.5 + 0.5 * math.log(2 * math.pi) + tracer.log(self.scale)


class Uniform(Distribution):
    """Uniform(low, high): the half-open interval [low, high)."""

    arg_constraints = {"low": constraints.dependent, "high": constraints.dependent}
    has_rsample = True

    def __init__(self, low, high, validate_args=None):
        self.low, self.high = broadcast_all(low, high)
        super().__init__(self.low.shape, validate_args=validate_args)
        if self._validate_args and active_trace() is None and not np.all(self.low.numpy() < self.high.numpy()):
            raise ValueError(
                f"Expected parameter low ({type(self.low).__name__} of shape {tuple(self.low.shape)}) of "
                f"distribution {self!r} to satisfy the constraint LessThan(upper_bound={shown(self.high)}), "
                f"but found invalid values:\n{shown(self.low)}")

    @property
    def support(self):
        return _Between(self)

    @property
    def mean(self):
        return (self.high + self.low) / 2

    @property
    def mode(self):
        return self.high * float("nan")

    @property
    def stddev(self):
        return (self.high - self.low) / 12 ** 0.5

    @property
    def variance(self):
        return (self.high - self.low) ** 2 / 12

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        rand = tracer.rand(shape, dtype=self.low.dtype)
        return self.low + rand * (self.high - self.low)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        inside = tracer.astype((self.low <= value) & (self.high > value), self.low.dtype)
        return tracer.log(inside) - tracer.log(self.high - self.low)

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return tracer.clamp((value - self.low) / (self.high - self.low), 0, 1)

    def entropy(self):
        return tracer.log(self.high - self.low)


class _Between(constraints.Constraint):
    """Uniform's support, [low, high): torch's Interval with the distribution's tensors as bounds."""

    def __init__(self, dist):
        self.dist = dist

    def check(self, a):
        return (self.dist.low.numpy() <= a) & (a <= self.dist.high.numpy())  # closed, as torch's check

    def __repr__(self):
        return f"Interval(lower_bound={shown(self.dist.low)}, upper_bound={shown(self.dist.high)})"
