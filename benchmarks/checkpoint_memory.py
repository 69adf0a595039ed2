"""Peak memory and step time of gradient checkpointing, tracegrad against PyTorch.

The model: `blocks` residual blocks h = h + tanh(h @ W_i) of width `width` on a float32 batch, loss
mean(h * h), gradients with respect to every W_i. Three variants:

  none      no checkpoints
  every     every block is a `tracer.checkpoint` region
  segments  runs of `segment` blocks are regions, the last run is not (its activations are needed at
            once by the backward pass, as in torch.utils.checkpoint.checkpoint_sequential)

tracegrad's number is the executor's `stats.peak_bytes`: the most bytes its live arrays held at once
during one call of main_adjoint (arguments, i.e. the input batch and the weights, included). It is
deterministic. See `torch_step` for what is measured on the PyTorch side.

    python benchmarks/checkpoint_memory.py            # 32 blocks, width 128, batch 2048
    python benchmarks/checkpoint_memory.py --quick    # 8 blocks, width 32, batch 256
"""
from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import time
from pathlib import Path

if __name__ == "__main__":
    # OpenBLAS (NumPy's BLAS) keeps its worker threads spinning a while after each call; in one process
    # on 2 cores they stole PyTorch's cores (its MLP step took twice as long right after a NumPy step).
    # A short spin removed that; set the variable yourself to override it.
    os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # make the repository importable

import numpy as np  # noqa: E402

import autodiff  # noqa: E402
import ir  # noqa: E402
import tracer  # noqa: E402

VARIANTS = ("none", "every", "segments")


def make_weights(blocks: int, width: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((width, width)) / np.sqrt(width)).astype("float32") for _ in range(blocks)]


