"""torch's 4-line training loop (zero_grad, forward, loss.backward(), step) against the value_and_grad step.

Both run SGD on the same model from the same weights in one process, interleaved round by round: the MLP
784-1024-1024-10 (batch 256), the tiny MLP 64-64-64-10 (batch 32) and the GPT of benchmarks/workloads.py.
"first" is build + first step (for the loop: the eager forward, the Gradient pass and the backward's
compile; for value_and_grad: trace, Gradient, compile and run), with the backward cache emptied first.
Then the cost of recording one eager op for backward: the same op on tensors that do and do not require
grad (issue 20's targets: loop step <= 1.15x value_and_grad on the MLP and GPT, 1.5x on the tiny MLP,
first step <= 2x).

    python -m benchmarks.backward_loop            # about a minute on 2 cores
    python -m benchmarks.backward_loop --quick    # fewer rounds
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
import timeit
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import autodiff  # noqa: E402
import nn  # noqa: E402
import tracer  # noqa: E402
from benchmarks import workloads as w  # noqa: E402
from benchmarks.checkpoint_memory import interleaved_medians  # noqa: E402
from benchmarks.step_speed import make_problem  # noqa: E402
from nn import functional as F  # noqa: E402
from nn import optim  # noqa: E402


def loop_step(loss, params):
    """The torch form: opt.zero_grad(); loss = loss(); loss.backward(); opt.step()."""
    opt = optim.SGD(params, lr=w.LR)

    def step():
        opt.zero_grad()
        value = loss()
        value.backward()
        opt.step()
        return value
    return step


def mlp_loop(params, x, one_hot):
    ws = [nn.Parameter(p.copy()) for p in params]
    xt, ht = tracer.tensor(x), tracer.tensor(one_hot)
    return loop_step(lambda: -(ht * tracer.log_softmax(w.mlp_logits(ws, xt, tracer.relu))).sum(axis=1).mean(), ws)


def gpt_model(shape):
    sys.path.insert(0, str(ROOT / "examples"))
    from train_gpt import GPT
    model = GPT(shape["vocab"], shape["context"], shape["width"], shape["heads"], shape["layers"])
    for block in model.blocks:
        block.mlp[1].approximate = "tanh"
    return model


def gpt_loop(shape):
    model = gpt_model(shape)
    x, y = w._gpt_batch(shape)
    return loop_step(lambda: F.cross_entropy(model(x).reshape(-1, shape["vocab"]), y.reshape(-1)),
                     model.parameters())


def workloads():
    out = {}
    for title, sizes, batch in (("MLP 784-1024-1024-10 b256", (784, 1024, 1024, 10), 256),
                                ("tiny MLP 64-64-64-10 b32", (64, 64, 64, 10), 32)):
        params, x, one_hot = make_problem(sizes, batch)
        out[title] = {"value_and_grad": lambda p=params, a=x, b=one_hot: w.mlp_tracegrad(p, a, b),
                      "backward loop": lambda p=params, a=x, b=one_hot: mlp_loop(p, a, b)}
    shape = dict(w.GPT_SHAPE)
    out["GPT v64 t64 d128 h4 L4 b16"] = {"value_and_grad": lambda: w.gpt_tracegrad(shape),
                                         "backward loop": lambda: gpt_loop(shape)}
    return out


def measure(builders: dict, rounds: int, first_reps: int) -> dict:
    firsts = {name: [] for name in builders}
    steps = {}
    for _ in range(first_reps):
        for name, build in builders.items():
            autodiff.backward._CACHE.clear()  # the loop's first step compiles, as in a fresh process
            t0 = time.perf_counter()
            steps[name] = build()
            steps[name]()
            firsts[name].append(time.perf_counter() - t0)
    medians = interleaved_medians(steps, rounds)
    return {name: {"step": medians[name], "first": statistics.median(firsts[name])} for name in builders}


def recording_cost(number: int = 5000) -> list[tuple[str, float, float]]:
    """(op, us untracked, us recorded) for 8x8 float32 operands, where the fixed cost per op shows: the same op
    on a tensor that does not require grad, and on a recorded result (appended to its tape)."""
    other = tracer.tensor(np.ones((8, 8), "float32"))
    plain = tracer.tensor(np.ones((8, 8), "float32"))
    recorded = tracer.tensor(np.ones((8, 8), "float32"), requires_grad=True) * 1.0
    rows = []
    for name, fn in (("add", lambda a: a + other), ("matmul", lambda a: a @ other), ("tanh", tracer.tanh),
                     ("sum", lambda a: a.sum())):
        times = [min(timeit.repeat(lambda a=a, fn=fn: fn(a), number=number, repeat=5)) / number * 1e6
                 for a in (plain, recorded)]
        rows.append((name, *times))
    return rows


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="fewer rounds")
    args = p.parse_args(argv)
    rounds = 5 if args.quick else 30
    print("| workload | variant | step ms | vs value_and_grad | first step ms | vs value_and_grad |")
    print("|---|---|---|---|---|---|")
    for title, builders in workloads().items():
        n = rounds * (10 if title.startswith("tiny") else 1)
        rows = measure(builders, n, 1 if title.startswith("GPT") else 3)
        base = rows["value_and_grad"]
        for name, r in rows.items():
            print(f"| {title} | {name} | {r['step'] * 1e3:.3f} | {r['step'] / base['step']:.2f} | "
                  f"{r['first'] * 1e3:.1f} | {r['first'] / base['first']:.2f} |")
    print("\n| op (8x8 float32) | untracked us | recorded us | recording cost us |")
    print("|---|---|---|---|")
    for name, plain, tracked in recording_cost():
        print(f"| {name} | {plain:.2f} | {tracked:.2f} | {tracked - plain:.2f} |")


if __name__ == "__main__":
    main()
