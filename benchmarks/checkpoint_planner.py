"""The checkpoint planner (`value_and_grad(..., memory_budget=...)`) against hand-placed checkpoints.

Two models: the residual MLP of `checkpoint_memory.py` (32 blocks h = h + tanh(h @ W_i), width 128,
batch 2048) and the GPT of `examples/train_gpt.py` (8 blocks, d_model 64, 4 heads, 16 tokens, batch 64).
For each, five budgets evenly spaced from the peak with every block checkpointed to the peak without
checkpoints, then each hand-placed variant's own peak as a budget; per variant: the executor's
peak_bytes (exact), the step time (median of interleaved rounds) and the FLOPs the backward recomputes
(estimated from shapes, `autodiff.planner.op_flops`, over the bindings the Gradient pass marks as
recomputations). PyTorch's `checkpoint_sequential` on the MLP, with 32 down to 2 segments, gives the
comparison at similar peaks (PyTorch's peak is its profiler's
allocation high-water mark; see `checkpoint_memory.py`).

    python benchmarks/checkpoint_planner.py            # full sizes
    python benchmarks/checkpoint_planner.py --quick    # small sizes, a few seconds
    python benchmarks/checkpoint_planner.py --plot docs/checkpoint_planner.png   # + the timeline of one plan
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

if __name__ == "__main__":
    os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")  # see checkpoint_memory.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # make the repository importable

import numpy as np  # noqa: E402

import autodiff  # noqa: E402
import tracer  # noqa: E402
from autodiff.planner import op_flops  # noqa: E402
from benchmarks.checkpoint_memory import (  # noqa: E402
    interleaved_medians,
    make_batch,
    make_weights,
    numpy_threads,
    residual_loss,
    torch_memory,
    torch_step,
)
from ir.memory import format_bytes  # noqa: E402
from ir.nodes import role_of  # noqa: E402

FRACTIONS = (0.0, 0.25, 0.5, 0.75, 1.0)


def recompute_flops(step) -> int:
    return sum(op_flops(b.value) for b in step.module["main_adjoint"].bindings if role_of(b.var) == "recompute")


class Variant:
    """One compiled step: `run()` calls it on the benchmark's batch; peak, recomputed FLOPs, planning time."""

    def __init__(self, name: str, step, args, budget: int | None = None):
        self.name, self.step, self.args, self.budget = name, step, args, budget
        t0 = time.perf_counter()
        self.value, self.grads = step(*args)  # traces, plans (with a budget), compiles
        self.compile_s = time.perf_counter() - t0
        self.peak = step.stats.peak_bytes
        self.flops = recompute_flops(step)
        self.regions = sum(b.value.op == "grad.end_checkpoint" for b in step.module["main"].bindings
                           if hasattr(b.value, "op"))

    def run(self):
        return self.step(*self.args)


def mlp_variants(quick: bool) -> tuple[str, list[Variant], list[np.ndarray], np.ndarray]:
    blocks, width, batch = (8, 32, 256) if quick else (32, 128, 2048)
    weights, x = make_weights(blocks, width), make_batch(batch, width)
    tensors = [tracer.tensor(w) for w in weights]
    hand = [Variant("none", autodiff.value_and_grad(residual_loss(tensors, "none"), wrt=tensors), (x,)),
            Variant("every block", autodiff.value_and_grad(residual_loss(tensors, "every"), wrt=tensors), (x,))]
    for seg in (2, 4, 8):
        step = autodiff.value_and_grad(residual_loss(tensors, "segments", seg), wrt=tensors)
        hand.append(Variant(f"segments of {seg}", step, (x,)))
    title = f"residual MLP: {blocks} blocks, width {width}, batch {batch}, float32"
    return title, hand + planned(hand, lambda b: autodiff.value_and_grad(
        residual_loss(tensors, "none"), wrt=tensors, memory_budget=b), (x,)), weights, x


def gpt_variants(quick: bool) -> tuple[str, list[Variant]]:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
    from train_gpt import DIGITS, GPT, IGNORE
    from train_gpt import make_batch as gpt_batch

    import nn
    from nn import functional as F

    layers, d_model, heads, batch, length = (4, 16, 2, 16, 8) if quick else (8, 64, 4, 64, 8)
    nn.init.manual_seed(0)
    model = GPT(DIGITS + 1, 2 * length, d_model, heads, layers)
    x, y = gpt_batch(np.random.default_rng(0), batch, length)

    def loss_fn(x, y):
        logits = model(x)
        return F.cross_entropy(logits.reshape((-1, DIGITS + 1)), y.reshape(-1), ignore_index=IGNORE)

    params = list(model.parameters())
    model.checkpoint = False
    hand = [Variant("none", autodiff.value_and_grad(loss_fn, wrt=params), (x, y))]
    model.checkpoint = True
    hand.append(Variant("every block", autodiff.value_and_grad(loss_fn, wrt=params), (x, y)))
    model.checkpoint = False  # the planner starts from the unmarked model
    title = (f"GPT (examples/train_gpt.py): {layers} blocks, d_model {d_model}, {heads} heads, {2 * length} tokens, "
             f"batch {batch}")
    return title, hand + planned(hand, lambda b: autodiff.value_and_grad(loss_fn, wrt=params, memory_budget=b), (x, y))


