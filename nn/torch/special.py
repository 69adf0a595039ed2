"""torch.special: tracer's functions under torch.special's names (erf, erfc, erfinv, expit, logit, xlogy,
log1p, expm1, exp2, sinc, softmax, log_softmax, logsumexp, entr, ...); other names raise an error naming them."""
from __future__ import annotations

import tracer

from . import hints as _hints

__getattr__ = _hints.module_getattr("nn.torch.special", "torch.special", globals())

_SAME = ("erf", "erfc", "erfinv", "logit", "xlogy", "log1p", "expm1", "exp2", "sinc", "logsumexp", "round",
         "digamma", "polygamma", "gammaln")
for _name in _SAME:
    if hasattr(tracer, _name):
        globals()[_name] = getattr(tracer, _name)
if hasattr(tracer, "lgamma"):
    gammaln = tracer.lgamma
if hasattr(tracer, "digamma"):
    psi = tracer.digamma


def expit(input):  # noqa: A002
    """The logistic sigmoid."""
    return tracer.sigmoid(input)


def softmax(input, dim: int, *, dtype=None):  # noqa: A002
    return tracer.softmax(input if dtype is None else input.to(dtype), axis=dim)


def log_softmax(input, dim: int, *, dtype=None):  # noqa: A002
    return tracer.log_softmax(input if dtype is None else input.to(dtype), axis=dim)


def entr(input):  # noqa: A002
    """-x log x elementwise (0 at 0, -inf below 0)."""
    x = tracer.tensor(input) if not isinstance(input, tracer.Tensor) else input
    return tracer.where(x < 0, -float("inf"), -tracer.xlogy(x, x))


def erfcx(input):  # noqa: A002
    """exp(x**2) * erfc(x)."""
    return tracer.exp(input * input) * tracer.erfc(input)


def ndtr(input):  # noqa: A002
    """The standard normal CDF."""
    return 0.5 * (1.0 + tracer.erf(input * 0.7071067811865476))


def log_ndtr(input):  # noqa: A002
    return ndtr(input).log()


def ndtri(input):  # noqa: A002
    """The inverse of ndtr."""
    return tracer.erfinv(2.0 * input - 1.0) * 1.4142135623730951


_OWN = {"entr", "erfcx", "expit", "log_ndtr", "log_softmax", "ndtr", "ndtri", "softmax"}
__all__ = sorted({n for n in (*_SAME, "psi") if n in globals()} | _OWN)
