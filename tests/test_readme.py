"""Every ```python block of the README and of docs/*.md runs as written (the blocks of one file in order,
sharing one namespace, as a reader pasting them would)."""
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FILES = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))


def python_blocks(path: Path) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", path.read_text(), re.S | re.M)


@pytest.mark.parametrize("path", [p for p in FILES if python_blocks(p)], ids=lambda p: p.name)
def test_every_python_block_runs(path, capsys):
    scope: dict = {"__name__": f"{path.stem}_blocks"}
    for i, block in enumerate(python_blocks(path)):
        try:
            exec(compile(block, f"{path.name} block {i + 1}", "exec"), scope)
        except Exception as e:
            raise AssertionError(f"{path.name}: python block {i + 1} failed: {type(e).__name__}: {e}") from e
    capsys.readouterr()


def test_the_readme_blocks_do_what_they_say(capsys):
    blocks = python_blocks(ROOT / "README.md")
    first, second = {}, {}
    exec(blocks[0], first)
    assert "R.dataflow()" in capsys.readouterr().out
    assert first["gw"].shape == (3, 2) and first["value"].shape == ()
    exec(blocks[1], second)  # loads the digits itself: nothing is passed in
    out = capsys.readouterr().out
    assert "def main_adjoint" in out
    assert sum(map(len, second["step"].cache.values())) == 1  # one trace for the whole epoch
    assert float(second["loss"]) < 2.2  # below log(10): it learned during the one epoch


def test_the_readme_test_commands_stay_light_and_name_the_torch_extra():
    text = (ROOT / "README.md").read_text()
    assert 'pip install -e ".[test]" && python -m pytest' in text
    assert 'pip install -e ".[test,torch,mpi]" && python -m pytest' in text
    ci = (ROOT / ".ci" / "run").read_text()
    assert '".[test,torch,mpi]"' in ci  # CI runs the comparisons and the mpiexec tests every time
    # skips are summarized with their reasons, failures and errors still listed
    assert re.search(r'addopts = ".*-rfEs\b', (ROOT / "pyproject.toml").read_text())


def test_python_blocks_are_found():
    assert python_blocks(ROOT / "README.md")[0].startswith("import numpy as np")
    assert len(python_blocks(ROOT / "README.md")) == 2
