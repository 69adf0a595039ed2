"""nn.utils.clip_grad_norm_'s 2-norm on NumPy gradients (one scratch per call, square instead of abs ** 2): the
same total and clipped gradients, bit for bit, as the general formula it replaced."""
import numpy as np
import pytest

import nn
import tracer


def _formula(grads, norm_type=2.0):
    norms = [np.asarray((np.abs(g.ravel()) ** norm_type).sum() ** (1.0 / norm_type)) for g in grads]
    stacked = np.stack([n.astype(grads[0].dtype) for n in norms])
    return np.asarray((np.abs(stacked) ** norm_type).sum() ** (1.0 / norm_type), grads[0].dtype)


def _params(arrays):
    ps = []
    for a in arrays:
        p = nn.Parameter(np.zeros(a.shape, a.dtype))
        p.grad = tracer.tensor(a.copy())
        ps.append(p)
    return ps


CASES = {
    "plain": lambda rng: [rng.standard_normal(s).astype("float32") for s in [(50, 20), (20,), (0,), (7, 3, 2)]],
    "float64": lambda rng: [rng.standard_normal(s) for s in [(30, 4), (4,)]],
    "mixed": lambda rng: [rng.standard_normal((9, 9)).astype("float32"), rng.standard_normal(5)],
    "nan": lambda rng: [np.array([1.0, -np.nan, 2.0], "float32"), np.array([np.nan, -0.0], "float32")],
    "inf": lambda rng: [np.array([np.inf, -3.0], "float32"), np.array([-np.inf], "float32")],
    "zeros": lambda rng: [np.array([-0.0, 0.0], "float32")],
    "non-contiguous": lambda rng: [rng.standard_normal((8, 6)).astype("float32")[:, ::2]],
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("max_norm", [1e9, 0.5])
def test_two_norm_has_the_formula_s_bits(case, max_norm):
    arrays = CASES[case](np.random.default_rng(0))
    want_total = _formula(arrays)
    coef = min(max_norm / (float(want_total) + 1e-6), 1.0)
    want = [a * a.dtype.type(coef) for a in arrays]
    ps = _params(arrays)
    with np.errstate(all="ignore"):
        total = nn.utils.clip_grad_norm_(ps, max_norm)
    np.testing.assert_array_equal(np.asarray(total._data).reshape(1).view(np.uint8), want_total.reshape(1).view(np.uint8))
    for p, w in zip(ps, want, strict=True):
        np.testing.assert_array_equal(np.ascontiguousarray(p.grad._data).view(np.uint8),
                                      np.ascontiguousarray(w).view(np.uint8))
