"""The gamma function family: lgamma, digamma, polygamma(n) and random.gamma (Gamma(concentration, 1) draws).

Written against `xp` with no SciPy: each function is computed in float64 by well-known expansions and cast
back. lgamma and digamma shift x up to x >= 10 with their recurrences and sum Stirling's (lgamma) or the
Bernoulli-number asymptotic series (digamma) there; x < 0.5 uses the reflection formulas, with sin and tan
of pi * (x - round(x)) so that large negative x keeps its digits. polygamma(n >= 1) shifts up by its own
recurrence (as many steps as the most negative element needs) and sums its asymptotic series. As torch:
lgamma is log|Gamma(x)| (+inf at the poles 0, -1, -2, ...), digamma(0) = -inf and digamma at negative
integers NaN, polygamma(n) at the poles +inf (n odd) or NaN.
"""
from __future__ import annotations

import math

from ..types import INT_DTYPES, TensorType
from .common import require_float
from .nn import dropout_uniform
from .registry import Attr, declare, tensor_arg
from .special import quiet

# B_2k for k = 1..10
_BERNOULLI = (1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6, -3617 / 510, 43867 / 798, -174611 / 330)
_SHIFT = 10.0  # the series below are accurate to float64 rounding from here up


def _lgamma_large(xp, x):
    """Stirling's series of log Gamma(x) for x >= 10:
    (x - 1/2) log x - x + log(2 pi) / 2 + sum B_2k / (2k (2k-1) x^(2k-1))."""
    inv = 1.0 / x
    inv2 = inv * inv
    series = xp.zeros_like(x)
    for k in range(8, 0, -1):  # Horner in 1/x^2, 8 terms: the next is below 1e-19 at x = 10
        series = series * inv2 + _BERNOULLI[k - 1] / (2 * k * (2 * k - 1))
    return (x - 0.5) * xp.log(x) - x + 0.5 * math.log(2 * math.pi) + series * inv


def _lgamma_positive(xp, x):
    """log Gamma(x) for x >= 0.5: lgamma(x) = lgamma(x + m) - log(x (x + 1) ... (x + m - 1)), x + m >= 10."""
    prod = xp.ones_like(x)
    z = x.copy()
    for _ in range(int(_SHIFT)):
        small = z < _SHIFT
        prod = xp.where(small, prod * z, prod)
        z = xp.where(small, z + 1.0, z)
    return _lgamma_large(xp, z) - xp.log(prod)


def _frac_pi(x):
    """pi * (x - round(x)): exact reduction, so sin and tan of it keep their digits at large |x|."""
    return math.pi * (x - x.round())


def _lgamma(xp, x):
    z = x.astype("float64")
    with quiet(xp):
        left = z < 0.5
        mirror = xp.where(left, 1.0 - z, z)
        base = _lgamma_positive(xp, mirror)
        # reflection: log|Gamma(x)| = log(pi / |sin(pi x)|) - log Gamma(1 - x)
        reflected = math.log(math.pi) - xp.log(xp.abs(xp.sin(_frac_pi(z)))) - base
        out = xp.where(left, reflected, base)
        out = xp.where((z <= 0) & (z == xp.floor(z)), xp.inf, out)
        out = xp.where(xp.isinf(z), xp.inf, out)
    return out.astype(x.dtype)


def _digamma_positive(xp, x):
    """psi(x) for x >= 0.5: shift to x >= 10, then log x - 1/(2x) - sum B_2k / (2k x^2k)."""
    total = xp.zeros_like(x)
    z = x.copy()
    for _ in range(int(_SHIFT)):
        small = z < _SHIFT
        total = xp.where(small, total - 1.0 / z, total)
        z = xp.where(small, z + 1.0, z)
    inv2 = 1.0 / (z * z)
    series = xp.zeros_like(z)
    for k in range(8, 0, -1):
        series = series * inv2 + _BERNOULLI[k - 1] / (2 * k)
    return total + xp.log(z) - 0.5 / z - series * inv2


def _digamma(xp, x):
    z = x.astype("float64")
    with quiet(xp):
        left = z < 0.5
        base = _digamma_positive(xp, xp.where(left, 1.0 - z, z))
        # reflection: psi(x) = psi(1 - x) - pi / tan(pi x)
        out = xp.where(left, base - math.pi / xp.tan(_frac_pi(z)), base)
        out = xp.where((z < 0) & (z == xp.floor(z)), xp.nan, out)
        out = xp.where(z == 0, -xp.inf, out)
    return out.astype(x.dtype)


