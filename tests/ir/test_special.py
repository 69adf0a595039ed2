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
    monkeypatch.setattr(special, "_fast", lambda xp, name: None)
    np.testing.assert_allclose(special.erf(np, POINTS), [math.erf(v) for v in POINTS], rtol=1e-14, atol=2e-14)


def test_erf_with_scipy_agrees():
    pytest.importorskip("scipy")
    assert special._fast(np, "erf") is not None
    np.testing.assert_allclose(special.erf(np, POINTS), [math.erf(v) for v in POINTS], rtol=1e-14, atol=2e-14)


# erfc and erfinv without SciPy: against math.erfc, and erfinv inverted by math.erf / math.erfc
ERFC_POINTS = np.concatenate([np.linspace(-8.0, 8.0, 3201), [1.5 - 1e-12, 1.5, 2.5, 10.0, 26.0, -27.0, np.inf,
                                                             -np.inf]])


def test_erfc_fallback_keeps_relative_accuracy_in_the_tail():
    got = special.erfc_fallback(np, ERFC_POINTS)
    want = np.array([math.erfc(v) for v in ERFC_POINTS])
    np.testing.assert_allclose(got, want, rtol=3e-14, atol=0)


def test_erfinv_fallback_inverts_erf_to_float64_accuracy():
    y = np.concatenate([np.linspace(-0.999, 0.999, 4001), 1 - np.logspace(-16, -1, 60), [0.0, 1e-300, 0.5]])
    x = special.erfinv_fallback(np, y)
    central = np.abs(y) <= 0.5
    np.testing.assert_allclose([math.erf(v) for v in x[central]], y[central], rtol=1e-15, atol=1e-300)
    # in the tails compare 1 - |y| with erfc(|x|): that is where erf(x) - y would hide the error
    tail = ~central
    np.testing.assert_allclose([math.erfc(abs(v)) for v in x[tail]], 1 - np.abs(y[tail]), rtol=5e-14)
    assert x[-2] == special.erfinv_fallback(np, np.array(1e-300)) and 8.8e-301 < x[-2] < 8.9e-301


def test_erfinv_fallback_edges_as_torch():
    got = special.erfinv_fallback(np, np.array([1.0, -1.0, 1.5, -2.0, np.nan, 0.0, -0.0]))
    assert got[0] == np.inf and got[1] == -np.inf and np.isnan(got[2:5]).all() and (got[5:] == 0).all()
