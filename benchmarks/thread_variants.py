"""The GPT's kernels at 1 and 2 threads with the 2-thread choices switched one at a time (issue 23, two threads).

    python -m benchmarks.thread_variants [gpt|mlp] [--rounds N] [SPEC ...]

A SPEC is THREADS[:VARIANT[+VARIANT...]]; the default runs 1, 2, 2:nosplit and 2:rows2. Variants:
  nosplit   stacked matmuls and stacks whole on the caller (ir.runtime.split2 off)
  rows2     the layer norm's row kernels in their prange form from half of PARALLEL_SIZE (ROW_WEIGHT = 2)
  noconcat  the q/k/v gradient as reshape copies and a concat (ir.runtime.concat_heads off)
  wq        numba's workqueue threading layer in place of OpenMP (NUMBA_THREADING_LAYER=workqueue)
Each SPEC is a worker of benchmarks.thread_scaling (its per-kernel timers, its thread variables), asked in
turn for one step per round (after WARM unmeasured ones); per kernel the best round is kept (on a shared machine
the best of many short rounds is the closest to a quiet one), and the step's best and median close the table.
Then the quiet steps: during each step the CPU time the machine spent outside this benchmark's processes is read
from /proc (ticks of 10 ms); a step during which others took under QUIET of a core counts as quiet, and each
spec's median over its quiet steps, with the per-round ratio against the first spec (rounds where both were
quiet: median and quartiles), ends it.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys

from benchmarks.thread_scaling import GROUPS

DEFAULT = ("1", "2", "2:nosplit", "2:rows2")
QUIET = 0.25  # cores taken by other processes during a step, at most, for the step to count as quiet
# unmeasured steps each worker runs before its measured one in a round: the first 2-thread step after another
# worker's 1-thread step ran slow whatever its variant (the same variant twice in one run, 150 rounds, quiet steps:
# 1.04x the 1-thread step right after it, 1.43x later in the round), the idle core's wake-up on this virtual
# machine; a user's steps follow each other on the same threads
WARM = 1


def _patch(variants: list[str]) -> None:
    from ir.runtime import concat_heads, numba_threads, split2
    if "nosplit" in variants:
        split2.threads = lambda: 1
    if "rows2" in variants:
        numba_threads.ROW_WEIGHT = 2
    if "wq" in variants:  # before numba is imported
        os.environ["NUMBA_THREADING_LAYER"] = "workqueue"
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


def _ticks(pids) -> tuple[int, int]:
    """(busy ticks of the whole machine, ticks of `pids` and this process), from /proc; (0, 0) without it."""
    try:
        with open("/proc/stat") as f:
            cpu = [int(v) for v in f.readline().split()[1:]]
        own = sum(os.times()[:2]) * os.sysconf("SC_CLK_TCK")
        for pid in pids:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rpartition(")")[2].split()
            own += int(fields[11]) + int(fields[12])  # utime, stime of every thread
    except (OSError, ValueError):
        return 0, 0
    return sum(cpu) - cpu[3] - cpu[4], own  # less idle and iowait


def _step(p, pids=(), warm=WARM) -> dict:
    """One step of worker p after `warm` unmeasured ones: its per-kernel seconds, and under "~others" the cores
    others took meanwhile."""
    for _ in range(warm):
        p.stdin.write("1\n")
        p.stdin.flush()
        p.stdout.readline()
    busy, own = _ticks(pids)
    p.stdin.write("1\n")
    p.stdin.flush()
    row = json.loads(p.stdout.readline())
    busy2, own2 = _ticks(pids)
    ticks = max(0, (busy2 - busy) - (own2 - own))
    row["~others"] = ticks / os.sysconf("SC_CLK_TCK") / max(row["~step"], 1e-3)
    return row


def _quiet(procs, specs) -> None:
    """Medians over quiet steps and the per-round ratios against the first spec."""
    rows0 = procs[0][1]
    print(f"quiet steps (others under {QUIET} of a core; median of others' cores over all steps "
          f"{statistics.median(r['~others'] for _, rows in procs for r in rows):.2f}):")
    for spec, (_, rows) in zip(specs, procs, strict=True):
        quiet = [r["~step"] * 1e3 for r in rows if r["~others"] < QUIET]
        line = f"  {spec:16} {len(quiet):3} quiet, median {statistics.median(quiet):7.2f} ms" if quiet else \
            f"  {spec:16}   0 quiet"
        ratios = sorted(a["~step"] / b["~step"] for a, b in zip(rows0, rows, strict=True)
                        if a["~others"] < QUIET and b["~others"] < QUIET)
        if len(ratios) >= 3 and rows is not rows0:
            q = statistics.quantiles(ratios, n=4)
            line += f"; {specs[0]} / {spec} per round: median {q[1]:.3f} (quartiles {q[0]:.3f}-{q[2]:.3f}, " \
                    f"{len(ratios)} rounds)"
        print(line)


def main(argv: list[str]) -> None:
    rounds = int(argv[argv.index("--rounds") + 1]) if "--rounds" in argv else 40
    words = [a for i, a in enumerate(argv) if not a.startswith("-") and (i == 0 or argv[i - 1] != "--rounds")]
    workload = words.pop(0) if words and words[0] in ("gpt", "mlp") else "gpt"
    specs = words or list(DEFAULT)
    workers = [_start(workload, s) for s in specs]
    procs = [(p, []) for p in workers]
    pids = [p.pid for p in workers]
    for _ in range(rounds):
        for p, rows in procs:
            rows.append(_step(p, pids))
    for p in workers:
        p.stdin.close()
        p.wait()
    keys = set().union(*(r for _, rows in procs for r in rows)) - {"~step", "~others"}
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
    _quiet(procs, specs)


if __name__ == "__main__":
    if "--worker" in sys.argv:
        i = sys.argv.index("--worker")
        _patch(sys.argv[i + 2].split("+") if len(sys.argv) > i + 2 else [])
        from benchmarks.thread_scaling import worker
        worker(sys.argv[i + 1])
    else:
        main(sys.argv[1:])
