"""add_/sub_ straight into the buffer (tracer/inplace.py _direct): the general path's bits, its version bump, and
the general path wherever autograd, a trace, broadcasting or a dtype change is involved."""
import numpy as np
import pytest

import autodiff  # noqa: F401 - backward() needs it
import tracer
from tracer import inplace
from tracer.math import add, multiply, subtract


def _general(a, g, alpha, op):
    other = tracer.tensor(g) if alpha == 1 else multiply(tracer.tensor(g), alpha)
    return (add if op == "add_" else subtract)(tracer.tensor(a), other).numpy()


def _values(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    a, g = (rng.normal(size=shape).astype(dtype) for _ in range(2))
    a.reshape(-1)[:4] = (np.nan, -0.0, np.inf, 1e30)
    g.reshape(-1)[:4] = (1.0, -0.0, -np.inf, 1e30)
    return a, g


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
@pytest.mark.parametrize("alpha", [1, -0.37, 2, -3.0, 1e-30, 1.0])
@pytest.mark.parametrize("op", ["add_", "sub_"])
def test_direct_update_gives_the_general_paths_bits(dtype, alpha, op):
    a, g = _values((37, 5), dtype, 0)
    with np.errstate(all="ignore"):
        want = _general(a, g, alpha, op)
        p = tracer.tensor(a.copy())
        buf = p.numpy()
        out = getattr(p.data, op)(tracer.tensor(g), alpha=alpha)
    assert p.numpy() is buf  # the same buffer, written in place
    assert p.numpy().tobytes() == want.tobytes()
    assert out.numpy().tobytes() == want.tobytes()


def test_direct_update_of_strided_views_and_aliases():
    a, g = _values((6, 8), "float32", 1)
    base = a.copy()
    view = tracer.Tensor.wrap(base[:, ::2])  # a strided view of base
    gt = np.ascontiguousarray(g[:4, :6].T)
    other = tracer.Tensor.wrap(gt.T.T)  # (6, 4), contiguous: then a transposed one
    other_t = tracer.Tensor.wrap(np.ascontiguousarray(gt.T).T)
    assert not other_t.numpy().flags.c_contiguous
    with np.errstate(all="ignore"):
        view.add_(other, alpha=-0.5)
        view.sub_(other_t, alpha=0.25)
        want = a.copy()
        step = _general(a[:, ::2], gt, -0.5, "add_")
        want[:, ::2] = _general(step, np.ascontiguousarray(gt), 0.25, "sub_")
    assert base.tobytes() == want.tobytes()
    q = tracer.tensor(a.copy())
    with np.errstate(all="ignore"):
        q.data.add_(q, alpha=3.0)  # reads and writes the same buffer
        assert q.numpy().tobytes() == _general(a, a, 3.0, "add_").tobytes()


def test_direct_update_bumps_the_version_a_recorded_backward_checks():
    w = tracer.tensor(np.ones(3, np.float32), requires_grad=True)
    x = tracer.tensor(np.full(3, 2.0, np.float32))
    y = (w * x).sum()
    x.add_(tracer.tensor(np.ones(3, np.float32)), alpha=0.5)  # x's old values are what y's backward needs
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()


def test_general_path_where_the_direct_one_does_not_apply():
    w = tracer.tensor(np.ones(3, np.float32), requires_grad=True)
    v = tracer.tensor(np.ones(3, np.float32), requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable"):
        w.add_(v, alpha=0.5)  # a leaf that requires grad, updated from another that does: torch's error
    p = tracer.tensor(np.ones((2, 3), np.float32))
    p.add_(tracer.tensor(np.arange(3, dtype=np.float32)), alpha=2.0)  # broadcast: the general path
    assert p.numpy().tolist() == [[1.0, 3.0, 5.0]] * 2
    q = tracer.tensor(np.ones(3, np.float32))
    q.sub_(tracer.tensor(np.ones(3, np.float64)), alpha=0.25)  # another dtype: cast back, as torch's
    assert q.dtype == "float32" and q.numpy().tolist() == [0.75] * 3
    r = tracer.tensor(np.zeros(2, np.float32))
    r.add_(tracer.tensor(np.ones(2, np.float32)), alpha=np.float32(2.0))  # a NumPy scalar alpha: general path
    assert r.numpy().tolist() == [2.0, 2.0]


def test_direct_update_refuses_read_only_memory():
    a = np.ones(3, np.float32)
    a.flags.writeable = False
    t = tracer.Tensor.wrap(a)
    with pytest.raises(ValueError, match="read-only"):
        t.add_(tracer.tensor(np.ones(3, np.float32)), alpha=2.0)


def test_direct_path_is_taken():
    p = tracer.tensor(np.zeros(4, np.float32))
    assert inplace._direct(p, tracer.tensor(np.ones(4, np.float32)), -0.5, np.add)
    assert p.numpy().tolist() == [-0.5] * 4
    assert not inplace._direct(p, tracer.tensor(np.ones(4, np.float64)), -0.5, np.add)
