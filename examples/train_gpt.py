"""Train a small decoder-only transformer to sort digits, with or without gradient checkpointing.

The task needs attention: the input is `length` random digits and a separator, the model must then
emit the same digits sorted. Training is teacher-forced with the loss on the output positions only
(every other label is ignore_index); held-out sequences come from a separate random generator.

    python -m examples.train_gpt                # 2 blocks, d_model 32: >= 99% held-out token accuracy in
                                                # under a minute on 2 CPU cores
    python -m examples.train_gpt --checkpoint   # the same, every block a tracer.checkpoint region
    python -m examples.train_gpt --full         # d_model 64, 600 steps, 1000 held-out sequences (minutes)
    python -m examples.train_gpt --fast         # a tiny model for a few steps (what CI runs)
    mpiexec -n 2 python -m examples.train_gpt --distributed   # data-parallel: each process takes every
                                                # other sequence of each batch (pip install tracegrad[mpi])

It prints a progress line (stderr; a tqdm bar when tqdm is installed) and, every tenth of the run, the
loss and held-out accuracy (stdout), each flushed as it is written. At the end it compiles the other
variant (with / without checkpointing) for one step on the same batch and reports both executors' peak
bytes, and that loss and gradients agree.
"""
from __future__ import annotations

import argparse
import functools
import time

import numpy as np

import autodiff
import nn
import tracer
from nn import functional as F
from nn import optim

DIGITS = 10
SEP = DIGITS            # the separator token; the vocabulary is the ten digits and it
IGNORE = -100           # F.cross_entropy's default ignore_index

# the size of each run: the default reaches >= 99% held-out token accuracy in under a minute on 2 cores
PRESETS = {
    "fast": {"steps": 20, "d_model": 16, "heads": 2, "lr": 3e-3, "held_out": 64},
    "default": {"steps": 250, "d_model": 32, "heads": 4, "lr": 1e-2, "held_out": 500},
    "full": {"steps": 600, "d_model": 64, "heads": 4, "lr": 3e-3, "held_out": 1000},
}


class Block(nn.Module):
    """Pre-LN transformer block: x + attn(ln(x)), then x + mlp(ln(x))."""

    def __init__(self, d_model: int, heads: int):
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = nn.MultiheadAttention(d_model, heads, batch_first=True)  # mha(x): causal
        self.ln2 = nn.LayerNorm(d_model)
        # GPT-2's tanh GELU: without SciPy the exact (erf) one is the costliest op of the step
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(approximate="tanh"),
                                 nn.Linear(4 * d_model, d_model))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    """Token + position embeddings, `layers` blocks, a final LayerNorm and a linear head."""

    def __init__(self, vocab: int, max_len: int, d_model: int, heads: int, layers: int):
        super().__init__()
        self.tok = nn.Embedding(vocab, d_model)
        self.pos = nn.Embedding(max_len, d_model)
        self.blocks = nn.Sequential(*[Block(d_model, heads) for _ in range(layers)])
        self.ln = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab)
        self.checkpoint = False  # a plain attribute: it changes what is traced, not the parameters

    def forward(self, idx):
        x = self.tok(idx) + self.pos(np.arange(idx.shape[1]))
        for block in self.blocks:
            # inside a checkpoint region only the block's input is kept for the backward pass; the
            # attention scores and MLP activations are recomputed there instead
            # tracer.guard: value_and_grad retraces if the flag changes instead of replaying a stale trace
            x = tracer.checkpoint(block)(x) if tracer.guard(lambda: self.checkpoint) else block(x)
        return self.head(self.ln(x))


def make_batch(rng: np.random.Generator, batch: int, length: int) -> tuple[np.ndarray, np.ndarray]:
    """Inputs (batch, 2*length) = digits, SEP, sorted[:-1]; labels = the next token on output positions."""
    digits = rng.integers(0, DIGITS, (batch, length))
    seq = np.concatenate([digits, np.full((batch, 1), SEP), np.sort(digits, axis=1)], axis=1)
    x, y = seq[:, :-1], seq[:, 1:].copy()
    y[:, :length] = IGNORE  # predicting the unsorted digits is impossible; only the output counts
    return x.astype("int64"), y.astype("int64")


