"""Gamma, Dirichlet and Beta, as torch.distributions', on tracer.lgamma / digamma (ir/ops/gamma_fns.py).

Draws come from the random.gamma op (Marsaglia-Tsang). `rsample` differentiates them with torch's implicit
reparameterisation: d x / d alpha = -(dF/dalpha) / (dF/dx), F the Gamma CDF, the op
random.standard_gamma_grad (ir/ops/gamma_grad.py, torch._standard_gamma_grad's numbers). The draw enters the
program as x + (alpha - stop_gradient(alpha)) * stop_gradient(dx/dalpha): its value is x exactly and its
gradient with respect to alpha is dx/dalpha, eagerly, with backward() and in a compiled step. Dirichlet and Beta
normalise such Gamma draws, so their gradients follow from the Gammas' by the chain rule: a valid
reparameterisation with the same expected gradients as torch's, which differentiates its Dirichlet draw by its
own approximation (torch._dirichlet_grad) instead, so per-draw gradients differ from torch's.
"""
from __future__ import annotations

import numpy as np

import tracer
from tracer.gamma_fns import standard_gamma
from tracer.tensor import apply

from . import constraints
from .distribution import Distribution, as_param, broadcast_all


def standard_gamma_rsample(alpha):
    """One Gamma(alpha, 1) draw per element of alpha that differentiates with respect to alpha (see above)."""
    x = standard_gamma(alpha)
    fixed = tracer.stop_gradient(alpha)
    dx = apply("random.standard_gamma_grad", [fixed, x])
    return x + (alpha - fixed) * dx


def _tiny(t):
    return float(np.finfo(t.dtype).tiny)


class Gamma(Distribution):
    """Gamma(concentration, rate): density x^(a-1) e^(-r x) r^a / Gamma(a)."""

    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, concentration, rate, validate_args=None):
        self.concentration, self.rate = broadcast_all(concentration, rate)
        super().__init__(self.concentration.shape, validate_args=validate_args)

    @property
    def mean(self):
        return self.concentration / self.rate

    @property
    def mode(self):
        return tracer.clamp((self.concentration - 1) / self.rate, min=0)

    @property
    def variance(self):
        return self.concentration / self.rate ** 2

    def rsample(self, sample_shape=()):
        """A draw that differentiates with respect to concentration and rate (torch's implicit gradient)."""
        shape = self._extended_shape(sample_shape)
        draw = standard_gamma_rsample(tracer.broadcast_to(self.concentration, shape))
        return tracer.clamp(draw / tracer.broadcast_to(self.rate, shape), min=_tiny(draw))

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        draw = standard_gamma(tracer.broadcast_to(self.concentration, shape))
        rate = tracer.stop_gradient(tracer.broadcast_to(self.rate, shape))
        return tracer.clamp(draw / rate, min=_tiny(draw))

    def log_prob(self, value):
        value = as_param(value, self.rate.dtype)
        if self._validate_args:
            self._validate_sample(value)
        a, r = self.concentration, self.rate
        return tracer.xlogy(a, r) + tracer.xlogy(a - 1, value) - r * value - tracer.lgamma(a)

    def entropy(self):
        a = self.concentration
        return a - tracer.log(self.rate) + tracer.lgamma(a) + (1.0 - a) * tracer.digamma(a)

    def cdf(self, value):
        raise NotImplementedError("Gamma.cdf needs the regularized incomplete gamma function (torch.special.gammainc), "
                                  "which tracegrad does not have")


class Dirichlet(Distribution):
    """Dirichlet(concentration): points of the simplex over the last axis."""

    arg_constraints = {"concentration": constraints._IndependentPositive()}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, concentration, validate_args=None):
        concentration = as_param(concentration)
        if concentration.ndim < 1:
            raise ValueError("`concentration` parameter must be at least one-dimensional.")
        self.concentration = concentration
        super().__init__(concentration.shape[:-1], concentration.shape[-1:], validate_args=validate_args)

    @property
    def mean(self):
        return self.concentration / self.concentration.sum(-1, keepdim=True)

    @property
    def mode(self):
        c = self.concentration
        k = c.shape[-1]
        inner = tracer.clamp(c - 1, min=0)
        inner = inner / inner.sum(-1, keepdim=True)
        # where every alpha < 1, torch takes the vertex at the argmax of the 0/0 NaN row: always the first one
        corner = tracer.astype(tracer.arange(k) == 0, c.dtype) + 0 * c
        return tracer.where((c < 1).all(-1, keepdim=True), corner, inner)

    @property
    def variance(self):
        c = self.concentration
        c0 = c.sum(-1, keepdim=True)
        return c * (c0 - c) / (c0 ** 2 * (c0 + 1))

    def rsample(self, sample_shape=()):
        """Normalised Gamma draws that differentiate with respect to concentration (see the module docstring)."""
        shape = self._extended_shape(sample_shape)
        draw = standard_gamma_rsample(tracer.broadcast_to(self.concentration, shape))
        return tracer.clamp(draw / draw.sum(-1, keepdim=True), _tiny(draw), 1 - float(np.finfo(draw.dtype).eps))

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        draw = standard_gamma(tracer.broadcast_to(self.concentration, shape))
        return tracer.clamp(draw / draw.sum(-1, keepdim=True), _tiny(draw), 1 - float(np.finfo(draw.dtype).eps))

    def log_prob(self, value):
        value = as_param(value, self.concentration.dtype)
        if self._validate_args:
            self._validate_sample(value)
        c = self.concentration
        return (tracer.xlogy(c - 1.0, value).sum(-1) + tracer.lgamma(c.sum(-1)) - tracer.lgamma(c).sum(-1))

    def entropy(self):
        c = self.concentration
        k = c.shape[-1]
        a0 = c.sum(-1)
        return (tracer.lgamma(c).sum(-1) - tracer.lgamma(a0) - (k - a0) * tracer.digamma(a0)
                - ((c - 1.0) * tracer.digamma(c)).sum(-1))


class Beta(Distribution):
    """Beta(concentration1, concentration0): a Dirichlet over (x, 1 - x), as torch builds it."""

    arg_constraints = {"concentration1": constraints.positive, "concentration0": constraints.positive}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, concentration1, concentration0, validate_args=None):
        self.concentration1, self.concentration0 = broadcast_all(concentration1, concentration0)
        self._dirichlet = Dirichlet(tracer.stack([self.concentration1, self.concentration0], -1),
                                    validate_args=validate_args)
        super().__init__(self._dirichlet.batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        batch_shape = tuple(batch_shape)
        return Beta(tracer.broadcast_to(self.concentration1, batch_shape),
                    tracer.broadcast_to(self.concentration0, batch_shape), validate_args=False)

    @property
    def mean(self):
        return self.concentration1 / (self.concentration1 + self.concentration0)

    @property
    def mode(self):
        return self._dirichlet.mode[..., 0]

    @property
    def variance(self):
        total = self.concentration1 + self.concentration0
        return self.concentration1 * self.concentration0 / (total ** 2 * (total + 1))

    def rsample(self, sample_shape=()):
        """The first coordinate of the Dirichlet's rsample: differentiates with respect to both concentrations."""
        return self._dirichlet.rsample(sample_shape)[..., 0]

    def sample(self, sample_shape=()):
        return self._dirichlet.sample(sample_shape)[..., 0]

    def log_prob(self, value):
        value = as_param(value, self.concentration1.dtype)
        if self._validate_args:
            self._validate_sample(value)
        return self._dirichlet.log_prob(tracer.stack([value, 1.0 - value], -1))

    def entropy(self):
        return self._dirichlet.entropy()
