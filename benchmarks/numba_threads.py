"""Two threads of numba's prange beside OpenBLAS's pool: is an elementwise prange loop between GEMMs slower
than the serial loop? (issue 23 item 5; the repro behind ir.runtime.numba_gen's thread rule.)

    python -m benchmarks.numba_threads            # every configuration, each in its own process, interleaved

Each worker alternates one (1024, 128) @ (128, 512) float32 GEMM with one GELU-like elementwise loop over
its (1024, 512) output, serial or prange, and prints the median time of a round of 20 pairs. The rows are
(NUMBA_NUM_THREADS, OPENBLAS_NUM_THREADS, NUMBA_THREADING_LAYER, loop); the machine's load is printed with
them, since on a loaded 2-core machine any 2-thread split waits for its slower half.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time

CONFIGS = [  # (label, environment, loop); numba's default layer here is omp (no TBB), as GNU libgomp
    ("1 thread, serial", {"NUMBA_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}, "serial"),
    ("2 threads, serial", {"NUMBA_NUM_THREADS": "2", "OPENBLAS_NUM_THREADS": "2"}, "serial"),
    ("2, prange omp", {"NUMBA_NUM_THREADS": "2", "OPENBLAS_NUM_THREADS": "2", "NUMBA_THREADING_LAYER": "omp"},
     "prange"),
    ("2, prange omp passive", {"NUMBA_NUM_THREADS": "2", "OPENBLAS_NUM_THREADS": "2",
                               "NUMBA_THREADING_LAYER": "omp", "OMP_WAIT_POLICY": "passive"}, "prange"),
    ("2, prange workqueue", {"NUMBA_NUM_THREADS": "2", "OPENBLAS_NUM_THREADS": "2",
                             "NUMBA_THREADING_LAYER": "workqueue"}, "prange"),
    ("2, prange wq, blas timeout 4", {"NUMBA_NUM_THREADS": "2", "OPENBLAS_NUM_THREADS": "2",
                                      "NUMBA_THREADING_LAYER": "workqueue", "OPENBLAS_THREAD_TIMEOUT": "4"},
     "prange"),
]


def worker(loop: str, rounds: int) -> None:
    """Time rounds of 20 GEMM + elementwise pairs; print one JSON line per round on request."""
    import numpy as np
    from numba import njit, prange

    def body(x, out):
        for i in prange(x.shape[0]):
            for j in range(x.shape[1]):
                v = x[i, j]
                out[i, j] = v * np.float32(0.5) * (np.float32(1.0) + v / (np.float32(1.0) + abs(v)))

    fn = njit(parallel=loop == "prange")(body)  # without parallel=True, prange is range
    rng = np.random.default_rng(0)
    a = rng.standard_normal((1024, 128), dtype=np.float32)
    b = rng.standard_normal((128, 512), dtype=np.float32)
    out = np.empty((1024, 512), np.float32)
    fn(a @ b, out)
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        t_gemm = t_loop = 0.0
        for _ in range(int(line)):
            t0 = time.perf_counter()
            c = a @ b
            t1 = time.perf_counter()
            fn(c, out)
            t2 = time.perf_counter()
            t_gemm += t1 - t0
            t_loop += t2 - t1
        print(json.dumps({"gemm": t_gemm, "loop": t_loop}), flush=True)


def main(rounds: int = 15, pairs: int = 20) -> None:
    """Start one worker per configuration, ask them in turn `rounds` times, print medians per pair (us)."""
    procs = []
    for label, extra, loop in CONFIGS:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("NUMBA_", "OPENBLAS_", "OMP_"))}
        env.update(extra)
        p = subprocess.Popen([sys.executable, "-m", "benchmarks.numba_threads", "--worker", loop], env=env,
                             text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        p.stdout.readline()
        procs.append((label, p, []))
    for _ in range(rounds):
        for _, p, rows in procs:
            p.stdin.write(f"{pairs}\n")
            p.stdin.flush()
            rows.append(json.loads(p.stdout.readline()))
    print(f"load average {os.getloadavg()[0]:.1f}; median us per pair over {rounds} rounds of {pairs}")
    print(f"{'':30} {'gemm':>8} {'loop':>8} {'total':>8}")
    for label, p, rows in procs:
        p.stdin.close()
        p.wait()
        g = statistics.median(r["gemm"] for r in rows) / pairs * 1e6
        e = statistics.median(r["loop"] for r in rows) / pairs * 1e6
        t = statistics.median(r["gemm"] + r["loop"] for r in rows) / pairs * 1e6
        print(f"{label:30} {g:>8.0f} {e:>8.0f} {t:>8.0f}")


if __name__ == "__main__":
    if "--worker" in sys.argv:
        worker(sys.argv[sys.argv.index("--worker") + 1], 0)
    else:
        main()
