"""numba's tiered start (ir.runtime.numba_hook): the first calls run NumPy's kernels while numba loads on a
background thread, later ones numba's; TRACEGRAD_KERNELS=numba-sync loads on the first call, =numpy never.

The suite runs with numba-sync (tests/conftest.py), so the tiers run here in subprocesses with the variable
set as a user would have it. Nothing is timed: what is checked is which kernels each call ran, that numba
was not imported before the first call finished, and the values of both tiers against float64."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]

# a float32 layer_norm + softmax step large enough for numba's kernels (16384 elements), and an SGD update
# large enough for its loop; prints one JSON line of what each tier ran and computed
_STEP = textwrap.dedent("""
    import json, sys
    import numpy as np
    import autodiff, tracer
    from ir.runtime import numba_hook, numba_optim
    from ir.runtime.instructions import SPEC

    seen = {}
    start = numba_hook.start
    def spy():
        seen.setdefault("numba_at_start", "numba" in sys.modules)
        start()
    numba_hook.start = spy

    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 512)).astype("float32")
    w = tracer.tensor(rng.standard_normal((512, 512)).astype("float32") * 0.05)
    gamma = tracer.tensor(np.linspace(0.5, 1.5, 512).astype("float32"))
    beta = tracer.tensor(np.linspace(-0.2, 0.2, 512).astype("float32"))

    def loss(x):
        h = tracer.layer_norm(x @ w, gamma, beta)
        return (tracer.softmax(h, axis=-1) * h).sum()

    step = autodiff.value_and_grad(loss, wrt=[w, gamma, beta])

    def kernels():
        fns = [i[1] for i in step.last.step.instrs if i[0] == SPEC]
        return sorted({getattr(f, "func", f).__module__ or "" for f in fns if callable(f)} & {
            "ir.runtime.numba_composite", "ir.runtime.numba_gen", "ir.runtime.numba_hook"})

    out = {"ready_at_first": numba_hook.ready()}
    value, grads = step(x)
    out["first"] = [float(value)] + [g.numpy().astype("float64").tolist() for g in grads]
    out["first_kernels"] = kernels()
    out["numba_after_first_compile"] = seen.get("numba_at_start")
    out["tiered"] = step.last.step._tiered
    out["waited"] = numba_hook.wait(120)
    value, grads = step(x)
    out["later"] = [float(value)] + [g.numpy().astype("float64").tolist() for g in grads]
    out["later_kernels"] = kernels()
    out["same_object"] = step.last.step is step.last.executor["main_adjoint"]
    p = np.ones(1 << 16, np.float32)
    out["sgd"] = numba_optim.sgd(p, p * 0.5, None, 0.1, 0, 0, 0, False, False, True)
    out["numba_imported"] = "numba" in sys.modules
    print("RESULT", json.dumps(out))
