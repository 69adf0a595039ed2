"""One prepared check of the GPU path (issue 14), writing one JSON report that is rewritten after every part.

On a machine with an NVIDIA GPU (under 4 minutes on an H200; the fastest parts first, so a timeout still
leaves the report of the parts that finished):

    pip install cupy-cuda12x torch            # where missing (cupy-cuda13x for CUDA 13)
    python benchmarks/gpu_check.py --out gpu_check.json

(docs/benchmarks.md's GPU section has the exact command for this project's lent H200 machines.)

Parts (they run in the order of PARTS below, the fastest first), each in its own try/except with a time
budget (a part past its budget stops between units and says `"truncated": true`; an exception is recorded
with its traceback and the next part runs; the whole run keeps to --time-limit, 225 s by default):

1. environment: Python, NumPy, CuPy and CUDA versions, the GPU's name and memory, torch and its CUDA;
2. op_cases: every row of the op-case table (tests/cases), forward and gradient, on the device against NumPy
   (the tolerances of tests/test_cuda.py), then the gradients again with elementwise fusion on (one generated
   kernel per fused chain, ir/runtime/fused_cuda.py); pass/fail counts, failing rows with their max errors;
3. pytest: `pytest tests/test_cuda.py tests/nn/test_distributed_nccl.py` in a subprocess, its counts;
4. training: 20 steps (5 with --small) of the digits CNN and of the sorting GPT (examples/) on the device and on
   the CPU from the same initial weights and batches: the largest differences of the losses and final parameters;
5. checkpoint_memory: benchmarks/checkpoint_memory.py's model (none / every / segments) on the device: the
   executor's `stats.peak_bytes` and the high-water mark of CuPy's pool (`used_bytes()` read at every
   allocation through a wrapping allocator);
6. step_speed: training-step times of tracegrad (unfused and fused) and PyTorch eager on the device, for the MLP
   784-1024-1024-10 at batch 256 and a GPT of width 512, 8 layers, 8 heads, context 256, batch 32, vocab 64.

Without a GPU: `--device cpu --small` runs every part on NumPy against itself (the wiring), and `--fake-cupy
--small` runs the CuPy branches against tests/fake_cupy.py; tests/test_gpu_check.py runs both.
"""
from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
import traceback
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
for _p in (ROOT, ROOT / "examples"):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

import autodiff  # noqa: E402
import ir  # noqa: E402
import nn  # noqa: E402
import tracer  # noqa: E402
from nn import functional as F  # noqa: E402
from nn import optim  # noqa: E402

# (part, budget in seconds on the GPU), in the order they run: the fastest first (estimates; each part's first
# CUDA kernels compile then), so a timeout leaves the most figures. The sum leaves room under 4 minutes.
PARTS = (("environment", 10), ("checkpoint_memory", 20), ("training", 35), ("step_speed", 65), ("op_cases", 50),
         ("pytest", 55))
TARGET_RATIO = 1.2  # issue 14: a tracegrad step at most 1.2x PyTorch eager's


class Context:
    """The device under test and how to reach it: xp (cupy or numpy), to_device, to_host, sync."""

    def __init__(self, device: str, small: bool):
        self.device, self.small = device, small
        if device == "cuda":
            import cupy
            self.xp = cupy
        else:
            self.xp = np
        try:
            import torch
        except ImportError:
            torch = None
        self.torch = torch
        self.torch_device = "cuda" if torch is not None and torch.cuda.is_available() else "cpu"

    def to_device(self, a):
        return self.xp.asarray(a)

    @staticmethod
    def to_host(a):
        if isinstance(a, tracer.Tensor):
            return a.numpy()
        return a if isinstance(a, (np.ndarray, np.generic)) else a.get()

    def sync(self):
        if self.device == "cuda":
            self.xp.cuda.Device().synchronize()

    def torch_sync(self):
        if self.torch is not None and self.torch_device == "cuda":
            self.torch.cuda.synchronize()


# ---------------------------------------------------------------- 1. environment


def environment(ctx: Context, deadline: float) -> dict:
    out = {"python": sys.version.split()[0], "numpy": np.__version__, "platform": platform.platform(),
           "device": ctx.device, "fuse_enabled_by_default": ir.transform.fuse.enabled()}
    if ctx.device == "cuda":
        cp = ctx.xp
        props = cp.cuda.runtime.getDeviceProperties(0)
        name = props["name"]
        out.update(cupy=cp.__version__, gpu=name.decode() if isinstance(name, bytes) else str(name),
                   gpu_memory_bytes=int(props.get("totalGlobalMem", 0)),
                   cuda_runtime=cp.cuda.runtime.runtimeGetVersion(), gpus=cp.cuda.runtime.getDeviceCount())
    torch = ctx.torch
    out["torch"] = None if torch is None else {
        "version": torch.__version__, "cuda": torch.version.cuda, "cuda_available": torch.cuda.is_available(),
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None}
    return out


