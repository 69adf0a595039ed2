"""Before and after this session's compile-time work, side by side in one process: each workload's step
built with the generic kernels, cleanup() only and allocating executor ("before"), and with each of
kernel specialization, optimize() and planned storage added in turn. CPU time per step (medians of
interleaved rounds), minor page faults per step and the executor's peak bytes. Every variant's model
is alive at once, which changes what the allocator keeps: `--only` builds "before" and one variant.

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python benchmarks/compile_ab.py [--rounds N] [--quick]
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import ir  # noqa: E402
import ir.transform  # noqa: E402
from benchmarks import workloads as w  # noqa: E402

VARIANTS = {  # name: (specialize kernels, run optimize(), plan storage)
    "before": (False, False, False),
    "+specialize": (True, False, False),
    "+optimize": (True, True, False),
    "+storage (today)": (True, True, True),
}


def build(workload: str, specialize: bool, optimize: bool, storage: bool):
    """One step of `workload` compiled under the given switches (they are read when the step compiles)."""
    real = ir.transform.optimize
    ir.Executor.specialize_kernels, ir.Executor.plan_storage = specialize, storage
    if not optimize:
        ir.transform.optimize = lambda: (lambda mod: mod)
    try:
        if workload == "gpt":
            step = w.gpt_tracegrad(w.GPT_SHAPE)
        else:
            sizes, batch = ((784, 1024, 1024, 10), 256) if workload == "mlp" else ((64, 64, 64, 10), 32)
            step = w.mlp_contenders(sizes, batch, compile_torch=False)["tracegrad"]()
        step()
        step()
    finally:
        ir.transform.optimize = real
        ir.Executor.specialize_kernels, ir.Executor.plan_storage = True, True
    return step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--quick", action="store_true", help="3 rounds")
    parser.add_argument("--only", choices=[n for n in VARIANTS if n != "before"], help="before and this variant")
    a = parser.parse_args()
    rounds = 3 if a.quick else a.rounds
    print(f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}, load average {os.getloadavg()[0]:.1f}")
    print("| workload | variant | CPU ms per step | vs before | minor faults per step | peak MiB |")
    print("|---|---|---|---|---|---|")
    for workload, repeat in (("tiny", 200), ("mlp", 3), ("gpt", 1)):
        names = [n for n in VARIANTS if a.only is None or n in ("before", a.only)]
        steps = {name: build(workload, *VARIANTS[name]) for name in names}
        times: dict[str, list[float]] = {name: [] for name in steps}
        faults: dict[str, list[float]] = {name: [] for name in steps}
        for _ in range(rounds):
            for name, step in steps.items():
                start, f0 = time.process_time(), resource.getrusage(resource.RUSAGE_SELF).ru_minflt
                for _ in range(repeat):
                    step()
                times[name].append((time.process_time() - start) / repeat * 1e3)
                faults[name].append((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0) / repeat)
        base = statistics.median(times["before"])
        for name, step in steps.items():
            t = statistics.median(times[name])
            print(f"| {workload} | {name} | {t:.3f} | {t / base:.2f} | {statistics.median(faults[name]):.0f} | "
                  f"{step.stats().peak_bytes / 2**20:.2f} |")


if __name__ == "__main__":
    main()
