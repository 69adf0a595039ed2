"""The GPT's kernels at 1 and 2 threads with the 2-thread choices switched one at a time (issue 23, two threads).

    python -m benchmarks.thread_variants [gpt|mlp] [--rounds N] [SPEC ...]

A SPEC is THREADS[:VARIANT[+VARIANT...]]; the default runs 1, 2, 2:nosplit and 2:rows2. Variants:
  nosplit   stacked matmuls and stacks whole on the caller (ir.runtime.split2 off)
  rows2     the layer norm's row kernels in their prange form from half of PARALLEL_SIZE (ROW_WEIGHT = 2)
  noconcat  the q/k/v gradient as reshape copies and a concat (ir.runtime.concat_heads off)
Each SPEC is a worker of benchmarks.thread_scaling (its per-kernel timers, its thread variables), asked in
turn for one step per round; per kernel the best round is kept (on a shared machine the best of many short
rounds is the closest to a quiet one), and the step's best and median close the table.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys

from benchmarks.thread_scaling import GROUPS

DEFAULT = ("1", "2", "2:nosplit", "2:rows2")


def _patch(variants: list[str]) -> None:
    from ir.runtime import concat_heads, numba_threads, split2
    if "nosplit" in variants:
        split2.threads = lambda: 1
    if "rows2" in variants:
        numba_threads.ROW_WEIGHT = 2
    if "noconcat" in variants:
        concat_heads.rewrite = lambda fn: fn


def _start(workload: str, spec: str):
    threads, _, variants = spec.partition(":")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NUMBA_", "OPENBLAS_", "OMP_", "MKL_"))}
    env.update({v: threads for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMBA_NUM_THREADS",
                                     "MKL_NUM_THREADS")})
    env["OPENBLAS_THREAD_TIMEOUT"] = "4"
    p = subprocess.Popen([sys.executable, "-m", "benchmarks.thread_variants", "--worker", workload, variants],
                         env=env, text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    p.stdout.readline()
    return p


def _step(p) -> dict:
    """One step of worker p: its per-kernel seconds."""
    p.stdin.write("1\n")
    p.stdin.flush()
    return json.loads(p.stdout.readline())


def main(argv: list[str]) -> None:
    rounds = int(argv[argv.index("--rounds") + 1]) if "--rounds" in argv else 40
    words = [a for i, a in enumerate(argv) if not a.startswith("-") and (i == 0 or argv[i - 1] != "--rounds")]
    workload = words.pop(0) if words and words[0] in ("gpt", "mlp") else "gpt"
    specs = words or list(DEFAULT)
    workers = [_start(workload, s) for s in specs]
    procs = [(p, []) for p in workers]
    for _ in range(rounds):
        for p, rows in procs:
            rows.append(_step(p))
    for p in workers:
        p.stdin.close()
        p.wait()
    keys = set().union(*(r for _, rows in procs for r in rows)) - {"~step"}
    best = [{k: min(r.get(k, 0.0) for r in rows) * 1e3 for k in keys} for _, rows in procs]
    print(f"{workload}: best of {rounds} interleaved steps, ms; load average {os.getloadavg()[0]:.1f}")
    print(f"{'':44}" + "".join(f"{s:>12}" for s in specs))
    for k in sorted(keys, key=lambda k: -max(b[k] for b in best)):
        if max(b[k] for b in best) >= 0.1:
            print(f"{k[:43]:44}" + "".join(f"{b[k]:12.2f}" for b in best))
    left = set(keys)
    for name, member in GROUPS:
        group = {k for k in left if member(k)}
        left -= group
        print(f"{'= ' + name:44}" + "".join(f"{sum(b[k] for k in group):12.2f}" for b in best))
    steps = [[r["~step"] * 1e3 for r in rows] for _, rows in procs]
    print(f"{'= step (best)':44}" + "".join(f"{min(s):12.2f}" for s in steps))
    print(f"{'= step (median)':44}" + "".join(f"{statistics.median(s):12.2f}" for s in steps))


if __name__ == "__main__":
    if "--worker" in sys.argv:
        i = sys.argv.index("--worker")
        _patch(sys.argv[i + 2].split("+") if len(sys.argv) > i + 2 else [])
        from benchmarks.thread_scaling import worker
        worker(sys.argv[i + 1])
    else:
        main(sys.argv[1:])
