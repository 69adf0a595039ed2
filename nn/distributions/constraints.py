"""The parameter and support constraints of torch.distributions.constraints, with torch's reprs (they appear
in the ValueError messages), checked on concrete values (inside a trace nothing is checked: there are no
values to read)."""
from __future__ import annotations

import numpy as np


class Constraint:
    """A set of valid values; `check(array)` is the elementwise (or per-event) boolean test."""

    event_dim = 0

    def check(self, a):
        raise NotImplementedError(f"{type(self).__name__}.check")

    def __repr__(self):
        return f"{type(self).__name__[1:]}()"


class _Real(Constraint):
    def check(self, a):
        return a == a  # NaN is not real


class _Boolean(Constraint):
    def check(self, a):
        return (a == 0) | (a == 1)


class _GreaterThan(Constraint):
    def __init__(self, lower_bound):
        self.lower_bound = lower_bound

    def check(self, a):
        return a > self.lower_bound

    def __repr__(self):
        return f"GreaterThan(lower_bound={self.lower_bound})"


class _GreaterThanEq(_GreaterThan):
    def check(self, a):
        return a >= self.lower_bound

    def __repr__(self):
        return f"GreaterThanEq(lower_bound={self.lower_bound})"


class _Interval(Constraint):
    def __init__(self, lower_bound, upper_bound):
        self.lower_bound, self.upper_bound = lower_bound, upper_bound

    def check(self, a):
        return (self.lower_bound <= a) & (a <= self.upper_bound)

    def __repr__(self):
        return f"Interval(lower_bound={self.lower_bound}, upper_bound={self.upper_bound})"


class _HalfOpenInterval(_Interval):
    def check(self, a):
        return (self.lower_bound <= a) & (a < self.upper_bound)

    def __repr__(self):
        return f"HalfOpenInterval(lower_bound={self.lower_bound}, upper_bound={self.upper_bound})"


class _IntegerInterval(_Interval):
    def check(self, a):
        return (a % 1 == 0) & super().check(a)

    def __repr__(self):
        return f"IntegerInterval(lower_bound={self.lower_bound}, upper_bound={self.upper_bound})"


class _Simplex(Constraint):
    event_dim = 1

    def check(self, a):
        return np.all(a >= 0, axis=-1) & (np.abs(a.sum(-1) - 1) < 1e-6)


class _IndependentReal(Constraint):
    event_dim = 1

    def check(self, a):
        return np.all(a == a, axis=-1)

    def __repr__(self):
        return "IndependentConstraint(Real(), 1)"


class _LowerCholesky(Constraint):
    event_dim = 2

    def check(self, a):
        lower = np.all(np.tril(a) == a, axis=(-2, -1))
        return lower & np.all(np.diagonal(a, axis1=-2, axis2=-1) > 0, axis=-1)


class _PositiveDefinite(Constraint):
    event_dim = 2

    def check(self, a):
        symmetric = np.all(np.isclose(a, np.swapaxes(a, -1, -2), atol=1e-6), axis=(-2, -1))
        eig = np.linalg.eigvalsh(np.where(np.isfinite(a), a, 0.0)) if a.size else np.ones(a.shape[:-1])
        return symmetric & np.all(eig > 0, axis=-1) & np.all(np.isfinite(a), axis=(-2, -1))


real = _Real()
boolean = _Boolean()
positive = _GreaterThan(0.0)
nonnegative = _GreaterThanEq(0.0)
unit_interval = _Interval(0.0, 1.0)
simplex = _Simplex()
real_vector = _IndependentReal()
lower_cholesky = _LowerCholesky()
positive_definite = _PositiveDefinite()
dependent = None  # the support depends on the parameters (Uniform): checked by the distribution itself


def interval(low, high):
    return _Interval(low, high)


def half_open_interval(low, high):
    return _HalfOpenInterval(low, high)


def integer_interval(low, high):
    return _IntegerInterval(low, high)


__all__ = ["Constraint", "boolean", "half_open_interval", "integer_interval", "interval", "lower_cholesky",
           "nonnegative", "positive", "positive_definite", "real", "real_vector", "simplex", "unit_interval"]


class _IndependentPositive(Constraint):
    event_dim = 1

    def check(self, a):
        return np.all(a > 0, axis=-1)

    def __repr__(self):
        return "IndependentConstraint(GreaterThan(lower_bound=0.0), 1)"
