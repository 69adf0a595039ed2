"""word_language_model's LSTM (2 layers, 200 hidden, 200 inputs, seq 35, batch 20): one forward + backward step,
tracegrad (value_and_grad, compiled; and eager loss.backward()) against torch, each library in its own process.

    python -m benchmarks.rnn_speed [--repeats 20]
    python -m benchmarks.rnn_speed --ab OLD_CHECKOUT [--rounds 40] [--torch] [--kernels numpy]

`--ab` times benchmarks/workloads.py's whole word_language_model training step (wlm_tracegrad) of another
checkout (a worktree of an older commit) against this one's, one benchmarks.harness worker process per
checkout (and one for torch with --torch), 1 thread, asked for 3 steps each in turn, round after round: the
median of the per-round ratios is what a change did, on a loaded machine too.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

SIZES = dict(layers=2, hidden=200, inputs=200, seq=35, batch=20)


def _median_ms(fn, repeats: int) -> float:
    fn()  # warm-up (tracegrad traces and compiles here)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2] * 1e3


def run_tracegrad(repeats: int) -> dict:
    import numpy as np

    import autodiff
    import nn
    import tracer
    s = SIZES
    model = nn.LSTM(s["inputs"], s["hidden"], s["layers"])
    x = tracer.tensor(np.random.default_rng(0).standard_normal((s["seq"], s["batch"], s["inputs"])).astype("float32"))
    params = list(model.parameters())
    step = autodiff.value_and_grad(lambda x: model(x)[0].sum(), wrt=params)
    first = time.perf_counter()
    step(x)
    first_ms = (time.perf_counter() - first) * 1e3

    def backward():
        model.zero_grad()
        model(x)[0].sum().backward()
    return {"compiled step ms": _median_ms(lambda: step(x), repeats), "first call (trace + compile) ms": first_ms,
            "eager backward ms": _median_ms(backward, max(3, repeats // 4))}


def run_torch(repeats: int) -> dict:
    import torch
    torch.set_num_threads(1)
    s = SIZES
    model = torch.nn.LSTM(s["inputs"], s["hidden"], s["layers"])
    x = torch.randn(s["seq"], s["batch"], s["inputs"])

    def step():
        model.zero_grad()
        model(x)[0].sum().backward()
    return {"step ms": _median_ms(step, repeats), "threads": 1}


def ab(old: str, rounds: int, torch: bool, kernels: str | None) -> None:
    """Interleaved rounds of the wlm step in `old`'s checkout, this one's (and torch's): medians and ratios."""
    import os
    import statistics
    from pathlib import Path
    here = str(Path(__file__).resolve().parents[1])
    workers = [("old", old, "tracegrad"), ("new", here, "tracegrad")] + [("torch", here, "torch")] * torch
    threads = {v: "1" for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS")}
    procs, times = {}, {}
    try:
        for label, root, lib in workers:
            env = {**os.environ, **threads, "PYTHONPATH": root, "TRACEGRAD_FUSE": "0", "OPENBLAS_THREAD_TIMEOUT": "4"}
            if kernels:
                env["TRACEGRAD_KERNELS"] = kernels
            procs[label] = subprocess.Popen([sys.executable, "-m", "benchmarks.harness", "wlm", lib], cwd=root, env=env,
                                            text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            if not procs[label].stdout.readline():
                raise RuntimeError(f"rnn_speed --ab: the {label} worker ({root}) failed")
            times[label] = []
        for _ in range(rounds):
            for label, p in procs.items():
                p.stdin.write("3\n")
                p.stdin.flush()
                times[label].append(json.loads(p.stdout.readline())["step"] * 1e3)
    finally:
        for p in procs.values():
            p.stdin.close()
            p.wait()
    for label, t in times.items():
        print(f"{label}: median {statistics.median(t):.2f} ms, min {min(t):.2f} ms")
    pairs = [("new", "old")] + [("old", "torch"), ("new", "torch")] * torch
    for a, b in pairs:
        ratios = [x / y for x, y in zip(times[a], times[b], strict=True)]
        print(f"{a}/{b}: median of per-round ratios {statistics.median(ratios):.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--child", choices=["tracegrad", "torch"])
    parser.add_argument("--ab", metavar="OLD_CHECKOUT", help="A/B the wlm training step against that checkout")
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--torch", action="store_true", help="with --ab: a torch worker in the rounds too")
    parser.add_argument("--kernels", help="with --ab: TRACEGRAD_KERNELS for both tracegrad workers (numpy: plain)")
    args = parser.parse_args()
    if args.ab:
        ab(args.ab, args.rounds, args.torch, args.kernels)
        return
    if args.child:
        fn = run_tracegrad if args.child == "tracegrad" else run_torch
        print(json.dumps(fn(args.repeats)))
        return
    for lib in ("tracegrad", "torch"):
        out = subprocess.run([sys.executable, "-m", "benchmarks.rnn_speed", "--child", lib, "--repeats",
                              str(args.repeats)], capture_output=True, text=True, check=True)
        print(lib, json.dumps(json.loads(out.stdout.strip().splitlines()[-1])))


if __name__ == "__main__":
    main()
