"""Each contender of `python -m benchmarks` in its own process, timed in interleaved rounds.

A contender is one library (or one tracegrad configuration) on one workload: `Contender(label, library,
env, threads)`. The parent starts one worker process per contender (`python -m benchmarks.harness WORKLOAD
LIBRARY`, with the contender's environment and thread count), one after another so that each first call
runs alone. A worker builds the step (data, weights), times its first call (trace, Gradient and
compile for tracegrad), takes warm-up steps and prints one JSON line; then each line `n` on its stdin is
answered with the mean time of `n` steps (after one unmeasured step) and the minor page faults they took
(`resource.getrusage`). The parent asks the workers of a workload in turn, round after round, so all of them
see the same machine load, and keeps medians over rounds. Libraries never share a process: torch loaded beside
tracegrad raises glibc's allocation thresholds and hides tracegrad's page faults.
"""
from __future__ import annotations

import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS")
# tracegrad's configurations: the plain NumPy kernels, and what a user with the `fast` extra gets by default
# (numba kernels; fusion stays off by default: TRACEGRAD_FUSE=1 measured no better, docs/benchmarks.md).
PLAIN = {"TRACEGRAD_KERNELS": "numpy"}
FAST = {"TRACEGRAD_FUSE": "0"}
MLP_SIZES = {"mlp": ((784, 1024, 1024, 10), 256), "tiny": ((64, 64, 64, 10), 32)}
# Steps per turn: a turn of each worker lasts some tens of milliseconds.
BURST = {"tiny": 100, "mlp": 2, "gpt": 1, "mnist": 1, "wlm": 1, "checkpoint": 1}


def has_module(name: str) -> bool:
    """Whether `name` is importable here (without importing it)."""
    return importlib.util.find_spec(name) is not None


@dataclass(frozen=True)
class Contender:
    """One row: `label` in the table, `library` as the worker builds it, extra environment, BLAS threads."""
    label: str
    library: str
    env: dict = field(default_factory=dict)
    threads: int = 1


# ---------------------------------------------------------------- the worker side


def _mlp_batch_workload(workload: str):
    if workload.startswith("mlp_b"):  # the scaling run: MLP 784-1024-1024-10 at batch N
        return (784, 1024, 1024, 10), int(workload[5:])
    return MLP_SIZES[workload]


def build(workload: str, library: str, quick: bool = False):
    """The zero-argument training step of `workload` in `library`, from benchmarks.workloads."""
    from benchmarks import workloads as w
    torch = None
    if library.startswith("torch"):
        import torch
        torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    compiled = library == "torch.compile"
    if workload in MLP_SIZES or workload.startswith("mlp_b"):
        from benchmarks.step_speed import make_problem
        params, x, one_hot = make_problem(*_mlp_batch_workload(workload))
        if library == "tracegrad":
            return w.mlp_tracegrad(params, x, one_hot)
        if library == "numpy":
            return w.mlp_numpy(params, x, one_hot)
        if library == "jax":
            import jax
            return w.mlp_jax(jax, params, x, one_hot)
        return w.mlp_torch(torch, params, x, one_hot, compiled=compiled)
    if workload == "gpt":
        if library == "jax":
            import jax
            return w.gpt_jax(jax, w.GPT_SHAPE)
        return w.gpt_tracegrad(w.GPT_SHAPE) if library == "tracegrad" else w.gpt_torch(torch, w.GPT_SHAPE, compiled)
    if workload == "mnist":
        return w.mnist_tracegrad() if library == "tracegrad" else w.mnist_torch(torch)
    if workload == "wlm":
        return w.wlm_tracegrad() if library == "tracegrad" else w.wlm_torch(torch)
    if workload == "checkpoint":  # library: "tracegrad none", "torch every", ...
        builders, _ = w.checkpoint_contenders(quick, torch)
        return builders[library]()
    raise ValueError(f"benchmarks.harness: unknown workload {workload!r}")