# ---------------------------------------------------------------- 2. the op-case table on the device


def _compare(ctx, pairs, rtol, atol) -> tuple[bool, float]:
    ok, worst = True, 0.0
    for want, got in pairs:
        want, got = np.asarray(want), ctx.to_host(got)
        if want.shape != got.shape or want.dtype != got.dtype:
            return False, float("inf")
        if want.dtype.kind in "fc":
            both_nan = np.isnan(want) & np.isnan(got)
            diff = np.where(both_nan | (want == got), 0.0, np.abs(want.astype("float64") - got.astype("float64")))
            worst = max(worst, float(np.nan_to_num(diff, nan=np.inf).max(initial=0.0)))
        else:
            diff = want != got
            worst = max(worst, float(diff.any()))
        ok = ok and bool(np.allclose(got, want, rtol=rtol, atol=atol, equal_nan=True))
    return ok, worst


@contextlib.contextmanager
def _small_chains_fused(on: bool):
    """Fuse the op rows' small chains too (FuseElementwise leaves chains under MIN_ELEMENTS unfused)."""
    from ir.transform import fuse
    previous = getattr(fuse, "MIN_ELEMENTS", None)
    if on and previous is not None:
        fuse.MIN_ELEMENTS = 0
    try:
        yield
    finally:
        if previous is not None:
            fuse.MIN_ELEMENTS = previous


def op_cases(ctx: Context, deadline: float) -> dict:
    from ir.runtime import fused_cuda
    from ir.transform.fuse import fusion
    from tests.cases import all_cases
    from tests.devices import forward_on_both, gradients_on_both
    cases = all_cases()
    if ctx.small:
        cases = cases[::25]
    checks = [("forward", forward_on_both, 1e-4, 1e-5, False), ("gradient", gradients_on_both, 1e-7, 1e-9, False),
              ("fused_gradient", gradients_on_both, 1e-7, 1e-9, True)]
    counts = {kind: {"passed": 0, "failed": 0} for kind, *_ in checks}
    kernels_before = fused_cuda._kernel.cache_info().currsize
    failures, truncated = [], False
    for kind, check, rtol, atol, fused in checks:  # all forwards, all gradients, then fused: the cheap ones first
        for case in cases:
            if time.perf_counter() > deadline:
                truncated = True
                break
            if kind != "forward" and not case.grad:
                continue
            try:
                with fusion(fused), _small_chains_fused(fused):
                    ok, worst = _compare(ctx, check(case, ctx.xp, ctx.device), rtol, atol)
                error = None
            except Exception as e:  # a kernel that fails on the device: recorded, the others still run
                ok, worst, error = False, None, f"{type(e).__name__}: {e}"[:500]
            counts[kind]["passed" if ok else "failed"] += 1
            if not ok:
                failures.append({"case": case.name, "check": kind, "max_abs_err": worst, "error": error})
    return {"cases": len(cases), **counts, "failures": failures[:300], "truncated": truncated,
            "fused_kernels_built": fused_cuda._kernel.cache_info().currsize - kernels_before,
            "fused_kernels_failed": {f"{e} {d}": why for (e, d), why in fused_cuda.FAILED.items()}}


# ---------------------------------------------------------------- 3. the CUDA tests


