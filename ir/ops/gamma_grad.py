"""random.standard_gamma_grad: d x / d alpha of a Gamma(alpha, 1) draw x, torch._standard_gamma_grad's
implicit reparameterisation (Figurnov et al. 2018: -(dF/dalpha) / (dF/dx), F the regularised incomplete gamma),
with torch's three approximations (ATen's standard_gamma_grad_one): a Taylor series of F for x < 0.8, Rice's
saddle-point expansion for alpha > 8, and a bivariate rational fit otherwise; evaluated in float64 as torch's
CPU kernel accumulates. Not itself differentiable (torch's is not either): rsample uses it as the gradient of
the draw (nn/distributions/gamma_family.py).
"""
from __future__ import annotations

from ..types import TensorType
from .common import require_float
from .gamma_fns import _digamma
from .registry import declare, tensor_arg
from .special import quiet

_COEF_UV = (
    (0.16009398, -0.094634809, 0.025146376, -0.0030648343, 1, 0.32668115, 0.10406089, 0.0014179084),
    (0.53487893, 0.1298071, 0.065735949, -0.0015649758, 0.16639465, 0.020070113, -0.0035938915, -0.00058392623),
    (0.040121004, -0.0065914022, -0.0026286047, -0.0013441777, 0.017050642, -0.0021309326, 0.00085092367,
     -1.5247877e-07),
)


def _infer(op, types):
    alpha, x = tensor_arg(op, types, 0), tensor_arg(op, types, 1)
    require_float(op, alpha, "concentration")
    if alpha.shape != x.shape or alpha.dtype != x.dtype:
        raise op.error(f"concentration {alpha} and sample {x} must have the same shape and dtype")
    return TensorType(alpha.shape, alpha.dtype)


def _taylor(xp, a, x):
    """x < 0.8: F's series x^a sum (-x)^i / (i! (a + i)) and its alpha derivative."""
    numer, denom = xp.ones_like(x), a.copy()
    series1, series2 = numer / denom, numer / (denom * denom)
    for i in range(1, 6):
        numer = numer * (-x / i)
        denom = denom + 1
        series1 = series1 + numer / denom
        series2 = series2 + numer / (denom * denom)
    pow_x_alpha = x ** a
    pdf = x ** (a - 1) * xp.exp(-x)
    cdf = pow_x_alpha * series1
    cdf_alpha = (xp.log(x) - _digamma(xp, a)) * cdf - pow_x_alpha * series2
    result = -cdf_alpha / pdf
    return xp.where(xp.isnan(result), 0.0, result)


def _saddle(xp, a, x):
    """alpha > 8: Rice's saddle-point expansion (a polynomial near x = alpha)."""
    numer_1 = 1 + 24 * a * (1 + 12 * a)
    numer_2 = 1440 * (a * a) + 6 * x * (53 - 120 * x) - 65 * x * x / a + a * (107 + 3600 * x)
    near = numer_1 * numer_2 / (1244160 * (a * a) * (a * a))
    denom = xp.sqrt(8 * a)
    term2 = denom / (a - x)
    term3 = (x - a - a * xp.log(x / a)) ** -1.5
    term23 = xp.where(x < a, term2 - term3, term2 + term3)
    term1 = xp.log(x / a) * term23 - xp.sqrt(2 / a) * (a + x) / ((a - x) * (a - x))
    stirling = 1 + 1 / (12 * a) * (1 + 1 / (24 * a))
    far = -stirling * x * term1 / denom
    return xp.where((0.9 * a <= x) & (x <= 1.1 * a), near, far)


def _rational(xp, a, x):
    u, v = xp.log(x / a), xp.log(a)
    c = [_COEF_UV[0][i] + u * (_COEF_UV[1][i] + u * _COEF_UV[2][i]) for i in range(8)]
    p = c[0] + v * (c[1] + v * (c[2] + v * c[3]))
    q = c[4] + v * (c[5] + v * (c[6] + v * c[7]))
    return xp.exp(p / q)


def _standard_gamma_grad(xp, alpha, x):
    a, s = alpha.astype("float64"), x.astype("float64")
    with quiet(xp):
        out = xp.where(s < 0.8, _taylor(xp, a, s), xp.where(a > 8.0, _saddle(xp, a, s), _rational(xp, a, s)))
    return out.astype(alpha.dtype)


declare("random.standard_gamma_grad", ("concentration", "sample"), infer=_infer, kernel=_standard_gamma_grad,
        differentiable=False, doc="d sample / d concentration of a Gamma(concentration, 1) draw, as "
                                  "torch._standard_gamma_grad.")
