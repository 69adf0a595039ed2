"""The checkpoint planner (`value_and_grad(..., memory_budget=...)`) against hand-placed checkpoints.

Two models: the residual MLP of `checkpoint_memory.py` (32 blocks h = h + tanh(h @ W_i), width 128,
batch 2048) and the GPT of `examples/train_gpt.py` (8 blocks, d_model 64, 4 heads, 16 tokens, batch 64).
For each, five budgets evenly spaced from the peak with every block checkpointed to the peak without
checkpoints, then each hand-placed variant's own peak as a budget; per variant: the executor's
peak_bytes (exact), the step time (median of rounds in which every contender runs once in turn, in
one process), the FLOPs the backward recomputes (estimated from shapes, `autodiff.planner.op_flops`,
over the bindings the Gradient pass marks as recomputations) and the planning time. PyTorch's
`checkpoint_sequential` on the MLP (32 down to 2 segments; its peak is its profiler's allocation
high-water mark, see `checkpoint_memory.py`) runs in the same rounds, against the planner given each
PyTorch variant's peak as its budget. The comparison table pairs each hand-placed variant with the
planner at its peak: the target is a peak at most the same and a step time at most the same.

    python benchmarks/checkpoint_planner.py            # full sizes
    python benchmarks/checkpoint_planner.py --quick    # small sizes, a few seconds
    python benchmarks/checkpoint_planner.py --plot docs/checkpoint_planner.png   # + the timeline of one plan
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

if __name__ == "__main__":
    os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")  # see checkpoint_memory.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # make the repository importable

import numpy as np  # noqa: E402

import autodiff  # noqa: E402
import tracer  # noqa: E402
from autodiff import planner  # noqa: E402
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
from ir.nodes import role_of  # noqa: E402
from ir.runtime.memory import format_bytes  # noqa: E402

FRACTIONS = (0.0, 0.25, 0.5, 0.75, 1.0)
PLANS: list[tuple[float, int]] = []  # (seconds, candidates) of each make_plan call, in order


def _timed_make_plan(make_plan):
    def timed(*args, **kwargs):
        t0 = time.perf_counter()
        plan = make_plan(*args, **kwargs)
        PLANS.append((time.perf_counter() - t0, plan.candidates))
        return plan
    return timed


planner.make_plan = _timed_make_plan(planner.make_plan)  # plan_checkpoints (value_and_grad's) calls it


def recompute_flops(step) -> int:
    return sum(op_flops(b.value) for b in step.module["main_adjoint"].bindings if role_of(b.var) == "recompute")


class Variant:
    """One compiled step: `run()` calls it on the benchmark's batch; peak, recomputed FLOPs, planning time."""

    def __init__(self, name: str, step, args, budget: int | None = None):
        self.name, self.step, self.args, self.budget = name, step, args, budget
        before = len(PLANS)
        self.value, self.grads = step(*args)  # traces, plans (with a budget), compiles
        self.plan_s, self.candidates = PLANS[-1] if len(PLANS) > before else (None, None)
        self.peak = step.stats.peak_bytes
        self.flops = recompute_flops(step)
        self.regions = sum(b.value.op == "grad.end_checkpoint" for b in step.module["main"].bindings
                           if hasattr(b.value, "op"))

    def run(self):
        return self.step(*self.args)


def mlp_variants(quick: bool, with_torch: bool):
    blocks, width, batch = (8, 32, 256) if quick else (32, 128, 2048)
    weights, x = make_weights(blocks, width), make_batch(batch, width)
    tensors = [tracer.tensor(w) for w in weights]
    hand = [Variant("none", autodiff.value_and_grad(residual_loss(tensors, "none"), wrt=tensors), (x,)),
            Variant("every block", autodiff.value_and_grad(residual_loss(tensors, "every"), wrt=tensors), (x,))]
    for seg in (2, 4, 8):
        step = autodiff.value_and_grad(residual_loss(tensors, "segments", seg), wrt=tensors)
        hand.append(Variant(f"segments of {seg}", step, (x,)))
    others = torch_variants(weights, x) if with_torch else []
    title = f"residual MLP: {blocks} blocks, width {width}, batch {batch}, float32"
    return title, hand + planned(hand, lambda b: autodiff.value_and_grad(
        residual_loss(tensors, "none"), wrt=tensors, memory_budget=b), (x,),
        [(o.name, o.peak) for o in others if o.name != "torch none"]), others, weights, x


class TorchVariant:
    """PyTorch's step on the MLP (torch.utils.checkpoint.checkpoint_sequential, use_reentrant=False):
    its peak is the profiler's allocation high-water mark plus x and the weights."""

    def __init__(self, torch, weights, x, ws, xt, segment: int | None):
        variant = "none" if segment is None else "segments"
        self.name = "torch none" if segment is None else f"torch {-(-len(weights) // segment)} segments"
        _, _, self.peak = torch_memory(torch, weights, x, variant, segment or 4)
        self.run = lambda: torch_step(torch, ws, xt, variant, segment or 4)


def torch_variants(weights, x) -> list[TorchVariant]:
    try:
        import torch
    except ImportError:
        print("\nPyTorch: not installed, skipped")
        return []
    torch.set_num_threads(numpy_threads())
    ws = [torch.tensor(w, requires_grad=True) for w in weights]
    xt = torch.tensor(x)
    segments = sorted({1, 2, 4, 8, 16} & set(range(1, len(weights))))
    return [TorchVariant(torch, weights, x, ws, xt, seg) for seg in [None] + segments]


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
    return title, hand + planned(hand, lambda b: autodiff.value_and_grad(loss_fn, wrt=params, memory_budget=b),
                                 (x, y)), [], None, None


