"""Special functions NumPy lacks, written against `xp` (SciPy/CuPy versions used when present)."""
from __future__ import annotations

import contextlib
import math

import numpy as np


def erf(xp, x):
    """The error function, to float64 accuracy, for NumPy or CuPy arrays.

    >>> import numpy as np
    >>> float(erf(np, np.array(0.5)))  # doctest: +ELLIPSIS
    0.5204998778...
    """
    return _special(xp, "erf", erf_fallback, x)


def erf_fallback(xp, x):
    """The error function without SciPy: a Maclaurin series below 2.5, erfc's continued fraction above.

    Used by `erf` when SciPy (or cupyx.scipy) is missing; a function of its own so that tests check
    it whatever is installed.

    >>> import math, numpy as np
    >>> abs(float(erf_fallback(np, np.array(1.3))) - math.erf(1.3)) < 1e-15
    True
    """
    z = x.astype("float64")
    a = xp.abs(z)
    # |x| < 2.5: Maclaurin series (terms fall below 1e-17 by n = 40; cancellation costs < 3 digits).
    small = xp.minimum(a, 2.5)
    sq = small * small
    term = small.copy()
    total = small.copy()
    for n in range(1, 45):
        term = term * (-sq) / n
        total = total + term / (2 * n + 1)
    series = total * (2.0 / math.sqrt(math.pi))
    # |x| >= 2.5: erfc by its continued fraction, evaluated bottom-up with a fixed depth.
    tail = 1.0 - _erfc_tail(xp, a, 2.5, 60)
    out = xp.where(a < 2.5, series, tail) * xp.sign(z)
    return out.astype(x.dtype, copy=False)


def _erfc_tail(xp, a, low, depth):
    """erfc(max(a, low)) for a >= 0 by its continued fraction, bottom-up with a fixed depth (60 terms reach
    2e-16 from 2.0 up, 120 from 1.5): full relative accuracy, where 1 - erf keeps only the digits erf leaves
    (none beyond x = 6)."""
    big = xp.maximum(a, low)
    frac = big.copy()
    for k in range(depth, 0, -1):
        frac = big + (k / 2.0) / frac
    return xp.exp(-big * big) / (math.sqrt(math.pi) * frac)


def erfc(xp, x):
    """The complementary error function 1 - erf(x), accurate in the right tail (erfc(10) = 2.1e-45).

    SciPy's (or cupyx's) when present. Otherwise: the continued fraction for x >= 1.5, 1 - erf(x) below
    (erfc(1.5) = 0.034: the subtraction loses one digit at most), 2 - erfc(-x) for x < 0.

    >>> import math, numpy as np
    >>> abs(float(erfc(np, np.array(6.0))) / math.erfc(6.0) - 1) < 1e-14
    True
    """
    return _special(xp, "erfc", erfc_fallback, x)


def erfc_fallback(xp, x):
    """erfc without SciPy (see erfc); a function of its own so that tests check it whatever is installed."""
    z = x.astype("float64")
    a = xp.abs(z)
    right = xp.where(a < 1.5, 1.0 - erf_fallback(xp, a), _erfc_tail(xp, a, 1.5, 120))
    out = xp.where(z < 0, 2.0 - right, right)
    return out.astype(x.dtype, copy=False)


# Giles (2010), "Approximating the erfinv function", GPU Computing Gems: the single-precision branches,
# relative error < 4e-7 where float32 reaches (1 - |y| > 6e-8), a first guess beyond; Newton steps then
# bring it to float64 accuracy.
_GILES_CENTRAL = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
                  -0.00125372503, -0.00417768164, 0.246640727, 1.50140941)
_GILES_TAIL = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
               -0.0076224613, 0.00943887047, 1.00167406, 2.83297682)


def _horner(coefficients, w):
    p = coefficients[0]
    for c in coefficients[1:]:
        p = c + p * w
    return p


def erfinv(xp, y):
    """The inverse error function on [-1, 1]: +-inf at +-1, NaN outside, as torch.erfinv.

    SciPy's (or cupyx's) when present. Otherwise Giles' approximation refined by Newton steps: on
    erf(x) = |y| for |y| <= 0.5, on log erfc(x) = log(1 - |y|) above (1 - |y| is exact there and erfc keeps
    full relative accuracy, so the tails stay accurate where erf(x) - y would cancel to nothing; the log
    makes the equation nearly linear, so Newton converges from Giles' rougher guess beyond float32's tail).

    >>> import math, numpy as np
    >>> abs(math.erf(float(erfinv(np, np.array(0.999999)))) - 0.999999) < 1e-15
    True
    """
    return _special(xp, "erfinv", erfinv_fallback, y)


def erfinv_fallback(xp, y):
    """erfinv without SciPy (see erfinv); a function of its own so that tests check it whatever is installed."""
    z = y.astype("float64")
    a = xp.abs(z)
    inside = a < 1.0
    s = xp.where(inside, a, 0.5)  # a stand-in inside the domain where the answer is selected below
    w = -xp.log((1.0 - s) * (1.0 + s))
    central = w < 5.0
    p = xp.where(central, _horner(_GILES_CENTRAL, w - 2.5), _horner(_GILES_TAIL, xp.sqrt(w) - 3.0))
    x = p * s
    tail = s > 0.5
    target = xp.log(1.0 - xp.where(tail, s, 0.0))
    for _ in range(4):
        # f(x) = erf(x) - s, f' = 2 / sqrt(pi) exp(-x^2); in the tail f(x) = log erfc(x) - log(1 - s), f' = -that / erfc
        slope = (2.0 / math.sqrt(math.pi)) * xp.exp(-x * x)
        c = erfc_fallback(xp, x)
        step = xp.where(tail, (target - xp.log(c)) * c / slope, (erf_fallback(xp, x) - s) / slope)
        x = x - step
    edge = xp.where(a == 1.0, xp.inf, xp.nan)
    out = xp.where(inside, x, edge) * xp.where(z < 0, -1.0, 1.0)
    return out.astype(y.dtype, copy=False)


def quiet(xp):
    """No RuntimeWarning for NaN, inf or overflow results (NumPy's; CuPy never warns), as in PyTorch."""
    return np.errstate(divide="ignore", invalid="ignore", over="ignore") if xp is np else contextlib.nullcontext()


def _special(xp, name, fallback, x):
    """SciPy's `name` (cupyx's on CuPy) in x's dtype when it is installed, else the fallback."""
    fast = _fast(xp, name)
    return fallback(xp, x) if fast is None else fast(x).astype(x.dtype, copy=False)


def _fast(xp, name):
    """SciPy's (NumPy) or cupyx's (CuPy) special function `name`, or None when it is not installed."""
    try:
        if xp.__name__ == "numpy":
            import scipy.special as module
        else:
            import cupyx.scipy.special as module
    except ImportError:
        return None
    return getattr(module, name)
