"""`python -m benchmarks`: its --help, the rows it plans, the table and the targets rendered from fake
measurements (pure functions: nothing is timed here), and one tiny quick run in a subprocess."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import report
from benchmarks.__main__ import parser

ROOT = Path(__file__).resolve().parents[1]


def _row(step_ms, first_ms=10.0, faults=0.0, peak=None):
    return {"step": step_ms / 1e3, "first": first_ms / 1e3, "faults": faults, "peak": peak}


def fake_run():
    """Measurements with known ratios: GPT fast 0.75x torch, plain 1.25x; tiny fast 0.5x NumPy..."""
    return {"results": {
        "gpt": {"tracegrad numpy": _row(100, 300, 9000, 2**20), "tracegrad fast": _row(60, 400, 100, 2**20),
                "torch": _row(80), "torch.compile": _row(70),
                "tracegrad fast 2 threads": _row(30, 500, 120, 2**20)},
        "tiny": {"tracegrad numpy": _row(0.12), "tracegrad fast": _row(0.05), "numpy": _row(0.1),
                 "torch": _row(0.5)},
        "mlp": {"tracegrad numpy": _row(40, 40), "tracegrad fast": _row(36, 60), "numpy": _row(40),
                "torch": _row(35)},
    }, "cold": {"gpt": 3.0}}


def test_help_explains_the_command_without_issue_numbers():
    text = parser().format_help()
    for word in ("--quick", "--plot", "--only", "--skip", "own process", "target"):
        assert word in text
    assert "issue" not in text.lower()


def test_plan_rows_for_fast_only_with_numba():
    without = report.plan(False, {"torch"})
    assert [c.label for c in without["tiny"]] == ["tracegrad numpy", "numpy", "torch", "torch.compile"]
    assert all("fast" not in c.label for rows in without.values() for c in rows)
    with_numba = report.plan(True, {"numba", "torch"}, only=["gpt"], skip=["torch"])
    assert [c.label for c in with_numba["gpt"]] == ["tracegrad numpy", "tracegrad fast", "tracegrad fast 2 threads"]
    assert with_numba["gpt"][-1].threads == 2 and with_numba["gpt"][1].env == report.FAST
    assert with_numba["gpt"][0].env == {"TRACEGRAD_KERNELS": "numpy"}
    assert "torch.compile" not in [c.label for c in report.plan(True, {"torch"})["mlp"]]  # quick: no compile
    assert [c.label for c in report.plan(False, set(), only=["mnist"])["mnist"]] == ["tracegrad numpy"]


def test_table_explains_each_column_and_gives_ratios():
    text = report.render_table(fake_run()["results"])
    for name, _ in report.COLUMNS:
        assert f"- {name}: " in text
    rows = {line.split(" | ")[1]: line for line in text.splitlines() if line.startswith("| GPT")}
    assert rows["tracegrad fast"].split(" | ")[2:5] == ["60.000", "-", "0.75"]
    assert rows["tracegrad numpy"].split(" | ")[5:8] == ["300.000", "9000", "1.00 |"]
    tiny = next(line for line in text.splitlines() if "tiny" in line and "tracegrad fast" in line)
    assert tiny.split(" | ")[3:5] == ["0.50", "0.10"]


def test_targets_pass_miss_and_skip():
    got = {t: (m, v) for t, m, v in report.targets(fake_run(), {"numba", "torch"})}
    assert got["GPT <= 0.8x torch eager (fast)"] == ("0.75x", "pass")
    assert got["GPT <= 1.0x torch eager (plain NumPy)"] == ("1.25x", "miss")
    assert got["GPT below torch.compile (tracegrad fast)"] == ("0.86x", "pass")
    assert got["GPT below JAX jit (tracegrad fast)"] == ("-", "skipped (jax not installed)")
    assert got["tiny MLP <= 0.6x hand NumPy (fast)"] == ("0.50x", "pass")
    assert got["tiny MLP >= 4x faster than torch eager: <= 0.25x (fast)"] == ("0.10x", "pass")
    assert got["tiny MLP <= 1.3x hand NumPy (plain NumPy)"] == ("1.20x", "pass")
    assert got["MLP <= 1.0x torch eager (tracegrad fast)"] == ("1.03x", "miss")
    assert got["mnist CNN <= 1.0x torch eager (tracegrad fast)"] == ("-", "skipped (mnist not run)")
    assert got["GPT on 2 threads >= 1.5x faster than 1 (tracegrad fast)"] == ("2.00x", "pass")
    assert got["first call MLP <= 50 ms, warm kernel cache (tracegrad fast)"] == ("60 ms", "miss")
    assert got["first call GPT <= 500 ms, warm kernel cache (tracegrad fast)"] == (
        "400 ms (cold compile 3000 ms)", "pass")
    assert got["minor page faults per GPT step <= 500 (tracegrad numpy)"] == ("9000", "miss")
    assert got["minor page faults per GPT step <= 500 (tracegrad fast)"] == ("100", "pass")
    table = report.render_targets(report.targets(fake_run(), {"numba", "torch"}))
    assert "| GPT <= 0.8x torch eager (fast) | 0.75x | pass |" in table


def test_a_failed_row_is_named():
    run = fake_run()
    del run["results"]["mlp"]["tracegrad fast"]
    run["failed"] = {"mlp": ["tracegrad fast"]}
    got = {t: v for t, m, v in report.targets(run, {"numba", "torch"})}
    assert got["MLP <= 1.0x torch eager (tracegrad fast)"] == (
        "skipped (tracegrad fast failed: its error is above the table)")


def test_targets_without_numba_use_the_plain_path():
    run = fake_run()
    for rows in run["results"].values():
        rows.pop("tracegrad fast")
    run["quick"] = True
    del run["results"]["gpt"]["torch.compile"]
    got = {t: (m, v) for t, m, v in report.targets(run, {"torch", "jax"})}
    assert got["GPT <= 0.8x torch eager (fast)"][1] == "skipped (numba not installed)"
    assert got["GPT below torch.compile (tracegrad numpy)"][1] == "skipped (torch.compile not in --quick)"
    assert got["GPT below JAX jit (tracegrad numpy)"][1] == "skipped (jax not measured)"
    assert got["GPT on 2 threads >= 1.5x faster than 1 (tracegrad numpy)"][1] == (
        "skipped (tracegrad numpy 2 threads not measured)")
    assert got["MLP <= 1.0x hand NumPy (tracegrad numpy)"] == ("1.00x", "pass")


def test_quick_run_of_the_tiny_mlp(tmp_path):
    out = tmp_path / "run.json"
    cmd = [sys.executable, "-m", "benchmarks", "--quick", "--only", "tiny", "--rounds", "2", "--skip", "torch",
           "--skip", "tracegrad fast", "--skip", "jax", "--json", str(out)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    if proc.returncode:
        pytest.fail(proc.stderr[-3000:])
    rows = json.loads(out.read_text())["results"]["tiny"]
    assert set(rows) == {"tracegrad numpy", "numpy"}
    assert rows["tracegrad numpy"]["peak"] > 0 and rows["numpy"]["peak"] is None
    assert "| tiny MLP 64-64-64-10 b32 | tracegrad numpy |" in proc.stdout
    assert "| tiny MLP <= 1.3x hand NumPy (plain NumPy) |" in proc.stdout
