"""The first call's structure (issue 23's first-call target): what it imports and what it runs, never its time.

numba's import and its first dispatch cost most of a second, so the plain NumPy path and steps whose arrays
are too small for a numba kernel must not import it; the verifier runs on compiled steps only when asked
(TRACEGRAD_VERIFY=1, which tests/conftest.py sets for the suite).
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import autodiff
import ir
import tracer

ROOT = Path(__file__).resolve().parents[2]

# a tiny MLP's value_and_grad, compiled and run (no optimizer: only the compiled step's own kernels)
_STEP = textwrap.dedent("""
    import sys
    import numpy as np
    import autodiff, tracer
    rng = np.random.default_rng(0)
    ws = [tracer.tensor(rng.standard_normal(s).astype("float32")) for s in ((16, 16), (16,), (16, 4), (4,))]
    x = rng.standard_normal((8, 16)).astype("float32")
    def loss(x):
        h = tracer.relu(x @ ws[0] + ws[1]) @ ws[2] + ws[3]
        return -tracer.log_softmax(h).sum(axis=1).mean()
    value, grads = autodiff.value_and_grad(loss, wrt=ws)(x)
    assert np.isfinite(float(value)) and len(grads) == 4
    loaded = sorted(m for m in ("numba", "llvmlite", "scipy.linalg") if m in sys.modules)
    print("LOADED", loaded)
""")


def _loaded(kernels: str | None) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("TRACEGRAD_KERNELS", "TRACEGRAD_VERIFY")}
    env["PYTHONPATH"] = str(ROOT)
    if kernels is not None:
        env["TRACEGRAD_KERNELS"] = kernels
    out = subprocess.run([sys.executable, "-c", _STEP], env=env, cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return next(line for line in out.stdout.splitlines() if line.startswith("LOADED"))


def test_plain_path_never_imports_numba():
    assert _loaded("numpy") == "LOADED []"


def test_small_arrays_never_import_numba():
    # numba installed or not: arrays below the kernels' size threshold keep NumPy's and never load numba
    assert _loaded(None) == "LOADED []"


def _count_verifies(monkeypatch, value: str | None) -> int:
    calls = []
    real = ir.verify
    monkeypatch.setattr(ir, "verify", lambda mod: (calls.append(mod), real(mod))[1])
    if value is None:
        monkeypatch.delenv("TRACEGRAD_VERIFY", raising=False)
    else:
        monkeypatch.setenv("TRACEGRAD_VERIFY", value)
    x = np.linspace(-1, 1, 8).reshape(4, 2)
    w = tracer.tensor(np.linspace(-0.5, 0.5, 6).reshape(2, 3))
    _, (g,) = autodiff.value_and_grad(lambda x: (tracer.tanh(x @ w) ** 2).sum(), wrt=[w])(x)
    t = np.tanh(x @ w.numpy())
    np.testing.assert_allclose(g.numpy(), x.T @ (2 * t * (1 - t ** 2)), rtol=1e-12)
    return len(calls)


@pytest.mark.filterwarnings("ignore::autodiff.StepRemadeWarning")  # three steps, made on purpose
def test_verifier_runs_only_when_asked(monkeypatch):
    assert _count_verifies(monkeypatch, "1") == 1
    assert _count_verifies(monkeypatch, None) == 0
    assert _count_verifies(monkeypatch, "0") == 0


def test_verify_wanted_reads_the_environment(monkeypatch):
    for value, on in (("1", True), ("yes", True), ("", False), ("0", False), ("off", False), ("False", False)):
        monkeypatch.setenv("TRACEGRAD_VERIFY", value)
        assert ir.verifier.wanted() is on, value
    monkeypatch.delenv("TRACEGRAD_VERIFY")
    assert ir.verifier.wanted() is False