""")


def _run(kernels: str | None) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("TRACEGRAD_KERNELS", "TRACEGRAD_VERIFY")}
    env["PYTHONPATH"] = str(ROOT)
    if kernels is not None:
        env["TRACEGRAD_KERNELS"] = kernels
    out = subprocess.run([sys.executable, "-c", _STEP], env=env, cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    line = next(x for x in out.stdout.splitlines() if x.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


def _reference():
    """The step in float64 with NumPy (the value and the gradients of w, gamma, beta)."""
    import autodiff
    import tracer
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 512)).astype("float32").astype("float64")
    w = tracer.tensor((rng.standard_normal((512, 512)).astype("float32") * 0.05).astype("float64"))
    gamma = tracer.tensor(np.linspace(0.5, 1.5, 512).astype("float32").astype("float64"))
    beta = tracer.tensor(np.linspace(-0.2, 0.2, 512).astype("float32").astype("float64"))

    def loss(x):
        h = tracer.layer_norm(x @ w, gamma, beta)
        return (tracer.softmax(h, axis=-1) * h).sum()
    value, grads = autodiff.value_and_grad(loss, wrt=[w, gamma, beta])(x)
    return [float(value)] + [g.numpy() for g in grads]


def _close(got, want):
    assert abs(got[0] - want[0]) <= 1e-5 * max(1.0, abs(want[0]))
    for g, r in zip(got[1:], want[1:], strict=True):
        g = np.asarray(g)
        scale = np.abs(r).max()
        np.testing.assert_allclose(g, r, rtol=0, atol=1e-5 * max(scale, 1e-3))


@pytest.fixture(scope="module")
def reference():
    return _reference()


def test_tiered_start_runs_numpy_first_then_numba(reference):
    pytest.importorskip("numba")
    r = _run(None)
    assert r["ready_at_first"] is False  # asked before any kernel: starts the load, never blocks
    assert r["numba_after_first_compile"] is False  # the load started after the first call, nothing before it
    assert r["first_kernels"] == [] and r["tiered"] is True  # NumPy's kernels for the first call
    assert r["waited"] is True
    assert r["later_kernels"] != []  # made again with numba's softmax / layer_norm
    assert r["same_object"] is True  # steps and glue keep the object they hold
    assert r["sgd"] is True and r["numba_imported"] is True
    _close(r["first"], reference)
    _close(r["later"], reference)


def test_numba_sync_gives_numbas_kernels_from_the_first_call(reference):
    pytest.importorskip("numba")
    r = _run("numba-sync")
    assert r["ready_at_first"] is True and r["first_kernels"] != [] and r["tiered"] is False
    assert r["later_kernels"] == r["first_kernels"]
    _close(r["first"], reference)
    _close(r["later"], reference)


def test_numpy_never_loads_numba(reference):
    r = _run("numpy")
    assert r["ready_at_first"] is False and r["waited"] is False
    assert r["first_kernels"] == [] == r["later_kernels"] and r["tiered"] is False
    assert r["sgd"] is False and r["numba_imported"] is False
    assert r["numba_after_first_compile"] is None  # no load was ever started
    _close(r["first"], reference)


def test_prepare_runs_each_loader_once_before_ready(monkeypatch):
    pytest.importorskip("numba")
    from ir.runtime import numba_hook
    monkeypatch.setattr(numba_hook, "loaded", False)
    monkeypatch.setattr(numba_hook, "SYNC", True)
    monkeypatch.setattr(numba_hook, "_queue", [])
    monkeypatch.setattr(numba_hook, "_queued", set())
    ran = []
    numba_hook.prepare("a", lambda: ran.append("a"))
    numba_hook.prepare("a", lambda: ran.append("again"))  # the same key: queued once
    numba_hook.prepare("b", lambda: 1 / 0)  # a failing loader is skipped: its caller meets the error itself
    numba_hook.prepare("c", lambda: ran.append("c"))
    assert numba_hook.ready() is True
    assert ran == ["a", "c"] and numba_hook._queue == []
    numba_hook.prepare("d", lambda: ran.append("d"))  # once loaded, callers make kernels themselves
    assert ran == ["a", "c"] and numba_hook._queue == []


def test_small_functions_are_not_tiered(monkeypatch):
    # a function none of whose kernels asked for numba is never made again
    import autodiff
    import tracer
    from ir.runtime import numba_hook
    monkeypatch.setattr(numba_hook, "loaded", False)
    monkeypatch.setattr(numba_hook, "SYNC", False)
    waits = numba_hook.waits
    w = tracer.tensor(np.ones((4, 4), "float32"))
    step = autodiff.value_and_grad(lambda x: tracer.softmax(x @ w, axis=-1).sum(), wrt=[w])
    step(np.ones((2, 4), "float32"))
    assert numba_hook.waits == waits and step.last.step._tiered is False


_FORK = textwrap.dedent("""
    import multiprocessing as mp
    from ir.runtime import numba_hook
    def child(q):
        q.put(numba_hook.ready())
    if __name__ == "__main__":
        assert numba_hook.ready() is False  # the load starts
        ctx = mp.get_context("fork")
        q = ctx.Queue()
        p = ctx.Process(target=child, args=(q,))
        p.start()  # waits for the load: the child never sees a half-imported numba
        print("CHILD", q.get(timeout=120), numba_hook.loaded)
        p.join()
""")


def test_a_fork_during_the_load_waits_for_it():
    pytest.importorskip("numba")
    if not hasattr(os, "fork"):
        pytest.skip("no fork")
    env = {k: v for k, v in os.environ.items() if k != "TRACEGRAD_KERNELS"}
    env["PYTHONPATH"] = str(ROOT)
    out = subprocess.run([sys.executable, "-c", _FORK], env=env, cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "CHILD True True" in out.stdout
    assert "Exception ignored" not in out.stderr  # no fork handler released a lock it never took
