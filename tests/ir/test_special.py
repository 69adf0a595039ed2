"""The erf fallback (used when SciPy is missing) against math.erf, whatever is installed; and `erf` itself."""
import math

import numpy as np
import pytest

from ir.ops import special

# dense over the series region, both sides of the 2.5 switch, the tails, and tiny arguments
POINTS = np.concatenate([np.linspace(-6.0, 6.0, 2401), [2.5 - 1e-12, 2.5, 2.5 + 1e-12, -2.5, 1e-300, -1e-8,
                                                        0.0, -0.0, 9.0, -27.0, np.inf, -np.inf]])


def test_fallback_matches_math_erf_in_float64():
    # the series loses a few digits to cancellation just below 2.5 (measured 7.5e-15); 2e-14 leaves room
    got = special.erf_fallback(np, POINTS)
    want = np.array([math.erf(v) for v in POINTS])
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, want, rtol=1e-14, atol=2e-14)


def test_fallback_keeps_float32_and_shape():
    x = POINTS[:600].astype("float32").reshape(20, 30)
    got = special.erf_fallback(np, x)
    assert got.dtype == np.float32 and got.shape == (20, 30)
    want = np.array([math.erf(float(v)) for v in x.reshape(-1)], "float32").reshape(20, 30)
    np.testing.assert_array_max_ulp(got, want, maxulp=1)


def test_erf_without_scipy_takes_the_fallback(monkeypatch):
    monkeypatch.setattr(special, "_fast_erf", lambda xp: None)
    np.testing.assert_allclose(special.erf(np, POINTS), [math.erf(v) for v in POINTS], rtol=1e-14, atol=2e-14)


def test_erf_with_scipy_agrees():
    pytest.importorskip("scipy")
    assert special._fast_erf(np) is not None
    np.testing.assert_allclose(special.erf(np, POINTS), [math.erf(v) for v in POINTS], rtol=1e-14, atol=2e-14)