def worker(workload: str, library: str, quick: bool, first_only: bool) -> None:
    """Build, report the first call, then answer each stdin line `n` with {"step": mean s, "faults": per step}."""
    import resource
    sys.path.insert(0, str(ROOT))
    import benchmarks.workloads  # noqa: F401  imports are not part of the first call
    if library.startswith(("torch", "jax")):
        __import__(library.split(" ")[0].split(".")[0])
    step = build(workload, library, quick)  # data and weights: not part of the first call
    t0 = time.perf_counter()
    step()  # tracegrad traces, differentiates and compiles here; torch.compile and jax.jit compile here
    first = time.perf_counter() - t0
    stats = getattr(step, "stats", None)
    info = {"first": first, "peak": stats().peak_bytes if stats is not None else None,
            "torch_loaded": "torch" in sys.modules}
    if first_only:
        print(json.dumps(info), flush=True)
        return
    for _ in range(2):  # warm-up: caches, BLAS buffers, the executor's pools
        step()
    if library.startswith("tracegrad"):  # numba loads in the background (numba_hook): time its tier, not NumPy's
        from ir.runtime import numba_hook
        if numba_hook.wait(300):
            # then a small function's whole-function program: made after HOT_CALLS calls on a background
            # thread, then timed against the per-op function for 2 * TRIAL_CALLS calls (ir.runtime.numba_program)
            from ir.runtime import numba_program
            for _ in range(numba_program.HOT_CALLS + 1):
                step()
            numba_program.wait(300)
            for _ in range(2 * numba_program.TRIAL_CALLS + 2):
                step()
    print(json.dumps(info), flush=True)
    for line in sys.stdin:
        n = int(line)
        # one unmeasured step first: the first step after another contender's turn runs on cores that idled
        # (on this VM a 2-thread GPT step measured 1.04x of 1 thread there, 1.47x a step later), and a
        # training loop runs step after step
        step()
        f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        t0 = time.perf_counter()
        for _ in range(n):
            step()
        t = time.perf_counter() - t0
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0
        print(json.dumps({"step": t / n, "faults": faults / n}), flush=True)


# ---------------------------------------------------------------- the parent side


def _env(c: Contender, cache: str | None) -> dict:
    env = {**os.environ, **{v: str(c.threads) for v in THREAD_VARS}, **c.env, "PYTHONPATH": str(ROOT)}
    env.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")
    if c.library == "jax" and c.threads == 1:  # XLA's CPU thread pool ignores OMP_NUM_THREADS
        env["XLA_FLAGS"] = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
    if cache is not None:
        env["TRACEGRAD_CACHE"] = cache
    return env


def _start(workload: str, c: Contender, quick: bool, cache: str | None, first_only: bool = False):
    cmd = [sys.executable, "-m", "benchmarks.harness", workload, c.library] + ["--quick"] * quick
    cmd += ["--first-only"] * first_only
    err = tempfile.TemporaryFile("w+")  # a file, not a pipe: a chatty worker never blocks on it
    proc = subprocess.Popen(cmd, cwd=ROOT, env=_env(c, cache), text=True, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=err)
    line = proc.stdout.readline()
    if not line:
        proc.wait()
        err.seek(0)
        err = err.read()
        raise RuntimeError(f"benchmarks: {c.label} on {workload} failed:\n{err[-3000:]}")
    return proc, json.loads(line)


def first_call(workload: str, c: Contender, cache: str | None) -> float:
    """Seconds of the first call (the first step) in a fresh worker process with kernel cache `cache`."""
    proc, info = _start(workload, c, False, cache, first_only=True)
    proc.communicate()
    return info["first"]


def measure(workload: str, contenders: list[Contender], rounds: int, quick: bool = False,
            cache: str | None = None, progress=None, failed=None) -> dict:
    """{label: {step, first, faults, peak}} for one workload: medians over `rounds` interleaved turns. With
    `progress` (a function of one line), a contender whose worker fails is reported there, its label
    appended to `failed`, and left out."""
    procs, rows = {}, {}
    failed = [] if failed is None else failed
    try:
        for c in contenders:
            try:
                procs[c.label], info = _start(workload, c, quick, cache)
            except RuntimeError as e:  # one broken contender does not stop the others' rows
                if progress is None:
                    raise
                progress(str(e))
                failed.append(c.label)
                continue
            if info["torch_loaded"] and not c.library.startswith("torch"):
                raise RuntimeError(f"benchmarks: torch was imported by the {c.label} worker; it hides page faults")
            rows[c.label] = {"first": info["first"], "peak": info["peak"], "steps": [], "faultlist": []}
        burst = BURST.get(workload, 1)
        for r in range(rounds):
            for label, proc in procs.items():
                proc.stdin.write(f"{burst}\n")
                proc.stdin.flush()
                out = json.loads(proc.stdout.readline())
                rows[label]["steps"].append(out["step"])
                rows[label]["faultlist"].append(out["faults"])
            if progress:
                progress(f"  {workload}: round {r + 1}/{rounds}")
    finally:
        for proc in procs.values():
            proc.stdin.close()
            proc.wait()
    return {label: {"step": statistics.median(r["steps"]), "faults": statistics.median(r["faultlist"]),
                    "first": r["first"], "peak": r["peak"]} for label, r in rows.items()}


if __name__ == "__main__":
    _args = [a for a in sys.argv[1:] if not a.startswith("--")]
    worker(_args[0], _args[1], "--quick" in sys.argv, "--first-only" in sys.argv)
