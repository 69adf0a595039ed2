"""`python -m benchmarks`: issue 10's workloads in tracegrad and every other library installed.

One SGD training step (loss, gradients, update) of the MLP 784-1024-1024-10 (batch 256), the tiny MLP
64-64-64-10 (batch 32), the GPT (vocab 64, context 64, width 128, 4 heads, 4 layers, batch 16) and the
checkpoint benchmark's residual model, in tracegrad (fusion off, and on: `tracegrad+fuse`), hand-written
NumPy, PyTorch eager, torch.compile and JAX where installed. The contenders of one workload alternate
round by round in one process (`interleaved_medians`), once with one thread and once with the
machine's threads (a child process each: BLAS reads its thread count at start-up). One table: median
step time, ratios to hand NumPy (MLPs) or PyTorch eager (GPT, checkpoint), first-call time (build +
first step: trace, Gradient and compile for tracegrad) and tracegrad's executor peak bytes. Then a
scaling run at one thread: step time against batch size, first-call time against depth.

    python -m benchmarks            # the full run (minutes; torch.compile compiles each model)
    python -m benchmarks --quick    # fewer rounds, a smaller checkpoint model, no torch.compile
    python -m benchmarks --plot     # also docs/benchmarks_scaling.png (needs matplotlib)

On a shared, loaded machine absolute times drift: the ratios measured side by side are what count.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS")


def _optional(name):
    try:
        return __import__(name)
    except ImportError:
        return None


def _measure(builders: dict, rounds: int, first_reps: int = 1) -> dict:
    """{name: {step, first, peak}}: first = build + first call (median of first_reps builds, taken in
    turn); step = interleaved median (seconds)."""
    from benchmarks.checkpoint_memory import interleaved_medians
    from ir.transform.fuse import fusion

    steps, firsts = {}, {name: [] for name in builders}
    for _ in range(first_reps):
        for name, build in builders.items():
            with fusion(name.endswith("+fuse")):
                t0 = time.perf_counter()
                steps[name] = build()
                steps[name]()
                firsts[name].append(time.perf_counter() - t0)
    rows = {name: {"first": statistics.median(ts)} for name, ts in firsts.items()}
    for name, t in interleaved_medians(steps, rounds).items():
        rows[name]["step"] = t
        stats = getattr(steps[name], "stats", None)
        rows[name]["peak"] = stats().peak_bytes if stats is not None else None
    return rows


def _with_fused(builders: dict) -> dict:
    out = {}
    for name, build in builders.items():
        out[name] = build
        if name.startswith("tracegrad"):
            out[name + "+fuse"] = build
    return out


def child(args) -> dict:
    """One thread setting: every workload, and at one thread the scaling run."""
    sys.path.insert(0, str(ROOT))
    from benchmarks import workloads as w
    torch, jax = _optional("torch"), _optional("jax")
    if torch is not None:
        torch.set_num_threads(args.threads)
    compile_torch = not args.quick and torch is not None
    rounds = args.rounds or (5 if args.quick else 20)
    results = {}
    mlps = [("MLP 784-1024-1024-10 b256", (784, 1024, 1024, 10), 256),
            ("tiny MLP 64-64-64-10 b32", (64, 64, 64, 10), 32)]
    for title, sizes, batch in mlps:
        results[title] = _measure(_with_fused(w.mlp_contenders(sizes, batch, torch, jax, compile_torch)),
                                  rounds if sizes[1] > 64 else rounds * 20)
    gpt = dict(w.GPT_SHAPE)
    results["GPT v64 t64 d128 h4 L4 b16"] = _measure(_with_fused(w.gpt_contenders(gpt, torch, compile_torch)),
                                                      max(3, rounds // 2))
    ck, title = w.checkpoint_contenders(args.quick, torch)
    results[f"checkpoint: {title}"] = _measure(_with_fused(ck), rounds)
    out = {"threads": args.threads, "results": results}
    if args.threads == 1:
        out["batch"] = {b: _measure(_with_fused(w.mlp_contenders((784, 1024, 1024, 10), b, torch, jax, False)),
                                    rounds) for b in (32, 64, 128, 256)}
        out["depth"] = {d: _measure(_with_fused(w.mlp_contenders((64,) * (d + 1) + (10,), 32, None, jax)), 1, 3)
                        for d in (4, 16, 64)}
    return out


def _ms(t):
    return "-" if t is None else f"{t * 1e3:.3f}"


def print_table(runs: list[dict]) -> None:
    print("| workload | threads | library | step ms | vs numpy | vs torch | first call ms | peak MiB |")
    print("|---|---|---|---|---|---|---|---|")
    for run in runs:
        for title, rows in run["results"].items():
            base_np = rows.get("numpy", {}).get("step")
            base_t = rows.get("torch", rows.get("torch none", {})).get("step")
            for name, r in rows.items():
                vs_np = f"{r['step'] / base_np:.2f}" if base_np else "-"
                vs_t = f"{r['step'] / base_t:.2f}" if base_t else "-"
                peak = "-" if r["peak"] is None else f"{r['peak'] / 2**20:.2f}"
                print(f"| {title} | {run['threads']} | {name} | {_ms(r['step'])} | {vs_np} | {vs_t} | "
                      f"{_ms(r['first'])} | {peak} |")


def print_scaling(run: dict) -> None:
    names = list(next(iter(run["batch"].values())))
    print("\nScaling, 1 thread: MLP 784-1024-1024-10 step ms against batch size")
    print("| batch | " + " | ".join(names) + " |")
    print("|---" * (len(names) + 1) + "|")
    for b, rows in run["batch"].items():
        print(f"| {b} | " + " | ".join(_ms(rows[n]["step"]) for n in names) + " |")
    print("\nFirst call (build + trace + Gradient + compile + one step) ms against depth, MLP width 64, batch 32")
    names = [n for n in next(iter(run["depth"].values())) if n != "numpy"]
    print("| layers | " + " | ".join(names) + " |")
    print("|---" * (len(names) + 1) + "|")
    for d, rows in run["depth"].items():
        print(f"| {d} | " + " | ".join(_ms(rows[n]["first"]) for n in names) + " |")


def plot(run: dict, path: Path) -> None:
    try:
        import matplotlib
    except ImportError:
        print("--plot: matplotlib is not installed (pip install matplotlib); no plot")
        return
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    batches = [int(b) for b in run["batch"]]
    fig, ax = plt.subplots(figsize=(6, 4))
    for name in next(iter(run["batch"].values())):
        ax.plot(batches, [rows[name]["step"] * 1e3 for rows in run["batch"].values()], marker="o", label=name)
    ax.set(xscale="log", yscale="log", xlabel="batch size", ylabel="step ms (median, 1 thread)",
           title="MLP 784-1024-1024-10: one SGD step")
    ax.set_xticks(batches, [str(b) for b in batches])
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"plot: {path}")


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="fewer rounds, a small checkpoint model, no torch.compile")
    p.add_argument("--plot", action="store_true", help="step time against batch size: docs/benchmarks_scaling.png")
    p.add_argument("--rounds", type=int, default=None, help="interleaved timing rounds (default 20, quick 5)")
    p.add_argument("--threads", type=int, default=None, help=argparse.SUPPRESS)  # a child's own setting
    args = p.parse_args(argv)
    if args.threads is not None:
        os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")
        print(json.dumps(child(args)))
        return
    cpus = os.cpu_count() or 1
    runs = []
    for threads in dict.fromkeys((1, cpus)):
        env = {**os.environ, **{v: str(threads) for v in THREAD_VARS}}
        cmd = [sys.executable, "-m", "benchmarks", "--threads", str(threads)] + (["--quick"] if args.quick else [])
        if args.rounds:
            cmd += ["--rounds", str(args.rounds)]
        proc = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True)
        if proc.returncode:
            sys.exit(f"benchmarks at {threads} thread(s) failed:\n{proc.stderr[-4000:]}")
        runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    versions = [f"numpy {__import__('numpy').__version__}"]
    for name in ("torch", "jax", "numexpr"):
        mod = _optional(name)
        versions.append(f"{name} {mod.__version__}" if mod else f"{name}: not installed, skipped")
    print(f"{cpus} CPUs; " + "; ".join(versions))
    print_table(runs)
    print_scaling(runs[0])
    if args.plot:
        plot(runs[0], ROOT / "docs" / "benchmarks_scaling.png")


if __name__ == "__main__":
    main()