def _polygamma(xp, x, n):
    """psi^(n)(x), n >= 1: (-1)^(n+1) n! sum_k 1/(x+k)^(n+1) for the shifted part, then the asymptotic series
    (-1)^(n+1) [(n-1)!/z^n + n!/(2 z^(n+1)) + sum B_2k (2k+n-1)! / ((2k)! z^(2k+n))] at z >= 10 + n."""
    z = x.astype("float64")
    sign = 1.0 if n % 2 else -1.0
    fact = math.factorial(n)
    with quiet(xp):
        pole = (z <= 0) & (z == xp.floor(z))
        w = xp.where(pole | ~xp.isfinite(z), _SHIFT + n, z)
        low = float(w.min()) if w.size else _SHIFT + n
        steps = max(0, math.ceil(_SHIFT + n - low))
        total = xp.zeros_like(w)
        for _ in range(steps):
            small = w < _SHIFT + n
            total = xp.where(small, total + 1.0 / w ** (n + 1), total)
            w = xp.where(small, w + 1.0, w)
        series = math.factorial(n - 1) / w ** n + fact / (2 * w ** (n + 1))
        for k in range(1, len(_BERNOULLI) + 1):
            coefficient = _BERNOULLI[k - 1] * math.factorial(2 * k + n - 1) / math.factorial(2 * k)
            series = series + coefficient / w ** (2 * k + n)
        out = sign * (fact * total + series)
        out = xp.where(pole, xp.inf if n % 2 else xp.nan, out)
        out = xp.where(xp.isnan(z), xp.nan, out)
        out = xp.where(z == xp.inf, 0.0, out)
    return out.astype(x.dtype)


def _infer_float(op, types, **attrs):
    t = tensor_arg(op, types, 0)
    require_float(op, t)
    if attrs.get("n", 1) < 1:
        raise op.error(f"n must be >= 1 (polygamma(0) is digamma), got {attrs['n']}")
    return t


declare("lgamma", ("x",), infer=_infer_float, kernel=_lgamma, doc="log|Gamma(x)|, as torch.lgamma.")
declare("digamma", ("x",), infer=_infer_float, kernel=_digamma, doc="psi(x) = d/dx lgamma(x), as torch.digamma.")
declare("polygamma", ("x",), (Attr("n", "int", 1),), infer=_infer_float, kernel=_polygamma,
        doc="The n-th derivative of digamma (n >= 1), as torch.polygamma(n, x).")


# ---------------------------------------------------------------- Gamma(concentration, 1) draws


def _infer_gamma(op, types):
    seed, alpha = tensor_arg(op, types, 0), tensor_arg(op, types, 1)
    if seed.dtype not in INT_DTYPES or seed.shape != ():
        raise op.error(f"argument seed must be a 0-d int64 tensor, got {seed}")
    require_float(op, alpha, "concentration")
    return TensorType(alpha.shape, alpha.dtype)


def _standard_gamma(xp, seed, alpha):
    """Marsaglia and Tsang (2000) on the counter-based uniforms of `seed`: for a >= 1, d = a - 1/3,
    c = 1 / sqrt(9 d), v = (1 + c z)^3 with z normal, accepted when log u < z^2/2 + d - d v + d log v;
    a < 1 draws Gamma(a + 1) and multiplies by u^(1/a). Each round uses fresh streams (the seed's key and
    the round number), and rounds repeat until every element is accepted (each round accepts >= 95%)."""
    a = alpha.astype("float64")
    boost = a < 1.0
    out = xp.full(a.shape, xp.nan)
    todo = xp.isfinite(a) & (a > 0)
    base = int(xp.asarray(seed).reshape(()))
    round_ = 0
    with quiet(xp):
        d = xp.where(boost, a + 1.0, a) - 1.0 / 3.0
        c = 1.0 / xp.sqrt(9.0 * d)
        while bool(todo.any()):
            u = dropout_uniform(xp, (base + 0x9E3779B9 * (round_ + 1)) % (2**63), (4,) + a.shape)
            z = xp.sqrt(-2.0 * xp.log1p(-u[0])) * xp.cos(2.0 * math.pi * u[1])
            v = (1.0 + c * z) ** 3
            ok = todo & (v > 0) & (xp.log1p(-u[2]) < 0.5 * z * z + d - d * v + d * xp.log(xp.where(v > 0, v, 1.0)))
            out = xp.where(ok, d * v, out)
            todo = todo & ~ok
            round_ += 1
        u = dropout_uniform(xp, (base + 0x51ED27) % (2**63), a.shape)
        out = xp.where(boost, out * (1.0 - u) ** (1.0 / a), out)
        out = xp.where(a == xp.inf, xp.inf, out)
    tiny = xp.finfo(alpha.dtype).tiny
    return xp.maximum(out.astype(alpha.dtype), tiny)  # as torch: a draw never underflows to 0


declare("random.gamma", ("seed", "concentration"), infer=_infer_gamma, kernel=_standard_gamma,
        differentiable=False, doc="Gamma(concentration, 1) draws, one per element of concentration.")