def planned(hand: list[Variant], make_step, args, extra=()) -> list[Variant]:
    """The five budgets from every block's peak to none's, then each hand-placed variant's own peak as
    the budget (the comparison at equal peak), then the (name, bytes) budgets in extra."""
    none, every = hand[0].peak, hand[1].peak
    budgets = [(f"planner {f:.2f}", int(every + f * (none - every))) for f in FRACTIONS]
    budgets += [(f"planner @ {h.name}", h.peak) for h in hand[1:]] + [(f"planner @ {n}", b) for n, b in extra]
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


def report(title: str, variants: list[Variant], others: list, repeats: int) -> None:
    """Times every contender in the same interleaved rounds and prints the variants' table, PyTorch's,
    and the comparison of each hand-placed variant with the planner given its peak."""
    check_same(variants)
    load = os.getloadavg()
    by_name = {v.name: v for v in variants}
    pairs = [(h, by_name.get(f"planner @ {h.name}"))
             for h in [v for v in variants[1:] if not v.name.startswith("planner")] + others[1:]]
    order = list(dict.fromkeys(c for c in variants[:1] + others[:1] + [c for pair in pairs for c in pair] + variants
                               if c is not None))  # each planner @ X runs right after X: paired rounds
    times = interleaved_times({c.name: c.run for c in order}, repeats)
    medians = {k: statistics.median(v) for k, v in times.items()}
    base_t = medians["none"]
    print(f"\n{title}\n(step = one compiled value_and_grad call, median of {repeats} interleaved rounds; "
          f"load average {load[0]:.2f} before the rounds, {os.getloadavg()[0]:.2f} after)")
    print(f"{'variant':<26} {'budget':>10} {'peak':>10} {'fits':>5} {'regions':>8} {'recomp GFLOP':>13} "
          f"{'step ms':>9} {'vs none':>8} {'plan ms':>8} {'cands':>6}")
    for v in variants:
        budget = format_bytes(v.budget) if v.budget is not None else "-"
        fits = ("yes" if v.peak <= v.budget else "NO") if v.budget is not None else "-"
        plan = f"{v.plan_s * 1e3:8.0f} {v.candidates:>6}" if v.plan_s is not None else f"{'-':>8} {'-':>6}"
        print(f"{v.name:<26} {budget:>10} {format_bytes(v.peak):>10} {fits:>5} {v.regions:>8} {v.flops / 1e9:13.3f} "
              f"{medians[v.name] * 1e3:9.2f} {medians[v.name] / base_t:8.3f} {plan}")
    if others:
        print(f"\n{'PyTorch variant':<26} {'peak':>10} {'step ms':>9} {'vs none':>8}")
        for o in others:
            print(f"{o.name:<26} {format_bytes(o.peak):>10} {medians[o.name] * 1e3:9.2f} "
                  f"{medians[o.name] / medians['torch none']:8.3f}")
    print(f"\n{'hand-placed':<22} {'peak':>10} {'step ms':>9}   {'planner at its peak':>10} {'step ms':>9} "
          f"{'paired ratio':>12}  target")
    for h, p in pairs:
        if p is None:
            print(f"{h.name:<22} {format_bytes(h.peak):>10} {medians[h.name] * 1e3:9.2f}   no plan at this peak")
            continue
        # the median over rounds of planner / hand-placed, each pair timed back to back: load drift cancels
        ratio = statistics.median(a / b for a, b in zip(times[p.name], times[h.name], strict=True))
        met = "met" if p.peak <= h.peak and ratio <= 1.0 else "MISSED"
        print(f"{h.name:<22} {format_bytes(h.peak):>10} {medians[h.name] * 1e3:9.2f}   {format_bytes(p.peak):>10} "
              f"{medians[p.name] * 1e3:9.2f} {ratio:12.3f}  {met}")


def interleaved_times(steps: dict, repeats: int) -> dict[str, list[float]]:
    """`checkpoint_memory.interleaved_medians`'s rounds (one untimed call, then a timed one, per step and
    round), but every round's seconds: round r of each list was timed in the same pass over the steps."""
    calls: dict[str, list[float]] = {k: [] for k in steps}

    def timed(name, fn):
        def run():
            t0 = time.perf_counter()
            fn()
            calls[name].append(time.perf_counter() - t0)
        return run

    interleaved_medians({k: timed(k, fn) for k, fn in steps.items()}, repeats, warm=1)
    return {k: v[1::2] for k, v in calls.items()}  # the timed call of each round


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="small models")
    p.add_argument("--repeats", type=int, default=None, help="timing rounds (default 7, quick 15)")
    p.add_argument("--plot", default=None, help="save the memory timeline of the MLP's middle budget to this PNG")
    p.add_argument("--skip-torch", action="store_true", help="leave out the PyTorch comparison")
    p.add_argument("--models", default="mlp,gpt", help="which models, comma-separated (default: mlp,gpt)")
    args = p.parse_args(argv)
    repeats = args.repeats or (15 if args.quick else 7)
    for model in args.models.split(","):
        make = {"mlp": lambda: mlp_variants(args.quick, not args.skip_torch),
                "gpt": lambda: gpt_variants(args.quick)}[model]
        title, variants, others, _, _ = make()
        report(title, variants, others, repeats)
        if args.plot and model == "mlp":
            middle = next(v for v in variants if v.name == "planner 0.50")
            middle.run()
            middle.step.memory_profile().plot(args.plot)
            print(f"\ntimeline of 'planner 0.50' saved to {args.plot}")


if __name__ == "__main__":
    main()
