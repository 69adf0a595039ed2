"""What `python -m benchmarks` runs and how it prints it: the contenders of each workload, the table,
and the speed targets with the measured ratio beside each. Pure functions of the measurements (no timing
here), so the tests render fake ones.

A run's measurements: `{"results": {workload: {label: {"step": s, "first": s, "faults": per step,
"peak": bytes or None}}}, "cold": {workload: s}, "quick": bool}`; "cold" is the first call of `tracegrad fast` with an
empty kernel cache (numba compiles every kernel), beside the table's warm-cache first call.
"""
from __future__ import annotations

from benchmarks.harness import FAST, PLAIN, Contender

TITLES = {"mlp": "MLP 784-1024-1024-10 b256", "tiny": "tiny MLP 64-64-64-10 b32",
          "gpt": "GPT v64 t64 d128 h4 L4 b16", "mnist": "mnist CNN b64 (pytorch/examples)",
          "wlm": "word_language_model LSTM 2x200 bptt35 b20", "checkpoint": "checkpoint: residual tanh"}
WORKLOADS = tuple(TITLES)
FIRST_CALL = ("mlp", "gpt")  # the workloads whose first call has a target (cold compile measured too)

COLUMNS = (
    ("step ms", "median over interleaved rounds of one training step's wall time (loss, gradients, update)"),
    ("vs numpy", "step time / hand-written NumPy's on the same workload (MLPs)"),
    ("vs torch", "step time / PyTorch eager's on the same workload"),
    ("first ms", "the first step in a fresh process, data and weights made before (trace, Gradient, compile)"),
    ("faults/step", "minor page faults per step in the contender's own process (resource.getrusage)"),
    ("peak MiB", "tracegrad's executor stats.peak_bytes"),
)
ROW_NOTES = (
    "tracegrad numpy: TRACEGRAD_KERNELS=numpy, the plain NumPy path (what runs without the `fast` extra)",
    "tracegrad fast: the `fast` extra's numba kernels as installed (fusion off, its default); a row only with numba",
    "torch: PyTorch eager; torch.compile: Dynamo+Inductor (not in --quick); jax: one jax.jit-ed step (when installed)",
)


def tracegrad_rows(have: set) -> list[Contender]:
    """tracegrad's configurations: the plain NumPy path, and `fast` when numba is installed."""
    rows = [Contender("tracegrad numpy", "tracegrad", PLAIN)]
    if "numba" in have:
        rows.append(Contender("tracegrad fast", "tracegrad", FAST))
    return rows


def best(have: set) -> str:
    """The label of tracegrad's fastest configuration available here."""
    return "tracegrad fast" if "numba" in have else "tracegrad numpy"


def plan(quick: bool, have: set, only=None, skip=()) -> dict[str, list[Contender]]:
    """{workload: contenders} for the run: `have` is the set of installed optional modules (numba, torch,
    jax); `only` restricts the workloads, `skip` drops rows by label."""
    out = {}
    torch = "torch" in have
    for wl in only or WORKLOADS:
        tg = tracegrad_rows(have)
        if wl == "checkpoint":
            rows = [Contender(f"tracegrad {v}", f"tracegrad {v}", tg[-1].env) for v in ("none", "every")]
            rows += [Contender(f"torch {v}", f"torch {v}") for v in ("none", "every")] if torch else []
        else:
            rows = tg + ([Contender("numpy", "numpy")] if wl in ("mlp", "tiny") else [])
            rows += [Contender("torch", "torch")] if torch else []
            if torch and not quick and wl in ("mlp", "tiny", "gpt"):
                rows.append(Contender("torch.compile", "torch.compile"))
            if "jax" in have and wl in ("mlp", "tiny", "gpt"):
                rows.append(Contender("jax", "jax"))
            if wl == "gpt":  # the 2-vs-1-thread target
                c = next(c for c in tg if c.label == best(have))
                rows.append(Contender(c.label + " 2 threads", c.library, c.env, threads=2))
        out[wl] = [c for c in rows if c.label not in skip]
    return out


def _ms(t):
    return "-" if t is None else f"{t * 1e3:.3f}"


def render_table(results: dict) -> str:
    """The markdown table of every row, each column explained above it."""
    lines = [f"- {name}: {text}" for name, text in COLUMNS] + [f"- {note}" for note in ROW_NOTES] + [""]
    lines += ["| workload | library | step ms | vs numpy | vs torch | first ms | faults/step | peak MiB |",
              "|---|---|---|---|---|---|---|---|"]
    for wl, rows in results.items():
        base_np = rows.get("numpy", {}).get("step")
        base_t = rows.get("torch", rows.get("torch none", {})).get("step")
        for label, r in rows.items():
            vs_np = f"{r['step'] / base_np:.2f}" if base_np else "-"
            vs_t = f"{r['step'] / base_t:.2f}" if base_t else "-"
            peak = "-" if r.get("peak") is None else f"{r['peak'] / 2**20:.2f}"
            faults = "-" if r.get("faults") is None else f"{r['faults']:.0f}"
            lines.append(f"| {TITLES.get(wl, wl)} | {label} | {_ms(r['step'])} | {vs_np} | {vs_t} | "
                         f"{_ms(r['first'])} | {faults} | {peak} |")
    return "\n".join(lines)


