"""What scales from 1 to 2 threads in a tracegrad training step: each kernel of the compiled step timed alone.

    python -m benchmarks.thread_scaling [gpt|mlp] [--rounds N]

One worker process per thread count (1 and 2: NUMBA_NUM_THREADS, OPENBLAS_NUM_THREADS, OMP_NUM_THREADS,
OPENBLAS_THREAD_TIMEOUT=4 as benchmarks/harness.py sets it), asked in turn for two steps per round, the second
measured (the first 2-thread step after the 1-thread worker's ran slow: benchmarks.thread_variants.WARM). A worker
wraps every kernel of the compiled adjoint (ir.runtime.executor's instructions, numba's tier loaded first)
and the optimizer's step in a timer, keyed by op (matmuls by kind and operand shapes; `/nb` marks numba
kernels, `/inplace` a ufunc writing into a dying operand). Per key the best round is kept: on a shared
machine the best of many short rounds is the closest to a quiet one (a 2-thread kernel waits for its slower
half whenever another process holds a core). The last lines group the keys: 2-D GEMMs (OpenBLAS threads
them), stacked matmuls (NumPy calls one small GEMM per matrix: serial), numba kernels (prange from
ir.runtime.numba_threads.PARALLEL_SIZE elements), other NumPy kernels (serial), the optimizer and the rest
(glue, executor), with what each costs at 1 and 2 threads.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import defaultdict

GROUPS = (("2-D GEMM", lambda k: k.startswith("matmul 2-D")), ("stacked matmul", lambda k: k.startswith("matmul st")),
          ("numba kernels", lambda k: "/nb" in k), ("optimizer", lambda k: k == "~optimizer"),
          ("other NumPy kernels", lambda k: not k.startswith("~")))


def _key(c, i, fn) -> str:
    op = c.instr_ops[i]
    module = getattr(getattr(fn, "func", fn), "__module__", "") or ""
    if op == "matmul":
        var = c.bound_var.get(c.instrs[i][4])
        call = next((b.value for b in c.fn.bindings if b.var is var), None)
        if call is not None:
            a, b = (tuple(x.type.shape) for x in call.args)
            kind = "2-D" if len(b) == 2 else "stacked"
            return f"matmul {kind} {'x'.join(map(str, a))}@{'x'.join(map(str, b))}"
    return op + ("/nb" if "numba" in module else "")


def _timed(fn, key, acc):
    clock = time.perf_counter

    def timed(*a, **k):
        t = clock()
        r = fn(*a, **k)
        acc[key] += clock() - t
        return r
    for attr in ("takes_out", "scratch", "fresh"):  # what ir.runtime.storage reads off a planned kernel
        if hasattr(fn, attr):
            setattr(timed, attr, getattr(fn, attr))
    return timed


def worker(workload: str) -> None:
    """Build the step, wrap its kernels, then answer each stdin line with one step's times per key (JSON)."""
    from benchmarks.harness import build
    from ir.runtime import numba_hook
    from ir.runtime.instructions import CALL, SPEC
    step = build(workload, "tracegrad")
    step()
    numba_hook.wait(300)
    step()
    cells = dict(zip(step.__code__.co_freevars, step.__closure__, strict=True))
    vg, opt = cells["vg"].cell_contents, cells["opt"].cell_contents
    c = vg.last.step
    acc: dict = defaultdict(float)
    instrs = list(c.instrs)
    for i, (kind, fn, args, attrs, out) in enumerate(instrs):
        if kind in (CALL, SPEC):
            key = _key(c, i, fn)
            instrs[i] = (kind, _timed(fn, key, acc), args, attrs, out)
            if c.reuse and c.reuse[i] is not None:
                c.reuse[i] = (_timed(c.reuse[i][0], key + "/inplace", acc), c.reuse[i][1])
    c.instrs, c._fast = instrs, None  # the generated function is written again over the timed kernels
    opt.step = _timed(opt.step, "~optimizer", acc)
    step()
    print("{}", flush=True)
    for _ in sys.stdin:
        acc.clear()
        t = time.perf_counter()
        step()
        acc["~step"] = time.perf_counter() - t
        print(json.dumps(acc), flush=True)


def main(argv: list[str]) -> None:
    workload = argv[0] if argv and not argv[0].startswith("-") else "gpt"
    rounds = int(argv[argv.index("--rounds") + 1]) if "--rounds" in argv else 40
    procs = []
    for threads in (1, 2):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("NUMBA_", "OPENBLAS_", "OMP_", "MKL_"))}
        env.update({v: str(threads) for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMBA_NUM_THREADS",
                                              "MKL_NUM_THREADS")})
        env["OPENBLAS_THREAD_TIMEOUT"] = "4"
        p = subprocess.Popen([sys.executable, "-m", "benchmarks.thread_scaling", "--worker", workload], env=env,
                             text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        p.stdout.readline()
        procs.append((p, []))
    for _ in range(rounds):
        for p, rows in procs:
            for _warm in range(2):  # the measured step after an unmeasured one (benchmarks.thread_variants.WARM)
                p.stdin.write("1\n")
                p.stdin.flush()
                line = p.stdout.readline()
            rows.append(json.loads(line))
    for p, _ in procs:
        p.stdin.close()
        p.wait()
    keys = set().union(*(r for _, rows in procs for r in rows))
    best = [{k: min(r.get(k, 0.0) for r in rows) * 1e3 for k in keys} for _, rows in procs]
    print(f"{workload}: best of {rounds} interleaved steps, ms; load average {os.getloadavg()[0]:.1f}")
    print(f"{'':44}{'1 thread':>10}{'2 threads':>10}{'gain':>7}")
    for k in sorted(keys - {"~step"}, key=lambda k: -best[0][k]):
        if best[0][k] >= 0.05:
            print(f"{k:44}{best[0][k]:10.2f}{best[1][k]:10.2f}{best[0][k] / max(best[1][k], 1e-9):7.2f}")
    left = set(keys) - {"~step"}
    for name, member in GROUPS:
        group = {k for k in left if member(k)}
        left -= group
        one, two = (sum(b[k] for k in group) for b in best)
        print(f"{'= ' + name:44}{one:10.2f}{two:10.2f}{one / max(two, 1e-9):7.2f}")
    steps = [b["~step"] for b in best]
    rest = [s - sum(b[k] for k in keys - {"~step"}) for s, b in zip(steps, best, strict=True)]
    print(f"{'= rest (glue, executor; best step less the bests above)':44}{rest[0]:10.2f}{rest[1]:10.2f}")
    print(f"{'= step (best)':44}{steps[0]:10.2f}{steps[1]:10.2f}{steps[0] / steps[1]:7.2f}")


if __name__ == "__main__":
    if "--worker" in sys.argv:
        worker(sys.argv[sys.argv.index("--worker") + 1])
    else:
        main(sys.argv[1:])
