"""MultivariateNormal, as torch.distributions': from covariance_matrix, precision_matrix or scale_tril,
everything through the lower Cholesky factor L (linalg.cholesky and linalg.solve_triangular, which
differentiate): log_prob = -(k log 2 pi + |L^-1 (x - loc)|^2) / 2 - sum log diag L."""
from __future__ import annotations

import math

import numpy as np

import tracer
from tracer.decomp import cholesky, solve_triangular

from . import constraints
from .distribution import Distribution, as_param


def _mT(x):
    return tracer.transpose(x, -1, -2)


def batch_mahalanobis(L, x):
    """|L^-1 x|^2 over the last axis, with L's and x's batch dims broadcast."""
    batch = tuple(np.broadcast_shapes(L.shape[:-2], x.shape[:-1]))
    n = x.shape[-1]
    y = solve_triangular(tracer.broadcast_to(L, batch + (n, n)), tracer.broadcast_to(x, batch + (n,)).unsqueeze(-1),
                         upper=False)
    return (y.squeeze(-1) ** 2).sum(-1)


def half_log_det(L):
    return tracer.log(tracer.diagonal(L, 0, -2, -1)).sum(-1)


def _precision_to_scale_tril(P):
    """torch's: L with L L^T = P^-1, from the Cholesky factor of P flipped."""
    flipped = cholesky(tracer.flip(P, (-2, -1)))
    l_inv = _mT(tracer.flip(flipped, (-2, -1)))
    eye = tracer.broadcast_to(tracer.eye(P.shape[-1], dtype=P.dtype), l_inv.shape)
    return solve_triangular(l_inv, eye, upper=False)


class MultivariateNormal(Distribution):
    """MultivariateNormal(loc, covariance_matrix=None, precision_matrix=None, scale_tril=None)."""

    arg_constraints = {"loc": constraints.real_vector, "covariance_matrix": constraints.positive_definite,
                       "precision_matrix": constraints.positive_definite, "scale_tril": constraints.lower_cholesky}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc, covariance_matrix=None, precision_matrix=None, scale_tril=None, validate_args=None):
        loc = as_param(loc)
        if loc.ndim < 1:
            raise ValueError("loc must be at least one-dimensional.")
        given = [m for m in (covariance_matrix, precision_matrix, scale_tril) if m is not None]
        if len(given) != 1:
            raise ValueError("Exactly one of covariance_matrix or precision_matrix or scale_tril may be specified.")
        matrix = as_param(given[0], loc.dtype)
        name = ("scale_tril" if scale_tril is not None else
                "covariance_matrix" if covariance_matrix is not None else "precision_matrix")
        if matrix.ndim < 2:
            raise ValueError(f"{name} matrix must be at least two-dimensional, with optional leading batch dimensions")
        batch = tuple(np.broadcast_shapes(matrix.shape[:-2], loc.shape[:-1]))
        n = loc.shape[-1]
        setattr(self, name, tracer.broadcast_to(matrix, batch + (n, n)))
        self.loc = tracer.broadcast_to(loc, batch + (n,))
        super().__init__(batch, (n,), validate_args=validate_args)
        if scale_tril is not None:
            self._unbroadcasted_scale_tril = matrix
        elif covariance_matrix is not None:
            self._unbroadcasted_scale_tril = cholesky(matrix)
        else:
            self._unbroadcasted_scale_tril = _precision_to_scale_tril(matrix)

    def _expandable(self):
        return ("loc", "covariance_matrix", "precision_matrix", "scale_tril")

    def __getattr__(self, name):
        given = self.__dict__
        if "_unbroadcasted_scale_tril" not in given or name not in self._expandable():
            raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")
        L = given["_unbroadcasted_scale_tril"]
        shape = self._batch_shape + self._event_shape + self._event_shape
        if name == "scale_tril":
            return tracer.broadcast_to(L, shape)
        if name == "covariance_matrix":
            return tracer.broadcast_to(L @ _mT(L), shape)
        inverse = solve_triangular(L, tracer.broadcast_to(tracer.eye(L.shape[-1], dtype=L.dtype), L.shape), upper=False)
        return tracer.broadcast_to(_mT(inverse) @ inverse, shape)  # precision = L^-T L^-1

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        L = self._unbroadcasted_scale_tril
        return tracer.broadcast_to((L ** 2).sum(-1), self._batch_shape + self._event_shape)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        eps = tracer.randn(shape, dtype=self.loc.dtype)
        return self.loc + (self._unbroadcasted_scale_tril @ eps.unsqueeze(-1)).squeeze(-1)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        diff = value - self.loc
        m = batch_mahalanobis(self._unbroadcasted_scale_tril, diff)
        return -0.5 * (self._event_shape[0] * math.log(2 * math.pi) + m) - half_log_det(self._unbroadcasted_scale_tril)

    def entropy(self):
        h = 0.5 * self._event_shape[0] * (1.0 + math.log(2 * math.pi)) + half_log_det(self._unbroadcasted_scale_tril)
        return h if h.shape == self._batch_shape else tracer.broadcast_to(h, self._batch_shape)