def token_accuracy(model: GPT, x: np.ndarray, y: np.ndarray) -> float:
    """Teacher-forced accuracy on the output positions, evaluated eagerly."""
    model.eval()
    pred = model(tracer.tensor(x)).numpy().argmax(-1)
    model.train()
    mask = y != IGNORE
    return float((pred[mask] == y[mask]).mean())


def generate(model: GPT, digits: np.ndarray) -> np.ndarray:
    """Greedy decoding: feed digits and SEP, append the argmax `length` times (eager, any length)."""
    model.eval()
    seq = np.concatenate([digits, np.full((len(digits), 1), SEP)], axis=1).astype("int64")
    for _ in range(digits.shape[1]):
        nxt = model(tracer.tensor(seq)).numpy()[:, -1].argmax(-1)
        seq = np.concatenate([seq, nxt[:, None]], axis=1)
    model.train()
    return seq[:, digits.shape[1] + 1:]


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="Train a small GPT to sort digits; optionally checkpoint every block.")
    d, fast, full = PRESETS["default"], PRESETS["fast"], PRESETS["full"]

    def default(name: str) -> str:
        return f"default: {d[name]}; --fast: {fast[name]}; --full: {full[name]}"
    p.add_argument("--steps", type=int, default=None, help=f"training steps ({default('steps')})")
    p.add_argument("--batch-size", type=int, default=64, help="sequences per step (default: 64)")
    p.add_argument("--lr", type=float, default=None, help=f"peak AdamW learning rate ({default('lr')})")
    p.add_argument("--length", type=int, default=8, help="digits per sequence (default: 8)")
    p.add_argument("--d-model", type=int, default=None, help=f"embedding width ({default('d_model')})")
    p.add_argument("--heads", type=int, default=None, help=f"attention heads ({default('heads')})")
    p.add_argument("--layers", type=int, default=2, help="transformer blocks (default: 2)")
    p.add_argument("--held-out", type=int, default=None, help=f"held-out sequences ({default('held_out')})")
    p.add_argument("--seed", type=int, default=0, help="seed for weights and data (default: 0)")
    p.add_argument("--checkpoint", action="store_true", help="make every block a gradient checkpoint region")
    size = p.add_mutually_exclusive_group()
    size.add_argument("--fast", action="store_true", help="tiny model, few steps, for CI (no accuracy target)")
    size.add_argument("--full", action="store_true", help="the wider model trained longer (several minutes)")
    p.add_argument("--distributed", action="store_true",
                   help="data-parallel over the processes of `mpiexec -n N` (--batch-size is the total over them)")
    args = p.parse_args(argv)
    preset = PRESETS["fast" if args.fast else "full" if args.full else "default"]
    for name, value in preset.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    if min(args.steps, args.batch_size, args.length, args.d_model, args.heads, args.layers, args.held_out) < 1:
        p.error("--steps, --batch-size, --length, --d-model, --heads, --layers and --held-out must be at least 1")
    return args


