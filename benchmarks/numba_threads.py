"""Two threads of numba's prange beside OpenBLAS's pool: is an elementwise prange loop between GEMMs slower
than the serial loop? (issue 23 item 5; the repro behind ir.runtime.numba_gen's thread rule.)

    python -m benchmarks.numba_threads            # every configuration, each in its own process, interleaved
    OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 NUMBA_NUM_THREADS=2 OPENBLAS_THREAD_TIMEOUT=4 \
        python -m benchmarks.numba_threads --forms  # serial vs prange kernel forms by size (PARALLEL_SIZE)

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
    ("2, prange omp spin 20k, blas 4", {"NUMBA_NUM_THREADS": "2", "OPENBLAS_NUM_THREADS": "2",
                                        "NUMBA_THREADING_LAYER": "omp", "GOMP_SPINCOUNT": "20000",
                                        "OPENBLAS_THREAD_TIMEOUT": "4"}, "prange"),
    ("2, prange omp passive, blas 4", {"NUMBA_NUM_THREADS": "2", "OPENBLAS_NUM_THREADS": "2",
                                       "NUMBA_THREADING_LAYER": "omp", "OMP_WAIT_POLICY": "passive",
                                       "OPENBLAS_THREAD_TIMEOUT": "4"}, "prange"),
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
    cols = int(os.environ.get("BENCH_COLS", "512"))  # the loop's output is (1024, cols)
    a = rng.standard_normal((1024, 128), dtype=np.float32)
    b = rng.standard_normal((128, cols), dtype=np.float32)
    out = np.empty((1024, cols), np.float32)
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


def main(rounds: int = 15, pairs: int = 20) -> None:  # BENCH_COLS=128: the loop over (1024, 128)
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
    print(f"load average {os.getloadavg()[0]:.1f}; us per pair over {rounds} rounds of {pairs}: median (min)")
    print(f"{'':32} {'gemm':>12} {'loop':>12} {'total':>12}")
    for label, p, rows in procs:
        p.stdin.close()
        p.wait()
        cells = []
        for part in (lambda r: r["gemm"], lambda r: r["loop"], lambda r: r["gemm"] + r["loop"]):
            v = [part(r) / pairs * 1e6 for r in rows]
            cells.append(f"{statistics.median(v):>6.0f} ({min(v):>4.0f})")
        print(f"{label:32} {' '.join(cells)}")


def forms(reps: int = 400) -> None:
    """ir.runtime's serial and prange kernel forms (layer_norm, softmax rows, a tanh-GELU chain) over sizes,
    each call after a (1024, 128) @ (128, 512) GEMM as in a step, at this process's thread count: the measure
    behind ir.runtime.numba_threads.PARALLEL_SIZE. Prints best and median microseconds and the prange gain."""
    import numpy as np

    from ir.ops.fused import Leaf, Node
    from ir.runtime import numba_composite, numba_gen, numba_threads
    print(f"load average {os.getloadavg()[0]:.1f}; {numba_threads.threads()} thread(s); us best/median of {reps}")
    rows = numba_composite._module()
    rng = np.random.default_rng(0)
    a = rng.standard_normal((1024, 128), dtype=np.float32)
    b = rng.standard_normal((128, 512), dtype=np.float32)
    gelu = Node("nn.gelu", (Leaf(0),), {"approximate": "tanh"}).text()
    for shape in ((512, 128), (1024, 128), (2048, 128), (1024, 512), (2048, 512)):
        x = rng.standard_normal(shape, dtype=np.float32)
        out, ones, zeros = np.empty_like(x), np.ones(shape[1], np.float32), np.zeros(shape[1], np.float32)
        chain = sys.modules[numba_gen.chain_runner(gelu, ((shape, x.dtype),)).keywords["kernel"].py_func.__module__]
        for name, serial, parallel, args in (
                ("layer_norm", rows.layer_norm_serial, rows.layer_norm_parallel, (x, ones, zeros, 1e-5, out)),
                ("softmax", rows.softmax_serial, rows.softmax_parallel, (x, out, False)),
                ("gelu", chain.serial, chain.parallel, (x, out))):
            times: tuple[list, list] = ([], [])
            for _ in range(reps):
                for fn, acc in ((serial, times[0]), (parallel, times[1])):
                    a @ b
                    t = time.perf_counter()
                    fn(*args)
                    acc.append((time.perf_counter() - t) * 1e6)
            (s_min, s_med), (p_min, p_med) = ((min(v), statistics.median(v)) for v in times)
            print(f"{name:10} {x.size:>8} serial {s_min:6.0f}/{s_med:6.0f}  prange {p_min:6.0f}/{p_med:6.0f}  "
                  f"gain best {s_min / p_min:.2f} median {s_med / p_med:.2f}")


if __name__ == "__main__":
    if "--worker" in sys.argv:
        worker(sys.argv[sys.argv.index("--worker") + 1], 0)
    elif "--forms" in sys.argv:
        forms()
    else:
        main()
