"""Row of ir/ops/gamma_grad.py: random.standard_gamma_grad against d x / d alpha of the Gamma inverse CDF at a
fixed CDF level, (x(alpha + h) - x(alpha - h)) / 2h with h = 1e-6 alpha, computed once with scipy 1.17's
gammainc / gammaincinv (scipy is not a dependency, so the values are written here). torch's approximations are
within 1e-4 of it."""
import numpy as np

from tracer.tensor import apply

from . import OpCase

_A = np.array([0.3, 0.9, 2.5, 6.0, 12.0, 40.0])
_X = np.array([0.05, 1.1, 0.6, 5.8, 10.0, 47.0])  # all three branches: x < 0.8, alpha > 8 (near/far), the fit
_INVERSE_CDF_FD = np.array([0.494710987, 1.3185797212, 0.4786816918, 1.0108548609, 0.9243450066, 1.08732018])

CASES = [
    OpCase("standard_gamma_grad_inverse_cdf", lambda a, x: apply("random.standard_gamma_grad", [a, x]),
           lambda a, x: _INVERSE_CDF_FD, [_A, _X], ("random.standard_gamma_grad",), grad=False, rtol=1e-4),
]
