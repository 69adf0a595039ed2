"""value_and_grad's own per-call work on the tiny MLP (64-64-64-10, batch 32; issue 23 item 3), and a step
made inside the loop (issue 24 item 6).

- `glue`: the median time of one call with the compiled adjoint replaced by a no-op that returns its last
  result: what the call costs outside the adjoint (feeding, guards, finding the captured tensors, copying
  shared buffers, writing state back, wrapping results); and the adjoint alone, for scale.
- `remade`: one SGD step per iteration with `autodiff.value_and_grad(...)` made inside the loop, against the
  step made once outside it (median per iteration).

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python -m benchmarks.step_glue [--rounds N]
"""
from __future__ import annotations

import argparse
import time

import autodiff
import nn
import tracer
from benchmarks.step_speed import make_problem
from benchmarks.workloads import LR, mlp_logits
from nn import optim


def _median(f, n: int, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(n):
            f()
        times.append((time.perf_counter() - t) / n)
    return sorted(times)[len(times) // 2]


def glue_overhead(rounds: int) -> tuple[float, float]:
    """(seconds per call with a no-op adjoint, seconds of the adjoint alone)."""
    params, x, one_hot = make_problem((64, 64, 64, 10), 32)
    ws = [nn.Parameter(p.copy()) for p in params]
    vg = autodiff.value_and_grad(
        lambda x, h: -(h * tracer.log_softmax(mlp_logits(ws, x, tracer.relu))).sum(axis=1).mean(), wrt=ws)
    vg(x, one_hot)
    vg(x, one_hot)
    c = vg.last
    feed = [x, one_hot] + [w._data for w in ws]
    adjoint, result = c.step, c.step(*feed)
    alone = _median(lambda: adjoint(*feed), 2000, rounds)
    c.step = lambda *a: result
    for kept in (getattr(c, "glues", None), getattr(vg, "glues", None)):  # rebuilt around the no-op
        if kept is not None:
            kept.clear()
    vg(x, one_hot)
    outside = _median(lambda: vg(x, one_hot), 2000, rounds)
    return outside, alone


def remade_loop(rounds: int, inside: bool) -> float:
    """Seconds per SGD iteration, the step made inside the loop (or once, outside it)."""
    params, x, one_hot = make_problem((64, 64, 64, 10), 32)
    ws = [nn.Parameter(p.copy()) for p in params]
    opt = optim.SGD(ws, lr=LR)

    def make():
        return autodiff.value_and_grad(
            lambda x, h: -(h * tracer.log_softmax(mlp_logits(ws, x, tracer.relu))).sum(axis=1).mean(), wrt=ws)
    outside = make()

    def iteration():
        step = make() if inside else outside
        _, grads = step(x, one_hot)
        opt.step(grads)
    iteration()
    return _median(iteration, 20, rounds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    outside, alone = glue_overhead(args.rounds)
    print(f"tiny MLP call outside the adjoint: {outside * 1e6:.1f} us (the adjoint alone: {alone * 1e6:.1f} us)")
    once, inside = remade_loop(args.rounds, False), remade_loop(args.rounds, True)
    print(f"SGD iteration, step made once: {once * 1e6:.0f} us; made inside the loop: {inside * 1e6:.0f} us "
          f"({inside / once:.2f}x)")


if __name__ == "__main__":
    main()
