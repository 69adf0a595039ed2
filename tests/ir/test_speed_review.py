"""Adversarial review of the speed work of issue 10 (specialized kernels, optimize(), the generated
step's fresh results): each test is a case where the fast path once differed from the generic one."""
import numpy as np
import pytest

import ir
import tracer


def _both(fn, *args):
    """fn traced on args, run with the generic kernels and with the specialized ones (both paths of the
    executor: the counting interpreter, then the generated function)."""
    mod = tracer.trace(fn, *args)
    out = []
    for spec in (False, True):
        ex = ir.Executor(mod, check_types=True)
        ex.specialize_kernels = spec
        out.append(ex["main"](*args))
    fast = ir.Executor(mod)["main"]
    fast(*args)
    out.append(fast(*args))
    return out


def _same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape
    assert np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_tanh_gelu_of_a_0d_tensor(dtype):
    # NumPy gives a scalar, not an array, for a 0-d product: the in-place GELU cannot write into it
    x = np.array(-0.75, dtype)
    want, *got = _both(lambda x: tracer.gelu(x, approximate="tanh"), x)
    for g in got:
        _same_bits(g, want)


def test_an_activation_that_is_returned_is_not_recomputed():
    # `a` is alive until the end anyway (it is returned): a second copy for its late use only adds a buffer
    def fn(x):
        a = tracer.tanh(x)
        s = a.sum()
        for _ in range(5):
            s = s * 1.5 + 1.0
        return a, (a @ x) * s
    x = np.ones((512, 512), "float32")
    mod = tracer.trace(fn, x)
    new = ir.transform.RecomputeActivations()(mod)
    assert [b.value.op for b in new["main"].bindings].count("tanh") == 1
    peaks = []
    for m in (mod, new):
        ex = ir.Executor(m)
        ex["main"](x)
        peaks.append(ex.stats.peak_bytes)
    assert peaks[1] <= peaks[0]


@pytest.mark.parametrize("fn", [lambda x: x.mean(), lambda x: x.reshape(1, -1).mean(axis=1, keepdims=True)],
                         ids=["0d", "keepdims"])
def test_mean_over_a_count_that_float32_cannot_hold(fn):
    # np.mean divides by the count as an intp (in float64, rounded once); a Python int count is cast to
    # float32 first, and 2**24 + 1 becomes 2**24: the mean of 3.0 repeated came out 3.0000002
    x = np.broadcast_to(np.float32(3.0), (2**24 + 1,))  # a view: no 64 MiB array
    want, *got = _both(fn, x)
    assert float(want.reshape(())) == 3.0
    for g in got:
        _same_bits(g, want)


def test_a_generated_step_with_planned_storage_runs_in_threads_at_once():
    # planned storage (ir.runtime.storage) was one set of arrays per function: two calls at once (NumPy releases
    # the GIL in its kernels) wrote into each other's intermediates and returned wrong values (111 of 120)
    import threading

    from tests.ir.adjoints import adjoint
    rng = np.random.default_rng(0)
    w1, w2 = rng.standard_normal((256, 512)).astype("float32") * 0.05, rng.standard_normal((512, 256)).astype(
        "float32") * 0.05
    xs = [rng.standard_normal((256, 256)).astype("float32") for _ in range(4)]
    mod = ir.transform.optimize()(adjoint(lambda x, w1, w2: (tracer.tanh(tracer.exp(x @ w1 * 0.1) * 0.5) @ w2).sum(),
                                          xs[0], w1, w2))
    step = ir.Executor(mod)["main_adjoint"]
    step(xs[0], w1, w2)
    assert step.storage  # the generated function runs from the second call, in planned storage
    want = [step(x, w1, w2)[1][1].copy() for x in xs]
    wrong = []

    def worker(k):
        for rep in range(12):
            i = (k + rep) % len(xs)
            if not np.array_equal(step(xs[i], w1, w2)[1][1], want[i]):
                wrong.append(i)
    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not wrong
