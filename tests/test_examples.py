"""The example scripts run end to end (in their --fast mode, from the repository root, without installing) and
print what their docs promise, flushed as they go."""
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ("train_digits", "train_gpt", "inspect_ir")


def example_env() -> dict:
    """The environment of a user in a bare checkout: no PYTHONPATH pointing at it, no PYTHONUNBUFFERED."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONUNBUFFERED")}


def run_example(name: str, *args: str) -> tuple[str, str]:
    """Run `python -m examples.<name> args` from the repository root, as examples/README.md says; its
    stdout and stderr (both redirected to pipes, so nothing is line-buffered for a terminal)."""
    proc = subprocess.run([sys.executable, "-m", f"examples.{name}", *args], cwd=ROOT, env=example_env(),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"{name} {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout, proc.stderr


def numbers(pattern: str, text: str) -> list[tuple[float, ...]]:
    """Every match of `pattern` in text, its groups as floats (thousands separators dropped)."""
    return [tuple(float(g.replace(",", "")) for g in m) if isinstance(m, tuple) else (float(m.replace(",", "")),)
            for m in re.findall(pattern, text)]


def progress_counts(desc: str, err: str) -> list[tuple[int, int]]:
    """(done, total) of every progress report `nn.data.progress(desc=desc)` wrote: its plain line
    (``train: 3/20 (15%) 1.0s 3.0it/s``) or tqdm's bar (``train:  15%|##   | 3/20 [...]``)."""
    return [(int(a), int(b)) for a, b in re.findall(rf"{desc}:[^\n\r]*?\b(\d+)/(\d+)\b", err)]


@pytest.mark.parametrize("name", EXAMPLES)
def test_help(name):
    out, _ = run_example(name, "--help")
    assert out.startswith("usage:")
    if name != "inspect_ir":
        assert "--fast" in out and "--seed" in out
    if name == "train_gpt":
        assert "--full" in out


@pytest.mark.parametrize("model", ["mlp", "cnn"])
def test_train_digits_fast(model):
    out, err = run_example("train_digits", "--fast", "--model", model)
    assert f"model {model}" in out
    epochs = numbers(r"epoch +\d+ +train loss ([\d.]+) +test accuracy ([\d.]+)% +([\d.]+) steps/s", out)
    assert len(epochs) == 2, out
    assert epochs[1][0] < epochs[0][0], f"the training loss did not go down:\n{out}"
    (final,) = numbers(r"final test accuracy ([\d.]+)% +wall time [\d.]+ s", out)
    assert final[0] == epochs[-1][1]
    assert final[0] > 20.0, f"no better than twice chance (10 classes):\n{out}"
    assert progress_counts("epochs", err)[-1] == (2, 2), err


@pytest.mark.parametrize("checkpoint", [False, True])
def test_train_gpt_fast(checkpoint):
    out, err = run_example("train_gpt", "--fast", "--steps", "10", *(["--checkpoint"] if checkpoint else []))
    assert ("every block checkpointed" if checkpoint else "no checkpointing") in out
    assert "10 steps of 64 sequences" in out
    assert len(numbers(r"step +\d+ +train loss ([\d.]+) +held-out token accuracy ([\d.]+)%", out)) == 10, out
    assert progress_counts("train", err)[-1] == (10, 10), err
    assert len(re.findall(r"^  [\d ]+ +-> +[\d ]+ +(?:ok|WRONG)$", out, re.M)) == 5, out  # solved examples
    assert re.search(r"final held-out token accuracy [\d.]+% +greedy sequences fully sorted [\d.]+%", out), out
    ((without, with_),) = numbers(r"peak bytes of one training step: ([\d,]+) without checkpointing, ([\d,]+) with", out)
    assert 0 < with_ < without, f"checkpointing two blocks saved no memory:\n{out}"
    ((ops_without, ops_with),) = numbers(r"ops run: (\d+) without, (\d+) with", out)
    assert ops_with > ops_without  # the recomputation
    ((loss_diff, grad_diff),) = numbers(r"loss difference ([\d.e+-]+), largest gradient difference ([\d.e+-]+)", out)
    assert loss_diff < 1e-5 and grad_diff < 1e-5, out


def test_train_gpt_prints_as_it_goes_into_a_file(tmp_path):
    """stdout and stderr redirected to files: while it trains, its first line and a progress report are
    there already, and killing it keeps them (block-buffered output would have died with the process)."""
    out_path, err_path = tmp_path / "out.txt", tmp_path / "err.txt"
    with open(out_path, "w") as out, open(err_path, "w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "examples.train_gpt", "--fast", "--steps", "100000"],
                                cwd=ROOT, env=example_env(), stdout=out, stderr=err)
        try:
            deadline = time.monotonic() + 120
            while proc.poll() is None and time.monotonic() < deadline and not (
                    "gpt: sort" in out_path.read_text() and progress_counts("train", err_path.read_text())):
                time.sleep(0.1)
            running = proc.poll() is None
        finally:
            proc.kill()
            proc.wait()
    text, log = out_path.read_text(), err_path.read_text()
    assert running, f"it stopped (or the 120 s ran out) before printing:\n{text}\n{log}"
    assert re.match(r"gpt: sort 8 digits, .* 100000 steps of 64 sequences", text), text
    done, total = progress_counts("train", log)[-1]
    assert total == 100000 and done < total, log


def test_train_gpt_presets():
    from examples import train_gpt
    default, full, fast = (train_gpt.parse_args(a) for a in ([], ["--full"], ["--fast"]))
    assert (default.steps, default.d_model, default.lr, default.held_out) == (250, 32, 1e-2, 500)
    assert (full.steps, full.d_model, full.heads, full.lr, full.held_out) == (600, 64, 4, 3e-3, 1000)
    assert (fast.steps, fast.d_model, fast.heads) == (20, 16, 2)
    assert train_gpt.parse_args(["--full", "--steps", "7"]).steps == 7  # an explicit value wins over the preset
    with pytest.raises(SystemExit):
        train_gpt.parse_args(["--fast", "--full"])


def test_inspect_ir():
    out, _ = run_example("inspect_ir", "--raw")
    assert out.count("def main_adjoint(") == 4  # two examples, each before and after clean-up
    assert out.count("structurally equal to mod: True") == 2
    assert "R.sum(lv, axis=None, keepdims=False)" in out  # the seed example, main(x, y) = sum(add(x, y))
    assert "value 72.0, both gradients all ones: True" in out
    assert "R.nn.nll_loss(" in out and "R.grad.nll_loss_backward(" in out
