"""kl_divergence(p, q) and register_kl, as torch.distributions.kl: the most specific registered pair by the
classes' method resolution order, and torch's closed forms for the common pairs."""
from __future__ import annotations

import math

import numpy as np

import tracer
from nn import functional as F

from .categorical import Bernoulli, Categorical
from .gamma_family import Beta, Dirichlet, Gamma
from .independent import Independent, _sum_right
from .mvn import MultivariateNormal, batch_mahalanobis, half_log_det
from .normal import Normal, Uniform

_KL_REGISTRY: dict = {}


def register_kl(type_p, type_q):
    """Decorator: `@register_kl(P, Q) def kl(p, q)` makes kl_divergence use it for p of type P, q of type Q."""
    if not (isinstance(type_p, type) and isinstance(type_q, type)):
        raise TypeError(f"Expected type_p and type_q to be Distribution subclasses but got {type_p} and {type_q}")

    def decorator(fn):
        _KL_REGISTRY[type_p, type_q] = fn
        return fn
    return decorator


def _dispatch(type_p, type_q):
    matches = [(p, q) for p, q in _KL_REGISTRY if issubclass(type_p, p) and issubclass(type_q, q)]
    if not matches:
        return None
    rank = {(p, q): (type_p.__mro__.index(p), type_q.__mro__.index(q)) for p, q in matches}
    return _KL_REGISTRY[min(matches, key=lambda m: rank[m])]


def kl_divergence(p, q):
    """KL(p || q), batched over the distributions' batch shapes."""
    fn = _dispatch(type(p), type(q))
    if fn is None:
        raise NotImplementedError(f"No KL(p || q) is implemented for p type {type(p).__name__} and q type "
                                  f"{type(q).__name__}")
    return fn(p, q)


def _inf_where(cond, value):
    return tracer.where(cond, tracer.full((), math.inf, dtype=value.dtype), value)


def _zero_where(cond, value):
    return tracer.where(cond, tracer.zeros((), dtype=value.dtype), value)


@register_kl(Normal, Normal)
def _kl_normal_normal(p, q):
    var_ratio = (p.scale / q.scale) ** 2
    t1 = ((p.loc - q.loc) / q.scale) ** 2
    return 0.5 * (var_ratio + t1 - 1 - tracer.log(var_ratio))


@register_kl(Categorical, Categorical)
def _kl_categorical_categorical(p, q):
    t = p.probs * (p.logits - q.logits)
    shape = tuple(np.broadcast_shapes(t.shape, q.probs.shape))
    t = _inf_where(tracer.broadcast_to(q.probs == 0, shape), tracer.broadcast_to(t, shape))
    t = _zero_where(tracer.broadcast_to(p.probs == 0, shape), t)
    return t.sum(-1)


@register_kl(Bernoulli, Bernoulli)
def _kl_bernoulli_bernoulli(p, q):
    t1 = p.probs * (F.softplus(-q.logits) - F.softplus(-p.logits))
    t1 = _zero_where(p.probs == 0, _inf_where(q.probs == 0, t1))
    t2 = (1 - p.probs) * (F.softplus(q.logits) - F.softplus(p.logits))
    t2 = _zero_where(p.probs == 1, _inf_where(q.probs == 1, t2))
    return t1 + t2


@register_kl(MultivariateNormal, MultivariateNormal)
def _kl_mvn_mvn(p, q):
    if p.event_shape != q.event_shape:
        raise ValueError("KL-divergence between two Multivariate Normals with different event shapes cannot be "
                         "computed")
    lp, lq = p._unbroadcasted_scale_tril, q._unbroadcasted_scale_tril
    half_term1 = half_log_det(lq) - half_log_det(lp)
    n = p.event_shape[0]
    batch = tuple(np.broadcast_shapes(lq.shape[:-2], lp.shape[:-2]))
    from tracer.decomp import solve_triangular
    x = solve_triangular(tracer.broadcast_to(lq, batch + (n, n)), tracer.broadcast_to(lp, batch + (n, n)),
                         upper=False)
    term2 = (x ** 2).sum((-2, -1))
    term3 = batch_mahalanobis(lq, q.loc - p.loc)
    return half_term1 + 0.5 * (term2 + term3 - n)


@register_kl(Uniform, Uniform)
def _kl_uniform_uniform(p, q):
    result = tracer.log((q.high - q.low) / (p.high - p.low))
    return _inf_where((q.low > p.low) | (q.high < p.high), result)


@register_kl(Beta, Beta)
def _kl_beta_beta(p, q):
    sum_p = p.concentration1 + p.concentration0
    sum_q = q.concentration1 + q.concentration0
    lg, dg = tracer.lgamma, tracer.digamma
    t1 = lg(q.concentration1) + lg(q.concentration0) + lg(sum_p)
    t2 = lg(p.concentration1) + lg(p.concentration0) + lg(sum_q)
    t3 = (p.concentration1 - q.concentration1) * dg(p.concentration1)
    t4 = (p.concentration0 - q.concentration0) * dg(p.concentration0)
    t5 = (sum_q - sum_p) * dg(sum_p)
    return t1 - t2 + t3 + t4 + t5


@register_kl(Gamma, Gamma)
def _kl_gamma_gamma(p, q):
    t1 = q.concentration * tracer.log(p.rate / q.rate)
    t2 = tracer.lgamma(q.concentration) - tracer.lgamma(p.concentration)
    t3 = (p.concentration - q.concentration) * tracer.digamma(p.concentration)
    t4 = (q.rate - p.rate) * (p.concentration / p.rate)
    return t1 + t2 + t3 + t4


@register_kl(Dirichlet, Dirichlet)
def _kl_dirichlet_dirichlet(p, q):
    sum_p = p.concentration.sum(-1)
    sum_q = q.concentration.sum(-1)
    t1 = tracer.lgamma(sum_p) - tracer.lgamma(sum_q)
    t2 = (tracer.lgamma(p.concentration) - tracer.lgamma(q.concentration)).sum(-1)
    t3 = p.concentration - q.concentration
    t4 = tracer.digamma(p.concentration) - tracer.digamma(sum_p).unsqueeze(-1)
    return t1 - t2 + (t3 * t4).sum(-1)


@register_kl(Independent, Independent)
def _kl_independent_independent(p, q):
    if p.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims:
        raise NotImplementedError("KL between Independents with different reinterpreted_batch_ndims")
    return _sum_right(kl_divergence(p.base_dist, q.base_dist), p.reinterpreted_batch_ndims)