def why_missing(run: dict, have: set, wl: str, label: str) -> str:
    """Why row `label` of workload `wl` has no measurement: not installed, not in --quick, not run."""
    module = {"tracegrad fast": "numba", "torch": "torch", "torch.compile": "torch", "jax": "jax"}.get(label)
    if module is not None and module not in have:
        return f"{module} not installed"
    if wl not in run["results"]:
        return f"{wl} not run"
    if label in run.get("failed", {}).get(wl, ()):
        return f"{label} failed: its error is above the table"
    if label == "torch.compile" and run.get("quick"):
        return "torch.compile not in --quick"
    if label == "jax" and wl not in ("mlp", "tiny", "gpt"):
        return f"no JAX {wl} workload"
    return f"{label} not measured"


def _ratio_target(run, have, wl, a, b, limit, text, strict=False):
    rows = run["results"].get(wl, {})
    if a not in rows or b not in rows:
        return text, "-", f"skipped ({why_missing(run, have, wl, a if a not in rows else b)})"
    ratio = rows[a]["step"] / rows[b]["step"]
    ok = ratio < limit if strict else ratio <= limit
    return text, f"{ratio:.2f}x", "pass" if ok else "miss"


def targets(run: dict, have: set) -> list[tuple[str, str, str]]:
    """(target, measured, verdict) for every speed target; verdict is pass, miss or skipped (why)."""
    res, cold = run["results"], run.get("cold", {})
    fast, plain, top = "tracegrad fast", "tracegrad numpy", best(have)

    def ratio(*spec, strict=False):
        return _ratio_target(run, have, *spec, strict=strict)

    out = [
        ratio("gpt", fast, "torch", 0.8, "GPT <= 0.8x torch eager (fast)"),
        ratio("gpt", plain, "torch", 1.0, "GPT <= 1.0x torch eager (plain NumPy)"),
        ratio("gpt", top, "torch.compile", 1.0, f"GPT below torch.compile ({top})", strict=True),
        ratio("gpt", top, "jax", 1.0, f"GPT below JAX jit ({top})", strict=True),
        ratio("tiny", fast, "numpy", 0.6, "tiny MLP <= 0.6x hand NumPy (fast)"),
        ratio("tiny", fast, "torch", 0.25, "tiny MLP >= 4x faster than torch eager: <= 0.25x (fast)"),
        ratio("tiny", plain, "numpy", 1.3, "tiny MLP <= 1.3x hand NumPy (plain NumPy)"),
        ratio("mlp", top, "torch", 1.0, f"MLP <= 1.0x torch eager ({top})"),
        ratio("mlp", top, "numpy", 1.0, f"MLP <= 1.0x hand NumPy ({top})"),
        ratio("mnist", top, "torch", 1.0, f"mnist CNN <= 1.0x torch eager ({top})"),
        ratio("wlm", top, "torch", 1.0, f"word_language_model LSTM <= 1.0x torch eager ({top})"),
    ]
    gpt = res.get("gpt", {})
    two = top + " 2 threads"
    if top in gpt and two in gpt:
        speedup = gpt[top]["step"] / gpt[two]["step"]
        out.append((f"GPT on 2 threads >= 1.5x faster than 1 ({top})", f"{speedup:.2f}x",
                    "pass" if speedup >= 1.5 else "miss"))
    else:
        missing = two if top in gpt else top
        out.append((f"GPT on 2 threads >= 1.5x faster than 1 ({top})", "-",
                    f"skipped ({why_missing(run, have, 'gpt', missing)})"))
    for wl, limit in (("mlp", 0.05), ("gpt", 0.5)):
        text = f"first call {TITLES[wl].split(' ')[0]} <= {limit * 1e3:.0f} ms, warm kernel cache ({top})"
        row = res.get(wl, {}).get(top)
        if row is None:
            out.append((text, "-", f"skipped ({why_missing(run, have, wl, top)})"))
            continue
        measured = f"{row['first'] * 1e3:.0f} ms"
        if wl in cold:
            measured += f" (cold compile {cold[wl] * 1e3:.0f} ms)"
        out.append((text, measured, "pass" if row["first"] <= limit else "miss"))
    for label in (plain, fast):
        row = gpt.get(label)
        text = f"minor page faults per GPT step <= 500 ({label})"
        if row is None:
            out.append((text, "-", f"skipped ({why_missing(run, have, 'gpt', label)})"))
        else:
            out.append((text, f"{row['faults']:.0f}", "pass" if row["faults"] <= 500 else "miss"))
    return out


def render_targets(rows: list[tuple[str, str, str]]) -> str:
    """The targets as a markdown table: target, measured ratio (or time, or count), pass/miss."""
    lines = ["| target (1 thread unless said) | measured | verdict |", "|---|---|---|"]
    lines += [f"| {t} | {m} | {v} |" for t, m, v in rows]
    return "\n".join(lines)


def render_scaling(scaling: dict) -> str:
    """The scaling run: MLP 784-1024-1024-10 step ms against batch size ({batch: {label: row}})."""
    names = list(next(iter(scaling.values())))
    lines = ["Scaling, 1 thread: MLP 784-1024-1024-10 step ms against batch size",
             "| batch | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    for b, rows in scaling.items():
        lines.append(f"| {b} | " + " | ".join(_ms(rows[n]["step"]) if n in rows else "-" for n in names) + " |")
    return "\n".join(lines)