def planned(hand: list[Variant], make_step, args) -> list[Variant]:
    """The five budgets from every block's peak to none's, then each hand-placed variant's own peak as
    the budget (the comparison at equal peak)."""
    none, every = hand[0].peak, hand[1].peak
    budgets = [(f"planner {f:.2f}", int(every + f * (none - every))) for f in FRACTIONS]
    budgets += [(f"planner @ {h.name}", h.peak) for h in hand[1:]]
    out = []
    for name, budget in budgets:
        try:
            out.append(Variant(name, make_step(budget), args, budget))
        except ValueError as e:  # a budget below every plan the planner finds: say so, with its lowest peak
            print(f"{name}: {e}")
    return out


def check_same(variants: list[Variant]) -> None:
    ref = variants[0]
    for v in variants[1:]:
        np.testing.assert_allclose(v.value.numpy(), ref.value.numpy(), rtol=1e-4)
        for a, b in zip(v.grads, ref.grads, strict=True):
            a, b = a.numpy(), b.numpy()
            np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-5 * float(np.abs(b).max(initial=1.0)))


def report(title: str, variants: list[Variant], repeats: int) -> None:
    check_same(variants)
    medians = interleaved_medians({v.name: v.run for v in variants}, repeats)
    base_t = medians["none"]
    print(f"\n{title}\n(step = one compiled value_and_grad call, median of {repeats} interleaved rounds)")
    print(f"{'variant':<26} {'budget':>10} {'peak':>10} {'fits':>5} {'regions':>8} {'recomp GFLOP':>13} "
          f"{'step ms':>9} {'vs none':>8} {'plan s':>7}")
    for v in variants:
        budget = format_bytes(v.budget) if v.budget is not None else "-"
        fits = ("yes" if v.peak <= v.budget else "NO") if v.budget is not None else "-"
        plan_s = f"{v.compile_s:7.1f}" if v.budget is not None else f"{'-':>7}"
        print(f"{v.name:<26} {budget:>10} {format_bytes(v.peak):>10} {fits:>5} {v.regions:>8} {v.flops / 1e9:13.3f} "
              f"{medians[v.name] * 1e3:9.2f} {medians[v.name] / base_t:8.3f} {plan_s}")


def torch_report(weights, x, repeats: int) -> None:
    try:
        import torch
    except ImportError:
        print("\nPyTorch: not installed, skipped")
        return
    torch.set_num_threads(numpy_threads())
    ws = [torch.tensor(w, requires_grad=True) for w in weights]
    xt = torch.tensor(x)
    rows, steps = [], {}
    for seg in sorted({1, 2, 4, 8, 16} & set(range(1, len(weights)))):
        n_segments = -(-len(weights) // seg)
        _, _, peak = torch_memory(torch, weights, x, "segments", seg)
        rows.append((f"{n_segments} segments", peak))
        steps[f"{n_segments} segments"] = lambda seg=seg: torch_step(torch, ws, xt, "segments", seg)
    _, _, none_peak = torch_memory(torch, weights, x, "none")
    rows.insert(0, ("none", none_peak))
    steps["none"] = lambda: torch_step(torch, ws, xt, "none")
    medians = interleaved_medians(steps, repeats)
    print(f"\nPyTorch {torch.__version__} on the MLP: torch.utils.checkpoint.checkpoint_sequential "
          "(use_reentrant=False), peak = profiler high-water mark + x and weights")
    print(f"{'variant':<16} {'peak':>10} {'step ms':>9} {'vs none':>8}")
    for name, peak in rows:
        print(f"{name:<16} {format_bytes(peak):>10} {medians[name] * 1e3:9.2f} {medians[name] / medians['none']:8.3f}")


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="small models")
    p.add_argument("--repeats", type=int, default=None, help="timing rounds (default 7, quick 15)")
    p.add_argument("--plot", default=None, help="save the memory timeline of the MLP's middle budget to this PNG")
    p.add_argument("--skip-torch", action="store_true", help="leave out the PyTorch comparison")
    p.add_argument("--models", default="mlp,gpt", help="which models, comma-separated (default: mlp,gpt)")
    args = p.parse_args(argv)
    repeats = args.repeats or (15 if args.quick else 7)
    if "mlp" in args.models:
        title, variants, weights, x = mlp_variants(args.quick)
        report(title, variants, repeats)
        if args.plot:
            middle = next(v for v in variants if v.name == "planner 0.50")
            middle.run()
            middle.step.memory_profile().plot(args.plot)
            print(f"\ntimeline of 'planner 0.50' saved to {args.plot}")
        if not args.skip_torch:
            torch_report(weights, x, repeats)
    if "gpt" in args.models:
        title, variants = gpt_variants(args.quick)
        report(title, variants, repeats)


if __name__ == "__main__":
    main()
