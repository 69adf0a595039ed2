"""The README's code runs as written (the second block with the bundled digits as its data)."""
import re
from pathlib import Path

import nn

BLOCKS = re.findall(r"```python\n(.*?)```", (Path(__file__).resolve().parents[1] / "README.md").read_text(), re.S)


def test_first_example_runs(capsys):
    scope = {}
    exec(BLOCKS[0], scope)
    assert "R.dataflow()" in capsys.readouterr().out
    assert scope["gw"].shape == (3, 2) and scope["value"].shape == ()


def test_training_loop_runs(capsys):
    (x, y), _ = nn.data.load_digits()
    scope = {"images": x.reshape(len(x), -1), "labels": y}
    exec(BLOCKS[1], scope)
    out = capsys.readouterr().out
    assert "def main_adjoint" in out
    assert sum(map(len, scope["step"].cache.values())) == 1  # one trace for the whole epoch
