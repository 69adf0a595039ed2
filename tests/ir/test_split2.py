"""Stacked matmuls split over two threads (ir.runtime.split2, ir.runtime.specialize._stacked_split): the same
bits as one call over the whole stack, errors raised on the caller, a forked child making its own worker."""
import functools
import os

import numpy as np
import pytest

import ir
import tracer
from ir.runtime import specialize, split2


def _split(x, y, out=None):
    shape = np.broadcast_shapes(x.shape[:-2], y.shape[:-2]) + (x.shape[-2], y.shape[-1])
    return specialize._stacked_split(x, y, half=x.shape[0] // 2, shape=shape, dtype=x.dtype, out=out)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("batch", [2, 3, 16])
def test_split_is_bit_equal_to_the_whole_stack(dtype, batch):
    rng = np.random.default_rng(batch)
    qkv = rng.standard_normal((batch, 64, 3, 4, 32)).astype(dtype)
    q = qkv[:, :, 0].transpose(0, 2, 1, 3)  # strided row-major
    k_t = qkv[:, :, 1].transpose(0, 2, 3, 1)  # far-apart columns: _spread copies each half
    want = np.matmul(q, k_t)
    got = _split(q, k_t)
    assert got.dtype == want.dtype and np.array_equal(got, want)
    out = np.full_like(want, np.nan)
    assert _split(q, k_t, out=out) is out and np.array_equal(out, want)
    p = rng.standard_normal((batch, 4, 64, 64)).astype(dtype)
    p[0, 0, 0, :3] = [np.nan, np.inf, -np.inf]
    v = qkv[:, :, 2].transpose(0, 2, 1, 3)
    np.testing.assert_array_equal(_split(p, v), np.matmul(p, v))


def test_error_of_either_half_is_raised_here_and_the_worker_goes_on():
    def bad():
        raise ValueError("second half")
    with pytest.raises(ValueError, match="second half"):
        split2.run(lambda: None, bad)
    with pytest.raises(KeyError):
        split2.run(functools.partial({}.__getitem__, 1), lambda: None)
    with pytest.raises(KeyError):  # both halves fail: the caller's error, and the worker's is not left over
        split2.run(functools.partial({}.__getitem__, 1), bad)
    seen = []
    split2.run(lambda: seen.append(1), lambda: seen.append(2))
    assert sorted(seen) == [1, 2]


def test_threads_from_the_environment(monkeypatch):
    for name in split2._VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "3")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    split2.threads.cache_clear()
    try:
        assert split2.threads() == 3
        monkeypatch.setenv("NUMBA_NUM_THREADS", "x")  # not a count: the next variable decides
        split2.threads.cache_clear()
        assert split2.threads() == 3
        monkeypatch.setenv("NUMBA_NUM_THREADS", "1")
        split2.threads.cache_clear()
        assert split2.threads() == 1
    finally:
        split2.threads.cache_clear()


@pytest.mark.parametrize("threads", [1, 2])
def test_compiled_attention_splits_only_with_two_threads(monkeypatch, threads):
    monkeypatch.setattr(split2, "threads", lambda: threads)
    qkv = np.random.default_rng(0).standard_normal((16, 64, 3, 4, 32)).astype("float32")

    def attention(a):
        q = a[:, :, 0].permute(0, 2, 1, 3)
        k = a[:, :, 1].permute(0, 2, 3, 1)
        v = a[:, :, 2].permute(0, 2, 1, 3)
        return (q @ k) @ v

    mod = tracer.trace(attention, tracer.spec(qkv.shape, "float32"))
    f = ir.Executor(mod)["main"]
    got = f(qkv)
    q, k_t, v = (qkv[:, :, i].transpose(0, 2, 1, 3) for i in range(3))
    assert np.array_equal(got, np.matmul(np.matmul(q, k_t.transpose(0, 1, 3, 2)), v))
    kernels = [getattr(fn, "func", fn) for _, fn, *_ in f.instrs]
    assert kernels.count(specialize._stacked_split) == (2 if threads > 1 else 0)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork")
def test_forked_child_makes_its_own_worker():
    split2.run(lambda: None, lambda: None)  # the parent's worker exists
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            seen = []
            split2.run(lambda: seen.append(1), lambda: seen.append(2))
            os.write(w, b"ok" if sorted(seen) == [1, 2] else b"bad")
        finally:
            os._exit(0)
    os.close(w)
    os.waitpid(pid, 0)
    assert os.read(r, 2) == b"ok"
