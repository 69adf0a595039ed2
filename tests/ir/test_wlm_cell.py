"""The LSTM cell's float32 activations (ir.runtime.numba_rnn.MATH_F32) against float64, and the cell loops that use
them on shapes, magnitudes and special values beyond word_language_model's (numba only)."""
import numpy as np
import pytest

from ir.ops import rnn_cell

_LOOPS = '''
@njit(cache=True, error_model="numpy", fastmath={"contract"})
def activations(x, s, t):
    for i in range(x.shape[0]):
        s[i] = sigmoid_f32(x[i])
        t[i] = tanh_f32(x[i])
'''


def _numba_rnn():
    pytest.importorskip("numba")
    from ir.runtime import numba_hook, numba_rnn
    if not numba_hook.ENABLED or not (numba_hook.ready() or numba_hook.wait(120)):
        pytest.skip("numba kernels switched off (TRACEGRAD_KERNELS=numpy)")
    return numba_rnn


def _activations(x):
    nr = _numba_rnn()
    from ir.runtime.numba_gen import load
    module = load(nr._HEADER + nr.MATH_F32 + _LOOPS, "test_rnn_math")
    s, t = np.empty_like(x), np.empty_like(x)
    module.activations(x, s, t)
    return s, t


def test_float32_sigmoid_and_tanh_within_2e7_of_float64():
    rng = np.random.default_rng(0)
    tiny = np.geomspace(1e-38, 1.0, 20001)
    x = np.concatenate([np.linspace(-110, 110, 400001), rng.standard_normal(200000) * 4, tiny, -tiny,
                        np.linspace(-0.6, 0.6, 200001), np.linspace(0.549, 0.551, 2001)]).astype(np.float32)
    s, t = _activations(x)
    x64 = x.astype(np.float64)
    with np.errstate(over="ignore"):
        s64 = 1.0 / (1.0 + np.exp(-x64))
    t64 = np.tanh(x64)
    normal = s64 > 1.7e-38  # exp(-87)
    assert np.max(np.abs(s - s64)[normal] / s64[normal]) < 2.5e-7
    assert np.max(np.abs(s - s64)[~normal]) < 1.7e-38  # exp(y) below -87 is +0
    nonzero = t64 != 0
    assert np.max(np.abs(t - t64)[nonzero] / np.abs(t64[nonzero])) < 2.5e-7
    assert np.all(t[~nonzero] == 0)


def test_float32_activations_special_values():
    x = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 1e-45, -1e-45, 88.0, -88.0, 200.0, -200.0], np.float32)
    s, t = _activations(x)
    assert np.array_equal(s, [1, 0, np.nan, 0.5, 0.5, 0.5, 0.5, 1, 0, 1, 0], equal_nan=True)
    assert np.array_equal(t, np.array([1, -1, np.nan, 0, 0, 1e-45, -1e-45, 1, -1, 1, -1], np.float32), equal_nan=True)
    assert not np.signbit(t[3]) and np.signbit(t[4])  # tanh(-0.0) is -0.0, as NumPy's


@pytest.mark.parametrize(("shape", "scale"), [((20, 200), 1e-3), ((20, 200), 30.0), ((5, 1001), 3.0),
                                              ((1, 4099), 0.7), ((64, 64), 8.0)])
def test_cell_loops_match_float64(shape, scale):
    nr = _numba_rnn()
    rng = np.random.default_rng(1)
    b, hidden = shape
    gates = (rng.standard_normal((b, 4 * hidden)) * scale).astype("float32")
    c, dh, dc = (rng.standard_normal((b, hidden)).astype("float32") for _ in range(3))
    h, c_new = nr.lstm_cell(np, gates, c)
    d, dc_prev = nr.lstm_cell_backward(np, gates, c, dh, dc)
    h64, c64 = rnn_cell._lstm_cell(np, gates.astype("float64"), c.astype("float64"))
    d64, dp64 = rnn_cell._lstm_cell_backward(np, *(a.astype("float64") for a in (gates, c, dh, dc)))
    for got, want in ((h, h64), (c_new, c64), (d, d64), (dc_prev, dp64)):
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    # the NumPy kernels (the plain path, whose sigmoid is tanh's) agree as closely
    for got, want in zip((h, c_new, d, dc_prev), (*rnn_cell._lstm_cell(np, gates, c),
                                                 *rnn_cell._lstm_cell_backward(np, gates, c, dh, dc)), strict=True):
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-6)
