"""`python -m benchmarks`: one training step of each benchmark workload in tracegrad and every other
library installed, each library in its own process, against the project's speed targets.

Workloads: the MLP 784-1024-1024-10 (batch 256), the tiny MLP 64-64-64-10 (batch 32), the GPT (vocab 64,
context 64, width 128, 4 heads, 4 layers, batch 16), pytorch/examples' mnist CNN and word_language_model
LSTM, and the checkpoint benchmark's residual model. Contenders: tracegrad on its plain NumPy path and,
when numba is installed, with the `fast` extra's kernels; hand-written NumPy (MLPs); PyTorch eager and
torch.compile; JAX where installed. Every contender runs in its own worker process on one thread (the GPT
also on two); the workers of a workload are asked in turn for a burst of steps, round after round, and
the medians are compared. Printed: one table (each column explained above it), then every target with
its measured ratio and pass/miss.

    python -m benchmarks            # the full run (minutes; torch.compile compiles each model)
    python -m benchmarks --quick    # fewer rounds, a small checkpoint model, no torch.compile
    python -m benchmarks --only gpt --only tiny --skip torch.compile
    python -m benchmarks --plot     # also the batch-size scaling run and docs/benchmarks_scaling.png

On a shared, loaded machine absolute times drift: the ratios measured side by side are what count.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

from benchmarks import harness, report

ROOT = Path(__file__).resolve().parents[1]
OPTIONAL = ("numba", "torch", "jax")


def installed() -> set:
    """The optional modules importable here (numba: the `fast` rows; torch; jax)."""
    return {name for name in OPTIONAL if harness.has_module(name)}


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def run(args, have: set) -> dict:
    """Every workload's measurements, the cold first calls and (with --plot) the scaling run."""
    rounds = args.rounds or (5 if args.quick else 15)
    out = {"results": {}, "cold": {}, "quick": args.quick, "failed": {}}
    with tempfile.TemporaryDirectory(prefix="tracegrad-bench-cache-") as cache:  # cold, then warm kernels
        for wl, contenders in report.plan(args.quick, have, args.only, args.skip).items():
            if not contenders:
                continue
            _say(f"{report.TITLES[wl]}: {', '.join(c.label for c in contenders)}")
            fast = next((c for c in contenders if c.label == "tracegrad fast"), None)
            failed = out["failed"].setdefault(wl, [])
            if wl in report.FIRST_CALL and fast is not None:
                try:
                    out["cold"][wl] = harness.first_call(wl, fast, cache)
                except RuntimeError as e:
                    _say(str(e))
            out["results"][wl] = harness.measure(wl, contenders, rounds, args.quick, cache, _say, failed)
        if args.plot:
            rows = [c for c in report.plan(True, have, ["mlp"], args.skip)["mlp"]]
            out["scaling"] = {b: harness.measure(f"mlp_b{b}", rows, rounds, True, cache, _say)
                              for b in (32, 64, 128, 256)}
    return out


def plot(scaling: dict, path: Path) -> None:
    """Step time against batch size (log-log), one line per contender."""
    try:
        import matplotlib
    except ImportError:
        print("--plot: matplotlib is not installed (pip install matplotlib); no plot")
        return
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    batches = [int(b) for b in scaling]
    fig, ax = plt.subplots(figsize=(6, 4))
    for name in next(iter(scaling.values())):
        ax.plot(batches, [rows[name]["step"] * 1e3 for rows in scaling.values()], marker="o", label=name)
    ax.set(xscale="log", yscale="log", xlabel="batch size", ylabel="step ms (median, 1 thread)",
           title="MLP 784-1024-1024-10: one SGD step")
    ax.set_xticks(batches, [str(b) for b in batches])
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"plot: {path}")


def header(have: set) -> str:
    """One line: CPUs, library versions, what is not installed."""
    from importlib.metadata import version
    parts = [f"{os.cpu_count()} CPUs", f"numpy {version('numpy')}"]
    for name in OPTIONAL:
        if name in have:
            parts.append(f"{name} {version(name)}")
        else:
            parts.append(f"{name}: not installed, its rows skipped")
    return "; ".join(parts)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("--quick", action="store_true", help="5 rounds, a small checkpoint model, no torch.compile")
    p.add_argument("--plot", action="store_true",
                   help="also step time against batch size: docs/benchmarks_scaling.png (needs matplotlib)")
    p.add_argument("--rounds", type=int, default=None, help="interleaved timing rounds (default 15, quick 5)")
    p.add_argument("--only", action="append", choices=report.WORKLOADS, help="a workload (repeatable; default all)")
    p.add_argument("--skip", action="append", default=[], metavar="ROW",
                   help='drop a row by its label, e.g. "torch.compile" (repeatable)')
    p.add_argument("--json", metavar="FILE", help="also write the measurements to FILE")
    return p


def main(argv=None) -> None:
    args = parser().parse_args(argv)
    have = installed()
    measured = run(args, have)
    if args.json:
        Path(args.json).write_text(json.dumps(measured, indent=1))
    print(header(have))
    print(report.render_table(measured["results"]))
    print()
    print(report.render_targets(report.targets(measured, have)))
    if "scaling" in measured:
        print()
        print(report.render_scaling(measured["scaling"]))
        plot(measured["scaling"], ROOT / "docs" / "benchmarks_scaling.png")


if __name__ == "__main__":
    main()
