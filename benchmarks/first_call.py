"""The first call of a tracegrad workload, split into phases, in this process (issue 23's first-call target).

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 NUMBA_NUM_THREADS=1 [TRACEGRAD_KERNELS=numpy] \\
        python -m benchmarks.first_call mlp|tiny|gpt [--profile FILE] [--steps N]

prints the build (model and data, benchmarks.workloads) and first-step milliseconds, the time inside trace,
Gradient, the pass pipelines, verify (TRACEGRAD_VERIFY=1 only) and the glue's generation, and whether numba
was imported; `--profile FILE` writes a cProfile of the whole first call. One process per run: the first
call is only first once. `--steps N` then times N more steps and marks the one during which numba's kernels
became ready (the tiered start of ir.runtime.numba_hook: the first steps run on NumPy while numba loads).
"""
from __future__ import annotations

import functools
import os
import sys
import time


def _timed(obj, name: str, label: str, acc: dict) -> None:
    f = getattr(obj, name)

    @functools.wraps(f)
    def g(*a, **k):
        t = time.perf_counter()
        try:
            return f(*a, **k)
        finally:
            acc[label] = acc.get(label, 0.0) + time.perf_counter() - t
    setattr(obj, name, g)


def main(argv: list[str]) -> None:
    """Run the first call of workload argv[0] and print its phases."""
    import autodiff.api as api
    import autodiff.glue as glue
    import benchmarks.workloads  # noqa: F401  imports are not part of the first call (as the harness)
    import ir
    import ir.transform as transform
    from benchmarks.harness import build
    acc: dict = {}
    for obj, name, label in ((api, "trace_function", "trace"), (api.Gradient, "__call__", "gradient"),
                             (transform.Sequential, "__call__", "passes"), (ir, "verify", "verify"),
                             (glue, "build", "glue")):
        _timed(obj, name, label, acc)
    profile = None
    if "--profile" in argv:
        import cProfile
        profile = cProfile.Profile()
        profile.enable()
    t0 = time.perf_counter()
    step = build(argv[0], "tracegrad")
    t1 = time.perf_counter()
    step()
    t2 = time.perf_counter()
    if profile is not None:
        profile.disable()
        profile.dump_stats(argv[argv.index("--profile") + 1])
    phases = " ".join(f"{k} {v * 1e3:.1f}" for k, v in acc.items())
    print(f"{argv[0]} kernels={os.environ.get('TRACEGRAD_KERNELS', 'default')}: first call {(t2 - t0) * 1e3:.1f} ms "
          f"(build {(t1 - t0) * 1e3:.1f}, first step {(t2 - t1) * 1e3:.1f}; inside: {phases}) "
          f"numba imported: {'numba' in sys.modules}")
    n = int(argv[argv.index("--steps") + 1]) if "--steps" in argv else 0
    if n:
        _later_steps(step, n, t1)


def _later_steps(step, n: int, t1: float) -> None:
    """Steps 2..n+1 in ms, with the step where numba's tier took over (ir.runtime.numba_hook) marked '*'."""
    from ir.runtime import numba_hook
    times = []
    switched = None
    for i in range(n):
        t = time.perf_counter()
        step()
        times.append((time.perf_counter() - t) * 1e3)
        if switched is None and numba_hook.loaded:
            switched = i
    ready_at = "never" if switched is None else f"step {switched + 2}, {time.perf_counter() - t1:.2f} s after step 1"
    marks = " ".join(f"{x:.0f}{'*' if i == switched else ''}" for i, x in enumerate(times))
    print(f"  steps 2..{n + 1} ms: {marks} (numba ready before the end of {ready_at})")


if __name__ == "__main__":
    main(sys.argv[1:])
