"""Minor page faults per training step (issue 23): the GPT, the MLP and the tiny MLP, each in its own process.

A step whose large arrays are allocated anew on every call faults their pages in again each time (glibc
hands blocks above its mmap threshold back to the kernel when NumPy frees them). This script counts
`resource.getrusage(RUSAGE_SELF).ru_minflt` over a run of steps, in a child process per workload with
one thread and without torch imported (torch's allocations raise glibc's thresholds and hide the faults),
and prints faults per step, the median step time and the executor's `peak_bytes`.

    python -m benchmarks.faults                 # every workload, 3 processes each, interleaved
    python -m benchmarks.faults --only gpt --processes 5 --steps 30
    TRACEGRAD_KERNELS=numpy python -m benchmarks.faults

The numbers of a shared machine drift: compare ratios measured in one run.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ONE_THREAD = {v: "1" for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS")}
WORKLOADS = ("gpt", "mlp", "tiny")


def _build(name: str):
    from benchmarks import workloads as w
    from benchmarks.step_speed import make_problem
    if name == "gpt":
        return w.gpt_tracegrad(w.GPT_SHAPE)
    sizes, batch = ((784, 1024, 1024, 10), 256) if name == "mlp" else ((64, 64, 64, 10), 32)
    return w.mlp_tracegrad(*make_problem(sizes, batch))


def measure(name: str, steps: int, warm: int = 3) -> dict:
    """{faults, ms, peak}: minor faults per step and median step milliseconds over `steps` calls after `warm`
    untimed ones, and the executor's peak bytes, for workload `name` in this process."""
    import resource
    step = _build(name)
    for _ in range(warm):
        step()
    times = []
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    if "torch" in sys.modules:
        raise RuntimeError("benchmarks.faults: torch was imported; its allocator hides tracegrad's faults")
    return {"faults": faults / steps, "ms": 1e3 * statistics.median(times), "peak": step.stats().peak_bytes}


def _child(name: str, steps: int) -> dict:
    env = {**os.environ, **ONE_THREAD}
    code = (f"import json, sys; sys.path.insert(0, {str(ROOT)!r}); from benchmarks.faults import measure; "
            f"print(json.dumps(measure({name!r}, {steps})))")
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, check=True, capture_output=True,
                         text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", choices=WORKLOADS, action="append", help="a workload (repeatable; default all)")
    p.add_argument("--processes", type=int, default=3, help="child processes per workload, interleaved")
    p.add_argument("--steps", type=int, default=20, help="timed steps per process")
    args = p.parse_args(argv)
    names = args.only or list(WORKLOADS)
    rows: dict[str, list[dict]] = {n: [] for n in names}
    for _ in range(args.processes):
        for n in names:
            rows[n].append(_child(n, args.steps))
    print(f"{'workload':10} {'faults/step':>12} {'step ms':>9} {'peak_bytes':>12}   (1 thread, no torch, "
          f"{args.processes} processes x {args.steps} steps, medians)")
    for n in names:
        r = rows[n]
        faults = statistics.median(x["faults"] for x in r)
        ms = statistics.median(x["ms"] for x in r)
        print(f"{n:10} {faults:12.0f} {ms:9.2f} {r[0]['peak']:12d}")


if __name__ == "__main__":
    main()
