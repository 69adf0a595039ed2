"""pytorch/examples' programs, one training step each: mnist/main.py's CNN (batch 64, Adadelta) and
word_language_model's 2-layer LSTM (vocabulary 1000, 200 wide, bptt 35, batch 20, clipped SGD), tracegrad
(nn.torch, compiled by value_and_grad) against torch eager.

Each library runs in its own long-lived process on one thread (torch loaded beside tracegrad would hide
tracegrad's page faults); the parent asks them in turn for a burst of steps, round after round, so that both
see the same machine load, and prints each one's median ms/step and the ratio tracegrad / torch.

    python -m benchmarks.real_programs                 # both programs, 7 rounds of 3 steps
    python -m benchmarks.real_programs --only mnist --rounds 5 --optimizer sgd
    TRACEGRAD_KERNELS=numpy python -m benchmarks.real_programs   # tracegrad's plain NumPy kernels
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
THREADS = {v: "1" for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS")}
PROGRAMS = ("mnist", "wlm")
TITLES = {"mnist": "mnist CNN (batch 64 of 28x28)", "wlm": "word_language_model LSTM (2x200, bptt 35, batch 20)"}


def build(program: str, lib: str, optimizer: str):
    """The zero-argument step of `program` in `lib` ("tracegrad" or "torch")."""
    from benchmarks import workloads as w
    if lib == "torch":
        import torch
        torch.set_num_threads(1)
        return w.mnist_torch(torch, optimizer=optimizer) if program == "mnist" else w.wlm_torch(torch)
    return w.mnist_tracegrad(optimizer=optimizer) if program == "mnist" else w.wlm_tracegrad()


def child(program: str, lib: str, optimizer: str) -> None:
    """Build the step, report its first call, then answer each line `n` on stdin with n step times."""
    step = build(program, lib, optimizer)
    t0 = time.perf_counter()
    step()
    print(json.dumps({"first_ms": (time.perf_counter() - t0) * 1e3}), flush=True)
    for line in sys.stdin:
        times = []
        for _ in range(int(line)):
            t0 = time.perf_counter()
            step()
            times.append((time.perf_counter() - t0) * 1e3)
        print(json.dumps(times), flush=True)


def measure(program: str, rounds: int, burst: int, optimizer: str) -> dict:
    """{lib: (median ms/step, first-call ms)} with the two children asked in turn, `rounds` times."""
    env = {**os.environ, **THREADS, "PYTHONPATH": str(ROOT)}
    procs = {lib: subprocess.Popen([sys.executable, "-m", "benchmarks.real_programs", "--child", program, lib,
                                    "--optimizer", optimizer], cwd=ROOT, env=env, text=True,
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE)
             for lib in ("tracegrad", "torch")}
    first = {lib: json.loads(p.stdout.readline())["first_ms"] for lib, p in procs.items()}
    times = {lib: [] for lib in procs}
    for _ in range(rounds):
        for lib, p in procs.items():
            p.stdin.write(f"{burst}\n")
            p.stdin.flush()
            times[lib] += json.loads(p.stdout.readline())
    for p in procs.values():
        p.stdin.close()
        p.wait()
    return {lib: (sorted(t)[len(t) // 2], first[lib]) for lib, t in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=PROGRAMS)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--burst", type=int, default=3, help="steps per turn")
    parser.add_argument("--optimizer", choices=("adadelta", "sgd"), default="adadelta",
                        help="the mnist step's optimizer (the example's Adadelta, or SGD lr 0.01)")
    parser.add_argument("--child", nargs=2, metavar=("PROGRAM", "LIB"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child, args.optimizer)
        return
    kernels = os.environ.get("TRACEGRAD_KERNELS", "default")
    print(f"1 thread, each library in its own process, {args.rounds} interleaved rounds of {args.burst} steps; "
          f"TRACEGRAD_KERNELS={kernels}")
    for program in (args.only,) if args.only else PROGRAMS:
        r = measure(program, args.rounds, args.burst, args.optimizer)
        (tg, tg_first), (pt, _) = r["tracegrad"], r["torch"]
        print(f"{TITLES[program]}: tracegrad {tg:.1f} ms/step, torch eager {pt:.1f} ms/step, ratio {tg / pt:.2f}x "
              f"(first call {tg_first:.0f} ms)", flush=True)


if __name__ == "__main__":
    main()
