"""Review findings on nn.save / nn.load, data.batches, the optimizers' signatures, and the examples' edge
cases."""
import importlib.util
import inspect
import itertools
import os
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

import nn
import tracer.rng
from nn import optim

ROOT = Path(__file__).resolve().parents[2]


def test_keys_ending_in_npy_load_their_own_values(tmp_path):
    path = tmp_path / "ckpt.npz"
    nn.save({"a.npy": np.ones(2), "a": np.zeros(2), "b": {"c.npy": np.full(1, 7.0)}}, path)
    state = nn.load(path)
    np.testing.assert_array_equal(state["a.npy"], np.ones(2))
    np.testing.assert_array_equal(state["a"], np.zeros(2))
    np.testing.assert_array_equal(state["b"]["c.npy"], [7.0])


@pytest.mark.parametrize("entries", [
    {"a": np.ones(1), "a/b": np.ones(1)},          # a leaf that is also a parent
    {"a/b": np.ones(1), "a": np.ones(1)},
    {"a//b": np.ones(1)},                           # an empty key part
    {"a": np.ones(1), "__tracegrad_format__": np.asarray([1, 2])},  # a marker that is not a number
])
def test_crafted_files_are_value_errors(tmp_path, entries):
    path = tmp_path / "bad.npz"
    entries = {"__tracegrad_format__": np.asarray(1), **entries}
    np.savez(path, **entries)
    with pytest.raises(ValueError, match="damaged or not a tracegrad file"):
        nn.load(path)


def test_save_refuses_what_it_cannot_store_by_name(tmp_path):
    with pytest.raises(TypeError, match="dict"):
        nn.save([np.ones(1)], tmp_path / "x.npz")
    with pytest.raises(TypeError, match="'big'.*int"):
        nn.save({"big": 2 ** 70}, tmp_path / "x.npz")  # no int64 holds it: numpy would make an object array
    assert not list(tmp_path.iterdir())


def test_batches_validates_when_called_and_takes_integral_floats():
    x = np.arange(10)
    with pytest.raises(ValueError, match="first dimension"):
        nn.data.batches((x, x[:4]), 2)  # no iteration needed to see the error
    with pytest.raises(ValueError, match="batch_size"):
        nn.data.batches(x, 0)
    assert [b[0].tolist() for b in nn.data.batches(x, 4.0, shuffle=False)] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]


def test_sgd_signature_is_design_md_s():
    names = list(inspect.signature(optim.SGD).parameters)
    assert names[:5] == ["params", "lr", "momentum", "weight_decay", "nesterov"]
    p = nn.Parameter(np.ones(2, "float32"))
    opt = optim.SGD([p], 0.1, 0.0, 0.5)  # positional, in DESIGN.md's order: weight_decay 0.5
    opt.step([np.zeros(2, "float32")])
    np.testing.assert_allclose(p.numpy(), [0.95, 0.95])
    assert optim.SGD([p], 0.1, momentum=0.9, dampening=0.1).dampening == 0.1  # torch's keyword still works


def _example(*args):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def test_train_digits_refuses_a_batch_larger_than_the_training_set():
    proc = _example("examples/train_digits.py", "--fast", "--batch-size", "600")
    assert proc.returncode != 0 and "--batch-size 600" in proc.stderr and "512" in proc.stderr, proc.stdout + proc.stderr
    assert "nan" not in proc.stdout


def test_train_gpt_rate_counts_the_steps_since_the_last_report(monkeypatch, capsys):
    spec = importlib.util.spec_from_file_location("train_gpt", ROOT / "examples" / "train_gpt.py")
    train_gpt = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(train_gpt)
    for module in (nn.init, tracer.rng):  # main() reseeds both; give the other tests their streams back
        monkeypatch.setattr(module, "_generator", module._generator)
    ticks = itertools.count()
    # a clock that advances one second per reading: each rate is then the steps since the last report
    monkeypatch.setattr(train_gpt, "time", types.SimpleNamespace(perf_counter=lambda: float(next(ticks))))
    train_gpt.main(["--fast", "--steps", "25"])  # reports every 2 steps, then once after the 25th alone
    rates = [float(line.split()[-2]) for line in capsys.readouterr().out.splitlines() if line.startswith("step")]
    assert rates == [2.0] * 12 + [1.0]
