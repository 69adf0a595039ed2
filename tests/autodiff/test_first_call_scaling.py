"""The first call of a compiled step (trace, Gradient, clean-up passes, verification, executor compile,
first run) does work linear in the model's depth. Measured by counting calls, never by timing: a
pass that rescans every binding per binding, or re-runs inference per use, shows as a call count
that grows faster than the number of layers."""
import gc
import sys
from collections import Counter

import numpy as np

import autodiff
import nn
import tracer
from ir.transform.base import paused_gc


def first_call_calls(depth: int) -> Counter:
    """Python and C function calls made by the first call of value_and_grad on a depth-layer MLP,
    by package (ir, ops, transform, autodiff, tracer, ...; "C" for builtins)."""
    rng = np.random.default_rng(0)
    ws = [nn.Parameter(rng.standard_normal((8, 8)).astype("float32")) for _ in range(depth)]
    bs = [nn.Parameter(np.zeros(8, "float32")) for _ in range(depth)]
    x = rng.standard_normal((4, 8)).astype("float32")

    def loss(x):
        h = x
        for w, b in zip(ws, bs, strict=True):
            h = tracer.relu(h @ w + b)
        return tracer.log_softmax(h, axis=1).sum()

    vg = autodiff.value_and_grad(loss, wrt=ws + bs)
    counts: Counter = Counter()

    def profile(frame, event, arg):
        if event == "call":
            parts = frame.f_code.co_filename.replace("\\", "/").split("/")
            counts[parts[-2] if len(parts) > 1 else "?"] += 1
        elif event == "c_call":
            counts["C"] += 1

    sys.setprofile(profile)
    try:
        vg(x)
    finally:
        sys.setprofile(None)
    return counts


def test_first_call_work_grows_linearly_with_depth():
    small, large = first_call_calls(16), first_call_calls(64)
    total_small, total_large = sum(small.values()), sum(large.values())
    # 4x the layers: at most 4x the calls (a fixed part makes it a little less), with 10% slack
    assert total_large <= 4.4 * total_small, (total_small, total_large, small, large)
    assert total_large >= 3 * total_small, (total_small, total_large)  # the count does see the layers
    for part, n in small.items():
        if n >= 200:  # every package alike: a quadratic pass cannot hide behind linear ones
            assert large[part] <= 4.4 * n, (part, n, large[part])


def test_paused_gc_restores_the_collector_as_it_was():
    assert gc.isenabled()
    with paused_gc():
        assert not gc.isenabled()
        with paused_gc():  # nested (a grad inside a trace): the inner one leaves it paused
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with paused_gc():
            pass
        assert not gc.isenabled()  # a caller who turned it off keeps it off
    finally:
        gc.enable()


def test_tracing_runs_with_the_collector_paused_and_resumes_it():
    seen = []
    w = nn.Parameter(np.ones(3, "float32"))

    def f(x):
        seen.append(gc.isenabled())
        return tracer.exp(x * w).sum()

    value, grad = autodiff.value_and_grad(f, wrt=w)(np.full(3, 2.0, "float32"))
    assert seen == [False] and gc.isenabled()
    np.testing.assert_allclose(np.asarray(grad), 2 * np.exp(2.0 * np.ones(3)), rtol=1e-6)