def make_batch(batch: int, width: int, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((batch, width)).astype("float32")


def block(h, w):
    return h + tracer.tanh(h @ w)


def residual_loss(weights, variant: str, segment: int = 4):
    """loss(x) for the benchmark's model over `weights` (Tensors the function captures)."""
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")

    def loss(x):
        h = x
        if variant == "none":
            for w in weights:
                h = block(h, w)
        elif variant == "every":
            for w in weights:
                h = tracer.checkpoint(block)(h, w)
        else:
            for start in range(0, len(weights), segment):
                run = weights[start:start + segment]
                if start + segment < len(weights):
                    with tracer.checkpoint():
                        for w in run:
                            h = block(h, w)
                else:
                    for w in run:
                        h = block(h, w)
        return (h * h).mean()

    return loss


class Compiled:
    """fn traced on `args`, differentiated with respect to the tensors it captures, cleaned up, compiled.

    `step(*arrays)` runs main_adjoint on the arguments followed by the captured tensors' current
    values and returns (value, gradients); `executor.stats` then describes that call.
    """

    def __init__(self, fn, *args):
        traced = tracer.trace_function(fn, args)
        self.captured = traced.captured
        params = traced.mod["main"].params
        weights = params[len(params) - len(self.captured):]
        self.mod = ir.transform.cleanup()(autodiff.Gradient("main", require_grads=weights)(traced.mod))
        self.executor = ir.Executor(self.mod)
        self.adjoint = self.executor["main_adjoint"]

    def step(self, *arrays):
        return self.adjoint(*arrays, *[t.numpy() for t in self.captured])


def compile_variant(weights: list[np.ndarray], x: np.ndarray, variant: str, segment: int = 4) -> Compiled:
    tensors = [tracer.tensor(w) for w in weights]
    return Compiled(residual_loss(tensors, variant, segment), x)


# ---------------------------------------------------------------- PyTorch


def torch_loss(torch, ws, xt, variant: str, segment: int = 4):
    """The same model in PyTorch, with torch.utils.checkpoint (use_reentrant=False) for the regions."""
    from torch.utils.checkpoint import checkpoint, checkpoint_sequential

    def tblock(h, w):
        return h + torch.tanh(h @ w)

    h = xt
    if variant == "none":
        for w in ws:
            h = tblock(h, w)
    elif variant == "every":
        for w in ws:
            h = checkpoint(tblock, h, w, use_reentrant=False)
    else:  # checkpoint_sequential leaves its last segment uncheckpointed, as our "segments" does
        seq = torch.nn.Sequential(*[_TorchBlock(torch, w) for w in ws])
        h = checkpoint_sequential(seq, -(-len(ws) // segment), h, use_reentrant=False)
    return (h * h).mean()


def _TorchBlock(torch, w):
    class Block(torch.nn.Module):
        def forward(self, h):
            return h + torch.tanh(h @ w)

    return Block()


def torch_memory(torch, weights, x, variant: str, segment: int = 4):
    """One PyTorch forward and backward, measured: returns (grads, saved_bytes, peak_bytes).

    saved_bytes: the unique storages autograd saved for backward, summed over the step (a
    torch.autograd.graph.saved_tensors_hooks pack hook; under checkpointing that is what the
    checkpoints keep plus what each recomputation saves while it runs). peak_bytes: the high-water
    mark of the running sum of the CPU allocation and free events that torch.profiler
    (profile_memory=True) records during the step, plus the bytes of x and the weights, which were
    allocated before it (tracegrad's peak counts its arguments too).
    """
    ws = [torch.tensor(w, requires_grad=True) for w in weights]
    xt = torch.tensor(x)
    storages: dict[int, int] = {}

    def pack(t):
        s = t.untyped_storage()
        storages[s.data_ptr()] = s.nbytes()
        return t

    with _quiet_stderr(), torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                                 profile_memory=True) as prof:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            loss = torch_loss(torch, ws, xt, variant, segment)
        loss.backward()
    held = xt.nbytes + sum(w.nbytes for w in ws)
    return [w.grad.numpy() for w in ws], sum(storages.values()), held + _profiler_peak(prof)


def _profiler_peak(prof) -> int:
    """The highest running total of the profiler's memory events (allocations +, frees -) in time order."""
    events = [e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"]
    events.sort(key=lambda e: e.start_ns())
    live = peak = 0
    for e in events:
        live += e.nbytes()
        peak = max(peak, live)
    return peak


@contextlib.contextmanager
def _quiet_stderr():
    """The profiler's native library logs its start and stop on file descriptor 2."""
    sys.stderr.flush()
    saved = os.dup(2)
    with open(os.devnull, "w") as null:
        os.dup2(null.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def torch_step(torch, ws, xt, variant: str, segment: int = 4) -> None:
    """The step as timed: no profiler, no hooks."""
    for w in ws:
        w.grad = None
    torch_loss(torch, ws, xt, variant, segment).backward()


# ---------------------------------------------------------------- timing and report


def interleaved_medians(steps: dict, repeats: int, warm: int = 1) -> dict[str, float]:
    """Each round runs every step in turn, `warm` untimed calls and then one timed call; returns each
    step's median seconds over `repeats` rounds.

    Interleaving spreads drift in the machine's load over all steps alike; the untimed calls first
    let each one reach its steady state after the others ran (allocator and cache state are shared
    by every framework in the process), as in a training loop that calls the same step repeatedly.
    """
    times: dict[str, list[float]] = {k: [] for k in steps}
    for _ in range(repeats):
        for name, fn in steps.items():
            for _ in range(warm):
                fn()
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    return {k: statistics.median(v) for k, v in times.items()}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="a small model (8 blocks, width 32, batch 256)")
    p.add_argument("--repeats", type=int, default=None, help="timing rounds (default 15, quick 30)")
    args = p.parse_args(argv)
    blocks, width, batch = (8, 32, 256) if args.quick else (32, 128, 2048)
    repeats = args.repeats or (30 if args.quick else 15)
    weights, x = make_weights(blocks, width), make_batch(batch, width)
    print(f"model: {blocks} blocks h = h + tanh(h @ W_i), width {width}, batch {batch}, float32, loss mean(h*h)")

    compiled = {v: compile_variant(weights, x, v) for v in VARIANTS}
    results = {v: c.step(x) for v, c in compiled.items()}
    peaks = {}
    for v, c in compiled.items():
        c.step(x)
        peaks[v] = c.executor.stats.peak_bytes
    for v in VARIANTS[1:]:  # the variants must compute the same thing
        for a, b in zip(results["none"][1], results[v][1], strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    steps = {v: (lambda c=c: c.step(x)) for v, c in compiled.items()}

    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        torch.set_num_threads(numpy_threads())
        torch_mem = {v: torch_memory(torch, weights, x, v) for v in VARIANTS}
        for v in VARIANTS:
            np.testing.assert_allclose(torch_mem[v][0][0], results["none"][1][0], rtol=1e-3, atol=1e-5)
        ws = [torch.tensor(w, requires_grad=True) for w in weights]
        xt = torch.tensor(x)
        steps.update({f"torch {v}": (lambda v=v: torch_step(torch, ws, xt, v)) for v in VARIANTS})

    medians = interleaved_medians(steps, repeats)
    print(f"\ntracegrad (executor peak_bytes, arguments included; step = one main_adjoint call, "
          f"median of {repeats} interleaved rounds)")
    print(f"{'variant':<10} {'peak MiB':>9} {'vs none':>8} {'step ms':>9} {'time vs none':>13}")
    for v in VARIANTS:
        print(f"{v:<10} {peaks[v] / 2**20:9.2f} {peaks[v] / peaks['none']:8.3f} {medians[v] * 1e3:9.2f} "
              f"{medians[v] / medians['none']:13.3f}")
    if torch is None:
        print("\nPyTorch: not installed (pip install torch==2.13.0), skipped")
        return
    print(f"\nPyTorch {torch.__version__} CPU, {torch.get_num_threads()} threads, torch.utils.checkpoint "
          "use_reentrant=False (checkpoint_sequential for segments)")
    print("saved = unique storages saved for backward (saved_tensors_hooks); peak = profiler CPU "
          "allocations high-water mark + x and weights")
    print(f"{'variant':<10} {'saved MiB':>9} {'vs none':>8} {'peak MiB':>9} {'vs none':>8} {'step ms':>9} "
          f"{'time vs none':>13}")
    base_saved, base_peak, base_t = torch_mem["none"][1], torch_mem["none"][2], medians["torch none"]
    for v in VARIANTS:
        _, saved, peak = torch_mem[v]
        t = medians[f"torch {v}"]
        print(f"{v:<10} {saved / 2**20:9.2f} {saved / base_saved:8.3f} {peak / 2**20:9.2f} {peak / base_peak:8.3f} "
              f"{t * 1e3:9.2f} {t / base_t:13.3f}")


def numpy_threads() -> int:
    """The thread count NumPy's BLAS uses (threadpoolctl when present, else the CPU count)."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        import os

        return os.cpu_count() or 1
    counts = [i["num_threads"] for i in threadpool_info() if i.get("user_api") == "blas"]
    return max(counts) if counts else 1


if __name__ == "__main__":
    main()