def run_pytest(ctx: Context, deadline: float) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        junit = Path(tmp) / "junit.xml"
        cmd = [sys.executable, "-m", "pytest", "tests/test_cuda.py", "tests/nn/test_distributed_nccl.py",
               "-p", "no:cacheprovider", f"--junitxml={junit}"]
        timeout = max(5.0, deadline - time.perf_counter())
        try:
            done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
            output, code = done.stdout + done.stderr, done.returncode
        except subprocess.TimeoutExpired as e:
            output, code = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else \
                (e.stdout or ""), "timeout"
        counts = {}
        if junit.exists():
            suite = ElementTree.parse(junit).getroot()
            suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
            counts = {k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")}
    lines = output.strip().splitlines()
    summary = next((ln for ln in reversed(lines) if re.search(r"\d+ (passed|failed|skipped|error)", ln)), None)
    failed = [ln for ln in lines if ln.startswith(("FAILED", "ERROR"))]
    return {"command": " ".join(cmd[1:3] + cmd[3:5]), "returncode": code, "summary": summary, **counts,
            "failed": failed[:100], "tail": lines[-25:]}


# ---------------------------------------------------------------- 4. training on the device against the CPU


def _steps(ctx: Context) -> int:
    return 5 if ctx.small else 20


def _digits(ctx: Context):
    import train_digits
    (x, y), _ = nn.data.load_digits()
    order = np.random.default_rng(0).permutation(len(x))
    batch = 8 if ctx.small else 32
    rows = [order[i:i + batch] for i in range(0, batch * _steps(ctx), batch)]
    batches = [(x[r][:, None], y[r]) for r in rows]  # NCHW with one channel
    return (lambda: train_digits.make_model("cnn")), (lambda m, xb, yb: F.cross_entropy(m(xb), yb)), \
        (lambda params: optim.Adam(params, lr=3e-3)), batches


def _sorting_gpt(ctx: Context):
    import train_gpt
    length, d, heads, batch = (4, 16, 2, 8) if ctx.small else (8, 64, 4, 64)
    rng = np.random.default_rng(0)
    batches = [train_gpt.make_batch(rng, batch, length) for _ in range(_steps(ctx))]
    vocab = train_gpt.DIGITS + 1

    def loss(m, xb, yb):
        return F.cross_entropy(m(xb).reshape((-1, vocab)), yb.reshape(-1), ignore_index=train_gpt.IGNORE)
    return (lambda: train_gpt.GPT(vocab, 2 * length, d, heads, 2)), loss, \
        (lambda params: optim.AdamW(params, lr=3e-3, weight_decay=0.01)), batches


def _train(model, loss, make_opt, batches, device):
    opt = make_opt(model.parameters())
    step = autodiff.value_and_grad(lambda xb, yb: loss(model, xb, yb), wrt=model.parameters())
    losses = []
    start = time.perf_counter()
    for xb, yb in batches:
        value, grads = step(tracer.tensor(xb, device=device), tracer.tensor(yb, device=device))
        opt.step(grads)
        losses.append(float(value.item()))
    params = {n: p.numpy() for n, p in model.named_parameters()}
    return losses, params, time.perf_counter() - start, all(p.device == device for p in model.parameters())


def training(ctx: Context, deadline: float) -> dict:
    out = {}
    for name, build in (("digits_cnn", _digits), ("sorting_gpt", _sorting_gpt)):
        if time.perf_counter() > deadline:
            out[name] = {"skipped": "past the part's time budget"}
            continue
        make, loss, make_opt, batches = build(ctx)
        nn.init.manual_seed(0)
        tracer.manual_seed(0)
        host = make()
        start = {k: np.array(v) for k, v in host.state_dict().items()}  # copies: the two models share nothing
        device_model = make()
        device_model.load_state_dict({k: v.copy() for k, v in start.items()})
        device_model.to(ctx.device)
        tracer.manual_seed(0)
        cpu_losses, cpu_params, cpu_s, _ = _train(host, loss, make_opt, batches, "cpu")
        tracer.manual_seed(0)
        dev_losses, dev_params, dev_s, stayed = _train(device_model, loss, make_opt, batches, ctx.device)
        loss_diff = float(np.max(np.abs(np.subtract(cpu_losses, dev_losses))))
        param_diff = max(float(np.max(np.abs(cpu_params[k] - dev_params[k]))) for k in cpu_params)
        scale = max(float(np.max(np.abs(v))) for v in cpu_params.values())
        out[name] = {"steps": len(batches), "max_abs_loss_diff": loss_diff, "max_abs_param_diff": param_diff,
                     "max_abs_param": scale, "match": loss_diff <= 1e-3 and param_diff <= 1e-3 * max(scale, 1.0),
                     "params_stayed_on_device": stayed, "cpu_losses": cpu_losses, "device_losses": dev_losses,
                     "cpu_seconds": cpu_s, "device_seconds": dev_s}
    return out


# ---------------------------------------------------------------- 5. checkpoint memory on the device


class PoolPeak:
    """The high-water mark of CuPy's default pool's used_bytes() over a block: read at every allocation."""

    def __init__(self, ctx: Context):
        self.ctx, self.peak, self.start = ctx, None, None

    def __enter__(self):
        if self.ctx.device != "cuda":
            return self
        cp = self.ctx.xp
        self.pool = pool = cp.get_default_memory_pool()
        self.start = self.peak = pool.used_bytes()

        def allocate(size):
            memory = pool.malloc(size)
            self.peak = max(self.peak, pool.used_bytes())
            return memory
        cp.cuda.set_allocator(allocate)
        return self

    def __exit__(self, *exc):
        if self.ctx.device == "cuda":
            self.ctx.sync()
            self.ctx.xp.cuda.set_allocator(self.pool.malloc)
        return False


def checkpoint_memory(ctx: Context, deadline: float) -> dict:
    from benchmarks import checkpoint_memory as cm
    # the CPU's peak comes from one CPU step per variant, which the budget must hold as well
    blocks, width, batch = (8, 16, 32) if ctx.small else (16, 256, 2048)
    weights, x = cm.make_weights(blocks, width), cm.make_batch(batch, width)
    out = {"model": f"residual tanh, {blocks} blocks, width {width}, batch {batch}", "variants": {}}
    for variant in cm.VARIANTS:
        if time.perf_counter() > deadline:
            out["truncated"] = True
            break
        compiled = cm.compile_variant(weights, x, variant)
        compiled.step(x)
        cpu_peak = compiled.executor.stats.peak_bytes
        executor = ir.Executor(compiled.mod, device=ctx.device)
        args = [ctx.to_device(x)] + [ctx.to_device(t.numpy()) for t in compiled.captured]
        executor["main_adjoint"](*args)  # the first call compiles the CUDA kernels
        ctx.sync()
        with PoolPeak(ctx) as peak:
            result = executor["main_adjoint"](*args)
            ctx.sync()
            del result
        out["variants"][variant] = {
            "executor_peak_bytes": executor.stats.peak_bytes, "cpu_executor_peak_bytes": cpu_peak,
            "peak_bytes_same_as_cpu": executor.stats.peak_bytes == cpu_peak,
            "pool_used_bytes_peak": peak.peak, "pool_used_bytes_at_start": peak.start,
            "pool_peak_above_start": None if peak.peak is None else peak.peak - peak.start}
    none = out["variants"].get("none", {}).get("pool_peak_above_start")
    for row in out["variants"].values():
        if none and row["pool_peak_above_start"] is not None:
            row["pool_peak_vs_none"] = row["pool_peak_above_start"] / none
    return out


# ---------------------------------------------------------------- 6. step times against PyTorch eager


def _time(step, sync, steps: int, repeats: int, deadline: float) -> dict:
    start = time.perf_counter()
    step()
    sync()
    first = time.perf_counter() - start
    step()
    sync()
    times = []
    for _ in range(repeats):
        if times and time.perf_counter() > deadline:
            break
        t = time.perf_counter()
        for _ in range(steps):
            step()
        sync()
        times.append((time.perf_counter() - t) / steps * 1e3)
    return {"first_call_s": first, "step_ms": float(np.median(times)), "step_ms_each_repeat": times}


def step_speed(ctx: Context, deadline: float) -> dict:
    from benchmarks.step_speed import make_problem
    from benchmarks.workloads import gpt_torch, gpt_tracegrad, mlp_torch, mlp_tracegrad
    from ir.transform.fuse import fusion
    torch, tdev = ctx.torch, ctx.torch_device
    if ctx.small:
        sizes, batch = (64, 32, 10), 16
        shape = {"vocab": 16, "context": 8, "width": 16, "heads": 2, "layers": 1, "batch": 2}
    else:
        sizes, batch = (784, 1024, 1024, 10), 256
        shape = {"vocab": 64, "context": 256, "width": 512, "heads": 8, "layers": 8, "batch": 32}
    params, x, one_hot = make_problem(sizes, batch)
    gpt_device = ctx.device if ctx.device == "cuda" else None
    mlp_steps, gpt_steps = (2, 1) if ctx.small else (20, 3)
    workloads = {
        f"mlp {'-'.join(map(str, sizes))} batch {batch}": (
            lambda: mlp_tracegrad([ctx.to_device(p) for p in params], ctx.to_device(x), ctx.to_device(one_hot)),
            None if torch is None else (lambda: mlp_torch(torch, params, x, one_hot, device=tdev)), mlp_steps),
        "gpt width {width}, {layers} layers, {heads} heads, context {context}, batch {batch}, vocab {vocab}".format(
            **shape): (lambda: gpt_tracegrad(shape, device=gpt_device),
                       None if torch is None else (lambda: gpt_torch(torch, shape, device=tdev)), gpt_steps)}
    out = {"torch_device": tdev, "target_ratio": TARGET_RATIO, "workloads": {}}
    repeats = 2 if ctx.small else 5
    for name, (ours, theirs, steps) in workloads.items():
        row = out["workloads"][name] = {}
        # tracegrad, then torch (the comparison the issue asks for), then tracegrad fused (fusion is decided at
        # the first call, which compiles)
        runs = [("tracegrad", ours, ctx.sync, False),
                ("torch eager", theirs, ctx.torch_sync, False), ("tracegrad fused", ours, ctx.sync, True)]
        for label, build, sync, fused in runs:
            if build is None:
                continue
            if time.perf_counter() > deadline:
                row[label] = {"skipped": "past the part's time budget"}
                continue
            with fusion(fused):
                step = build()
                row[label] = _time(step, sync, steps, repeats, deadline)
            if hasattr(step, "stats"):
                row[label]["executor_peak_bytes"] = step.stats().peak_bytes
        for label in ("tracegrad", "tracegrad fused"):
            if "step_ms" in row.get(label, {}) and "step_ms" in row.get("torch eager", {}):
                ratio = row[label]["step_ms"] / row["torch eager"]["step_ms"]
                row[label]["ratio_to_torch"] = ratio
                row[label]["target_met"] = ratio <= TARGET_RATIO
    return out


# ---------------------------------------------------------------- the report


FUNCTIONS = {"environment": environment, "op_cases": op_cases, "pytest": run_pytest, "training": training,
             "checkpoint_memory": checkpoint_memory, "step_speed": step_speed}


def _write(path: Path, report: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(report, indent=1, default=str))
    os.replace(tmp, path)  # a reader (or a kill) never sees half a file


def _install_fake_cupy() -> None:
    from tests import fake_cupy
    sys.modules["cupy"] = fake_cupy.module(devices=1)


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="The GPU check of issue 14: one JSON report, rewritten after each part.")
    p.add_argument("out", nargs="?", default=None, help="the report's path (default: gpu_check.json)")
    p.add_argument("--out", dest="out_option", default=None, help="the report's path (the same as the positional)")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                   help="cuda (default); cpu runs every part on NumPy against itself, to check the script")
    p.add_argument("--fake-cupy", action="store_true", help="run the cuda branches on tests/fake_cupy.py (a CPU)")
    p.add_argument("--small", action="store_true", help="tiny sizes and a subset of the op cases (for tests)")
    p.add_argument("--parts", nargs="*", choices=[name for name, _ in PARTS], help="run only these parts")
    p.add_argument("--budget-scale", type=float, default=1.0, help="multiply every part's time budget")
    p.add_argument("--time-limit", type=float, default=225.0,
                   help="seconds for the whole run (default 225): no part runs on past it, later parts are skipped")
    args = p.parse_args(argv)
    args.out = Path(args.out_option or args.out or "gpu_check.json")
    return args


