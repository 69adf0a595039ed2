"""benchmarks/gpu_check.py runs end to end on a CPU: the CUDA branches against the fake CuPy, the wiring on
NumPy, every part in the report, and a failing part recorded without stopping the others."""
import json
import sys

import pytest

from benchmarks import gpu_check
from tests import fake_cupy


def _parts(path):
    return json.loads(path.read_text())["parts"]


def test_every_part_runs_on_the_fake_cupy_and_lands_in_the_report(monkeypatch, tmp_path):
    fake_cupy.install(monkeypatch)  # the script's --fake-cupy, undone after the test
    out = tmp_path / "report.json"
    gpu_check.main(["--small", "--out", str(out)])
    parts = _parts(out)
    assert list(parts) == [name for name, _ in gpu_check.PARTS]
    assert all(p["status"] == "ok" for p in parts.values()), {k: p.get("traceback") for k, p in parts.items()}
    assert parts["environment"]["gpu"] == "fake GPU (NumPy)" and parts["environment"]["cupy"] == "0+fake"
    cases = parts["op_cases"]
    assert cases["forward"]["passed"] == cases["cases"] > 5 and not cases["failures"]
    assert cases["fused_gradient"]["passed"] == cases["gradient"]["passed"] > 0 and not cases["fused_kernels_failed"]
    assert cases["fused_kernels_built"] > 0  # the fused pass ran generated kernels (on the fake: as Python)
    assert parts["pytest"]["tests"] > 0 and parts["pytest"]["summary"]
    for name in ("digits_cnn", "sorting_gpt"):
        run = parts["training"][name]
        assert run["steps"] == 5 and run["match"] and run["params_stayed_on_device"], run
        assert len(run["device_losses"]) == 5 and run["max_abs_loss_diff"] < 1e-5
    memory = parts["checkpoint_memory"]["variants"]
    assert set(memory) == {"none", "every", "segments"}
    assert memory["every"]["executor_peak_bytes"] < memory["none"]["executor_peak_bytes"]
    assert all(v["pool_used_bytes_peak"] == 0 for v in memory.values())  # the fake's pool allocates nothing
    assert all(v["peak_bytes_same_as_cpu"] for v in memory.values())  # views share their base, as CuPy's
    speed = parts["step_speed"]["workloads"]
    assert len(speed) == 2 and all(row["tracegrad"]["step_ms"] > 0 and row["tracegrad fused"]["step_ms"] > 0
                                   for row in speed.values())
    assert sys.modules["cupy"] is not None and "finished" in json.loads(out.read_text())


def test_the_cpu_mode_checks_the_wiring_on_numpy(tmp_path):
    out = tmp_path / "cpu.json"
    gpu_check.main(["--device", "cpu", "--small", "--parts", "environment", "op_cases", "checkpoint_memory",
                    "--out", str(out)])
    parts = _parts(out)
    assert list(parts) == ["environment", "checkpoint_memory", "op_cases"]  # the order of PARTS
    assert parts["environment"]["device"] == "cpu" and "cupy" not in parts["environment"]
    assert parts["op_cases"]["forward"]["failed"] == 0
    assert all(v["peak_bytes_same_as_cpu"] for v in parts["checkpoint_memory"]["variants"].values())


def test_a_failing_part_is_recorded_and_the_report_is_written_after_each_part(monkeypatch, tmp_path):
    out = tmp_path / "partial.json"
    seen = {}

    def broken(ctx, deadline):
        raise ZeroDivisionError("a typo in a part")

    def reads_the_report(ctx, deadline):
        seen.update(_parts(out))  # the parts before this one are already on disk
        return {"rows": 1}
    monkeypatch.setitem(gpu_check.FUNCTIONS, "checkpoint_memory", broken)
    monkeypatch.setitem(gpu_check.FUNCTIONS, "op_cases", reads_the_report)
    gpu_check.main(["--device", "cpu", "--small", "--parts", "environment", "op_cases", "checkpoint_memory",
                    "--out", str(out)])
    parts = _parts(out)
    memory = parts["checkpoint_memory"]
    assert memory["status"] == "error" and "ZeroDivisionError: a typo" in memory["traceback"]
    assert set(seen) == {"environment", "checkpoint_memory"}  # on disk before op_cases ran, the error included
    assert parts["op_cases"] == {**parts["op_cases"], "status": "ok", "rows": 1}


def test_a_part_past_its_budget_stops_between_units(tmp_path):
    out = tmp_path / "budget.json"
    gpu_check.main(["--device", "cpu", "--small", "--parts", "op_cases", "--budget-scale", "0", "--out", str(out)])
    cases = _parts(out)["op_cases"]
    assert cases["truncated"] and cases["forward"]["passed"] + cases["forward"]["failed"] == 0


@pytest.mark.parametrize("argv, want", [([], "gpu_check.json"), (["x.json"], "x.json"), (["--out", "y.json"], "y.json")])
def test_the_report_path(argv, want):
    assert str(gpu_check.parse_args(argv).out) == want


def test_parts_after_the_runs_time_limit_are_skipped_and_say_so(tmp_path):
    out = tmp_path / "limit.json"
    gpu_check.main(["--device", "cpu", "--small", "--parts", "environment", "op_cases", "--time-limit", "0",
                    "--out", str(out)])
    parts = _parts(out)
    assert [p["status"] for p in parts.values()] == ["skipped", "skipped"] and "time-limit" in parts["op_cases"]["reason"]
