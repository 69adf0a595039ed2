"""Review of issue 23's second round of fast paths (flat optimizer state, split2's worker, the compiled step's
program): each test is a finding, written as a user of PyTorch would meet it."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tracer
from nn import optim

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _loaded():
    pytest.importorskip("numba")
    from ir.runtime import numba_hook
    numba_hook.ready()
    if not numba_hook.wait(120):
        pytest.skip("numba kernels switched off (TRACEGRAD_KERNELS=numpy) or not loadable")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_adamw_gradient_that_is_its_parameter_matches_the_numpy_update(dtype):
    """AdamW's decoupled decay scales p in place before the update reads g (torch: param.mul_ then grad), so a
    gradient that is the parameter's own array is read scaled; the flat numba loop read it unscaled."""
    _loaded()
    rng = np.random.default_rng(0)
    init = [rng.standard_normal(s).astype(dtype) for s in [(4, 5), (3,)]]
    got, want = ([tracer.tensor(a.copy(), requires_grad=True) for a in init] for _ in range(2))
    fast, ref = optim.AdamW(got, lr=0.1, weight_decay=0.5), optim.AdamW(want, lr=0.1, weight_decay=0.5)
    ref._flat_kind = None  # the per-parameter NumPy update
    for _ in range(3):
        fast.step([p._data for p in got])
        ref.step([p._data for p in want])
    for a, b in zip(got, want, strict=True):
        assert a.numpy().tobytes() == b.numpy().tobytes()


_INTERRUPTED_SPLIT = textwrap.dedent("""
    import os, signal, threading, time
    from ir.runtime import split2
    done = []

    def slow(tag):
        def half():
            if tag == "a":  # Ctrl-C while the caller waits for this half
                time.sleep(0.1)
                os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.3)
            done.append(tag)
        return half

    try:
        split2.run(lambda: None, slow("a"))
        raise SystemExit("no KeyboardInterrupt")
    except KeyboardInterrupt:
        assert done == ["a"], f"the caller went on before the worker's half ended: {done}"
    split2.run(lambda: None, slow("b"))
    assert done == ["a", "b"], done
    split2.run(lambda: None, slow("c"))
    assert done == ["a", "b", "c"], done

    class LateSignal:  # the signal's exception just after the wait took the lock
        def __init__(self, lock):
            self.lock = lock

        def acquire(self):
            self.lock.acquire()
            raise KeyboardInterrupt

    split2._worker.done = LateSignal(split2._worker.done)
    try:
        split2.run(lambda: None, slow("d"))
        raise SystemExit("no KeyboardInterrupt")
    except KeyboardInterrupt:
        assert done[-1] == "d", done
    split2.run(lambda: None, slow("e"))  # neither hangs nor returns early
    assert done[-1] == "e", done
    print("ok")
""")


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT to itself")
def test_split2_interrupted_while_waiting_for_its_worker():
    """Ctrl-C (a notebook's interrupt) while split2.run waited for the worker's half: the wait was cut short, so
    the caller went on while the worker still wrote the call's arrays, the next split's task was cleared by the
    old one, and the worker died on releasing an unlocked lock (every later split then hung)."""
    env = {**os.environ, "PYTHONPATH": ROOT}
    proc = subprocess.run([sys.executable, "-c", _INTERRUPTED_SPLIT], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stdout + proc.stderr


@pytest.mark.parametrize("cls", [optim.Adam, optim.AdamW, optim.RMSprop, optim.Adagrad, optim.Adadelta, optim.SGD])
def test_numpy_scalar_lr_from_a_scheduler_gives_the_float_lr_s_bits(cls):
    """LambdaLR with a NumPy lambda sets group["lr"] to an np.float64, which is no weak scalar: the NumPy update
    of float32 parameters then ran in float64 (other bits than with the same lr as a float, and than torch,
    which takes it as a scalar), while the flat numba loop rounded it to float32 (other bits than NumPy's)."""
    rng = np.random.default_rng(1)
    init = rng.standard_normal((5, 7)).astype("float32")
    grads = [rng.standard_normal((5, 7)).astype("float32") for _ in range(4)]
    want = None
    for as_numpy in (False, True):
        for flat in (False, True):
            p = tracer.tensor(init.copy(), requires_grad=True)
            opt = cls([p], lr=0.5)
            if not flat:
                opt._flat_kind = None
            sched = optim.lr_scheduler.LambdaLR(opt, (lambda e: np.exp(-0.3 * e)) if as_numpy
                                                else (lambda e: float(np.exp(-0.3 * e))))
            for g in grads:
                opt.step([g])
                sched.step()
            if want is None:
                want = p.numpy().tobytes()
            assert p.numpy().tobytes() == want, (as_numpy, flat)


@pytest.mark.parametrize("cls, name", [(optim.AdamW, "weight_decay"), (optim.RMSprop, "weight_decay"),
                                       (optim.Adagrad, "eps"), (optim.Adadelta, "eps"), (optim.RMSprop, "eps"),
                                       (optim.SGD, "momentum")])
def test_numpy_scalar_option_gives_the_float_option_s_bits(cls, name):
    """Options other than lr written into a group as NumPy scalars: as lr (fixed by c12f519 in Optimizer.step),
    kept as Python floats, on the NumPy update and the flat loop alike."""
    rng = np.random.default_rng(2)
    init = rng.standard_normal((5, 7)).astype("float32")
    grads = [rng.standard_normal((5, 7)).astype("float32") for _ in range(4)]
    got = []
    for value in (0.001, np.float64(0.001)):
        for flat in (False, True):
            p = tracer.tensor(init.copy(), requires_grad=True)
            opt = cls([p], lr=0.1)
            if not flat:
                opt._flat_kind = None
            opt.param_groups[0][name] = value
            for g in grads:
                opt.step([g])
            assert type(opt.param_groups[0][name]) is float
            got.append(p.numpy().tobytes())
    assert len(set(got)) == 1


def test_a_held_state_entry_stays_the_live_state_after_add_param_group():
    """torch (and the per-parameter NumPy update) update opt.state entries in place, so a reference taken once stays
    the live state; on the flat path add_param_group (also p.data = ..., or the tiered start's NumPy first steps)
    replaced the entries by views of new buffers and the held array was left behind (now the parts that still fit
    keep their buffers and views)."""
    _loaded()
    p = tracer.tensor(np.ones((4, 4), "float32"), requires_grad=True)
    opt = optim.Adam([p], lr=0.1)
    opt.step([np.ones((4, 4), "float32")])
    held = opt.state[0]["exp_avg"]
    opt.add_param_group({"params": [tracer.tensor(np.ones(3, "float32"), requires_grad=True)]})
    opt.step([np.ones((4, 4), "float32"), np.ones(3, "float32")])
    assert held is opt.state[0]["exp_avg"]
