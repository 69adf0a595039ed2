"""The example scripts run end to end (in their --fast mode) and print what their docs promise."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ("train_digits.py", "train_gpt.py", "inspect_ir.py")


def run_example(script: str, *args: str) -> str:
    """Run examples/<script> as a user would (python examples/x.py, from the repository root)."""
    # the project is normally pip-installed; PYTHONPATH makes a bare checkout work too
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run([sys.executable, str(Path("examples") / script), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"{script} {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def numbers(pattern: str, text: str) -> list[tuple[float, ...]]:
    """Every match of `pattern` in text, its groups as floats (thousands separators dropped)."""
    return [tuple(float(g.replace(",", "")) for g in m) if isinstance(m, tuple) else (float(m.replace(",", "")),)
            for m in re.findall(pattern, text)]


@pytest.mark.parametrize("script", EXAMPLES)
def test_help(script):
    out = run_example(script, "--help")
    assert out.startswith("usage:")
    if script != "inspect_ir.py":
        assert "--fast" in out and "--seed" in out


@pytest.mark.parametrize("model", ["mlp", "cnn"])
def test_train_digits_fast(model):
    out = run_example("train_digits.py", "--fast", "--model", model)
    assert f"model {model}" in out
    epochs = numbers(r"epoch +\d+ +train loss ([\d.]+) +test accuracy ([\d.]+)% +([\d.]+) steps/s", out)
    assert len(epochs) == 2, out
    assert epochs[1][0] < epochs[0][0], f"the training loss did not go down:\n{out}"
    (final,) = numbers(r"final test accuracy ([\d.]+)% +wall time [\d.]+ s", out)
    assert final[0] == epochs[-1][1]
    assert final[0] > 20.0, f"no better than twice chance (10 classes):\n{out}"


@pytest.mark.parametrize("checkpoint", [False, True])
def test_train_gpt_fast(checkpoint):
    out = run_example("train_gpt.py", "--fast", *(["--checkpoint"] if checkpoint else []))
    assert ("every block checkpointed" if checkpoint else "no checkpointing") in out
    assert len(numbers(r"step +\d+ +train loss ([\d.]+) +held-out token accuracy ([\d.]+)%", out)) == 10, out
    assert len(re.findall(r"^  [\d ]+ +-> +[\d ]+ +(?:ok|WRONG)$", out, re.M)) == 5, out  # solved examples
    assert re.search(r"final held-out token accuracy [\d.]+% +greedy sequences fully sorted [\d.]+%", out), out
    ((without, with_),) = numbers(r"peak bytes of one training step: ([\d,]+) without checkpointing, ([\d,]+) with", out)
    assert 0 < with_ < without, f"checkpointing two blocks saved no memory:\n{out}"
    ((ops_without, ops_with),) = numbers(r"ops run: (\d+) without, (\d+) with", out)
    assert ops_with > ops_without  # the recomputation
    ((loss_diff, grad_diff),) = numbers(r"loss difference ([\d.e+-]+), largest gradient difference ([\d.e+-]+)", out)
    assert loss_diff < 1e-5 and grad_diff < 1e-5, out


def test_inspect_ir():
    out = run_example("inspect_ir.py", "--raw")
    assert out.count("def main_adjoint(") == 4  # two examples, each before and after clean-up
    assert out.count("structurally equal to mod: True") == 2
    assert "R.sum(lv, axis=None, keepdims=False)" in out  # the seed example, main(x, y) = sum(add(x, y))
    assert "value 72.0, both gradients all ones: True" in out
    assert "R.nn.nll_loss(" in out and "R.grad.nll_loss_backward(" in out
