"""Rows of ir/ops/gamma_fns.py: lgamma, digamma, polygamma and random.gamma. References share no code with
the kernels: math.lgamma, a five-point difference of it for digamma, and the defining sums with an
Euler-Maclaurin tail for polygamma. Gradient rows (float64 finite differences) sample both sides of the
reflection point 0.5 and the shift threshold 10."""
import math

import numpy as np

import tracer as T
from tests.cases import OpCase

_lgamma = np.vectorize(math.lgamma, otypes=[float])


def _digamma_ref(a):
    h = 1e-4  # five-point central difference: error ~ h^4 / 30 * |lgamma^(5)|, 3e-10 at x = 0.05
    x = a.astype("float64")
    diff = 8 * (_lgamma(x + h) - _lgamma(x - h)) - (_lgamma(x + 2 * h) - _lgamma(x - 2 * h))
    return (diff / (12 * h)).astype(a.dtype)


def _polygamma_ref(n):
    """(-1)^(n+1) n! sum_k 1/(x+k)^(n+1): 2000 terms, then the tail's first Euler-Maclaurin terms."""
    def ref(a):
        x = a.astype("float64")
        k = np.arange(2000.0)
        head = (1.0 / (x[..., None] + k) ** (n + 1)).sum(-1)
        w = x + 2000.0
        tail = 1.0 / (n * w ** n) + 1.0 / (2 * w ** (n + 1)) + (n + 1) / (12 * w ** (n + 2))
        return ((-1) ** (n + 1) * math.factorial(n) * (head + tail)).astype(a.dtype)
    return ref


_X = np.array([[0.3, 0.7, 1.5, 2.0], [3.7, 9.5, 10.5, 24.0], [-0.4, -2.6, 0.05, 60.0]])
_POS = np.array([[0.3, 0.7, 1.5], [3.7, 9.5, 12.0]])


def _gamma_moments(alpha):
    x = T.gamma_fns.standard_gamma(T.full((60000,), alpha, dtype="float64"), seed=5)
    return T.stack([x.mean(), T.var(x)])


CASES = [
    OpCase("lgamma", T.lgamma, lambda a: _lgamma(a).astype(a.dtype), [_X], ("lgamma",), rtol=1e-10, atol=1e-12),
    OpCase("lgamma_float32", T.lgamma, lambda a: _lgamma(a).astype(a.dtype), [_X.astype("float32")], ("lgamma",),
           grad=False),
    OpCase("lgamma_poles", T.lgamma, lambda a: np.full(a.shape, np.inf), [np.array([0.0, -1.0, -7.0])],
           ("lgamma",), grad=False),
    OpCase("digamma", T.digamma, _digamma_ref, [_X], ("digamma",), rtol=1e-8, atol=1e-9),
    OpCase("digamma_edges", T.digamma, lambda a: np.array([-np.inf, np.nan, np.inf]),
           [np.array([0.0, -2.0, np.inf])], ("digamma",), grad=False),
    OpCase("polygamma1", lambda x: T.polygamma(1, x), _polygamma_ref(1), [_POS], ("polygamma",), rtol=1e-10),
    OpCase("polygamma2_negative", lambda x: T.polygamma(2, x), _polygamma_ref(2),
           [np.array([-2.6, -0.4, 0.2, 14.0])], ("polygamma",), rtol=1e-9),
    OpCase("gamma_draw_moments_small", lambda: _gamma_moments(0.4), lambda: np.array([0.4, 0.4]), [],
           ("random.gamma",), grad=False, atol=0.02),
    OpCase("gamma_draw_moments_large", lambda: _gamma_moments(6.0), lambda: np.array([6.0, 6.0]), [],
           ("random.gamma",), grad=False, rtol=0.03),
]
