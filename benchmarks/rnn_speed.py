"""word_language_model's LSTM (2 layers, 200 hidden, 200 inputs, seq 35, batch 20): one forward + backward step,
tracegrad (value_and_grad, compiled; and eager loss.backward()) against torch, each library in its own process.

    python -m benchmarks.rnn_speed [--repeats 20]
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--child", choices=["tracegrad", "torch"])
    args = parser.parse_args()
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
