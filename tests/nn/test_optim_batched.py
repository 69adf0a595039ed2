"""SGD's batched update: numba's one call for all parameters (ir.runtime.numba_optim.sgd_all, the fast extra) or
NumPy's ufuncs with the scratch looked up once: the same bits as the per-parameter NumPy update, following
replaced parameters, and the per-parameter path wherever it does not apply."""
import numpy as np
import pytest

import nn
import tracer
from ir.runtime import numba_hook, numba_optim
from nn import optim

SHAPES = [(64, 64), (64,), (3, 4, 5), (10,), (1,), (7, 3)] * 2  # 12 pairs: a full call of eight and a partial one


def _problem(dtype, seed=0):
    rng = np.random.default_rng(seed)
    ps = [rng.standard_normal(s).astype(dtype) for s in SHAPES]
    gs = [rng.standard_normal(s).astype(dtype) for s in SHAPES]
    gs[0][0, :3] = [np.nan, np.inf, -np.inf]
    ps[1][:2] = [np.inf, -0.0]
    return ps, gs


def _loaded():
    """numba's kernels, loaded (its tiered start runs in the background: wait for it), or skip."""
    numba_hook.ready()  # starts the load
    if not numba_hook.wait(120):
        pytest.skip("numba kernels switched off (TRACEGRAD_KERNELS=numpy) or not loadable")


def _numpy_update(ps, gs, lr):
    for p, g in zip(ps, gs, strict=True):
        p -= np.multiply(g, lr)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_batched_update_has_numpy_s_bits(dtype):
    _loaded()
    ps, gs = _problem(dtype)
    want = [p.copy() for p in ps]
    _numpy_update(want, gs, 0.1)
    assert numba_optim.sgd_all(numba_optim.flat_params(ps), gs, 0.1)
    for p, w in zip(ps, want, strict=True):
        np.testing.assert_array_equal(p.view(np.uint8), w.view(np.uint8))  # sign of zero and NaN bits too


@pytest.mark.parametrize("kernels", ["numba", "numpy"])
def test_sgd_step_uses_it_and_follows_a_replaced_parameter(kernels, monkeypatch):
    if kernels == "numba":
        _loaded()
    else:
        monkeypatch.setattr(numba_hook, "ENABLED", False)
    ps, gs = _problem("float32")
    params = [nn.Parameter(p.copy()) for p in ps]
    opt = optim.SGD(params, lr=0.5)
    want = [p.copy() for p in ps]
    _numpy_update(want, gs, 0.5)
    opt.step([tracer.tensor(g) for g in gs])
    assert (opt._flat is not None) == (kernels == "numba") and opt._temps is not None  # the batched form ran
    for p, w in zip(params, want, strict=True):
        np.testing.assert_array_equal(p.numpy(), w)
    fresh = np.ones((64, 64), "float32")
    params[0].data = tracer.tensor(fresh)  # a new array: its own view, not the old one's
    opt.step(gs)
    np.testing.assert_array_equal(params[0].numpy(), np.float32(1) - np.multiply(gs[0], 0.5, dtype="float32"))


def test_numpy_s_path_where_the_batched_form_does_not_apply():
    ps, gs = _problem("float32")
    assert numba_optim.flat_params([ps[0], ps[1].astype("float64")]) is None  # two dtypes
    assert numba_optim.flat_params([np.asfortranarray(ps[0])]) is None
    flat = numba_optim.flat_params(ps[:1]) or [ps[0].reshape(-1)]  # None without numba: the views it would give
    before = ps[0].copy()
    assert not numba_optim.sgd_all(flat, [gs[0].T.copy().T], 0.1)  # a Fortran-order gradient
    np.testing.assert_array_equal(ps[0], before)
    params = [nn.Parameter(p.copy()) for p in ps[:2]]
    opt = optim.SGD(params, lr=0.1)
    opt.step([gs[0], None])  # a missing gradient: per parameter, the other left alone
    np.testing.assert_array_equal(params[1].numpy(), ps[1])
    mom = optim.SGD([nn.Parameter(ps[0].copy())], lr=0.1, momentum=0.9)
    mom.step([gs[0]])
    assert mom._flat is None