def main(argv=None) -> dict:
    args = parse_args(argv)
    if args.fake_cupy:
        _install_fake_cupy()
    report = {"command": "python benchmarks/gpu_check.py " + " ".join(sys.argv[1:] if argv is None else argv),
              "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "device": args.device, "fake_cupy": args.fake_cupy, "small": args.small, "parts": {}}
    try:
        ctx = Context(args.device, args.small)
    except Exception:
        report["error"] = traceback.format_exc()
        _write(args.out, report)
        raise
    end = time.perf_counter() + args.time_limit
    for name, budget in PARTS:
        if args.parts and name not in args.parts:
            continue
        budget *= args.budget_scale
        start = time.perf_counter()
        if start >= end:
            report["parts"][name] = {"status": "skipped", "seconds": 0.0, "budget_s": budget,
                                     "reason": f"the run's --time-limit of {args.time_limit:.0f} s was spent"}
            _write(args.out, report)
            continue
        print(f"gpu_check: {name} (budget {budget:.0f} s) ...", flush=True)
        try:
            result, status = FUNCTIONS[name](ctx, min(start + budget, end)), "ok"
        except Exception:
            result, status = {"traceback": traceback.format_exc()}, "error"
        seconds = time.perf_counter() - start
        report["parts"][name] = {"status": status, "seconds": round(seconds, 2), "budget_s": budget,
                                 "over_budget": seconds > budget, **result}
        _write(args.out, report)
        print(f"gpu_check: {name} {status} in {seconds:.1f} s", flush=True)
    report["finished"] = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    _write(args.out, report)
    print(f"gpu_check: report in {args.out}")
    return report


if __name__ == "__main__":
    main()