def main(argv=None) -> float | None:
    """Train and report; the held-out token accuracy (None on ranks other than 0 of a distributed run)."""
    args = parse_args(argv)
    rank, world = 0, 1
    if args.distributed:
        nn.distributed.init()
        rank, world = nn.distributed.rank(), nn.distributed.world_size()
        if args.batch_size % world:
            raise SystemExit(f"train_gpt.py: error: --batch-size {args.batch_size} does not split evenly over "
                             f"{world} processes")
    # flushed: with stdout redirected to a file every line is there as soon as it is printed
    log = functools.partial(print, flush=True) if rank == 0 else (lambda *a, **k: None)
    rng = np.random.default_rng(args.seed)  # the same batches on every process; each takes its rows
    nn.init.manual_seed(args.seed)  # weights
    tracer.manual_seed(args.seed)  # dropout masks
    model = GPT(DIGITS + 1, 2 * args.length, args.d_model, args.heads, args.layers)
    model.checkpoint = args.checkpoint
    opt = optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    schedule = optim.WarmupCosine(opt, warmup_steps=min(50, args.steps), total_steps=args.steps)

    def loss_fn(x, y):
        logits = model(x)
        return F.cross_entropy(logits.reshape((-1, DIGITS + 1)), y.reshape(-1), ignore_index=IGNORE)

    step = autodiff.value_and_grad(loss_fn, wrt=model.parameters())
    train_step = step
    if args.distributed:
        nn.distributed.broadcast_parameters(model)  # every process starts from rank 0's weights
        train_step = nn.distributed.data_parallel(step)  # loss and gradients averaged over the processes
    x_test, y_test = make_batch(np.random.default_rng(args.seed + 10_000), args.held_out, args.length)

    n_params = sum(p.numpy().size for p in model.parameters())
    mode = "every block checkpointed" if args.checkpoint else "no checkpointing"
    if args.distributed:
        log(f"distributed: {world} processes, {args.batch_size // world} of each batch's {args.batch_size} "
            "sequences per process")
    log(f"gpt: sort {args.length} digits, {args.layers} blocks, d_model {args.d_model}, {args.heads} heads "
        f"({n_params} parameters), {args.steps} steps of {args.batch_size} sequences, {mode}")
    report_every = max(1, args.steps // 10)
    start = t0 = time.perf_counter()
    last_report = 0
    steps = range(1, args.steps + 1)
    for i in nn.data.progress(steps, desc="train") if rank == 0 else steps:
        x, y = make_batch(rng, args.batch_size, args.length)
        x, y = x[rank::world], y[rank::world]  # this process's sequences (all of them on one process)
        loss, grads = train_step(x, y)
        opt.step(grads)
        schedule.step()
        if rank == 0 and (i % report_every == 0 or i == args.steps):
            # steps since the last report (the last one may be short); the first includes tracing and compiling
            rate = (i - last_report) / (time.perf_counter() - t0)
            acc = token_accuracy(model, x_test, y_test)
            log(f"step {i:5d}  train loss {loss.item():.4f}  held-out token accuracy {acc:.2%}  {rate:6.1f} steps/s")
            t0, last_report = time.perf_counter(), i
    wall = time.perf_counter() - start
    if rank != 0:  # the rest evaluates and compares on rank 0 alone
        return None

    solved = generate(model, x_test[:, :args.length])
    want = np.sort(x_test[:, :args.length], axis=1)
    for d, s in zip(x_test[:5, :args.length], solved[:5], strict=True):
        log(f"  {' '.join(map(str, d))}  ->  {' '.join(map(str, s))}  {'ok' if (s == np.sort(d)).all() else 'WRONG'}")
    log(f"final held-out token accuracy {acc:.2%}  greedy sequences fully sorted {(solved == want).all(1).mean():.2%}"
          f"  wall time {wall:.1f} s")
    if args.distributed and world > 1:
        c = train_step.comm_stats
        log(f"all-reduce: {c.collectives / c.calls:.0f} per step of {c.bytes / c.calls:,.0f} bytes, "
              f"{1e3 * c.seconds / c.calls:.3f} ms per step, {c.seconds / wall:.1%} of the wall time")

    # The same step with checkpointing toggled, once, on the same batch: the memory it saves, same numbers.
    loss_a, grads_a = step(x, y)
    stats = {args.checkpoint: step.stats}  # the executor's stats of the last call
    model.checkpoint = not args.checkpoint
    other = autodiff.value_and_grad(loss_fn, wrt=model.parameters())
    loss_b, grads_b = other(x, y)
    stats[model.checkpoint] = other.stats
    model.checkpoint = args.checkpoint
    diff = max(float(np.abs(a.numpy() - b.numpy()).max()) for a, b in zip(grads_a, grads_b, strict=True))
    peak = {k: s.peak_bytes for k, s in stats.items()}
    ops = {k: sum(s.op_counts.values()) for k, s in stats.items()}
    log(f"peak bytes of one training step: {peak[False]:,} without checkpointing, {peak[True]:,} with "
          f"({peak[True] / peak[False]:.2f}x); ops run: {ops[False]} without, {ops[True]} with (recomputation)")
    log(f"checkpointing changes no number: loss difference {abs(loss_a.item() - loss_b.item()):.1e}, "
          f"largest gradient difference {diff:.1e}")
    return acc


if __name__ == "__main__":
    main()
