"""Project-wide promises: the package layering and lint (the op registry's completeness: test_case_table.py)."""
import ast
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# package -> the tracegrad packages it may import
ALLOWED = {"ir": set(), "tracer": {"ir"}, "autodiff": {"ir", "tracer"}, "nn": {"ir", "tracer", "autodiff"}}


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found & set(ALLOWED)


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_layering(package):
    for path in (ROOT / package).rglob("*.py"):
        bad = _imports(path) - ALLOWED[package] - {package}
        assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}: layering is ir <- tracer <- autodiff <- nn"


def test_vjp_rules_import_only_ir():
    for path in (ROOT / "autodiff" / "rules").rglob("*.py"):
        assert _imports(path) <= {"ir"}, f"{path.relative_to(ROOT)}: rules import only ir"
    assert _imports(ROOT / "autodiff" / "gradient.py") <= {"ir"}


def test_layering_check_can_fail(tmp_path):
    bad = tmp_path / "x.py"
    bad.write_text("import nn\nfrom autodiff import grad\n")
    assert _imports(bad) == {"nn", "autodiff"}


@pytest.mark.skipif(importlib.util.find_spec("ruff") is None, reason="ruff not installed for this Python")
def test_ruff_clean():  # the skip asks for the module that `python -m ruff` runs, not a `ruff` on PATH
    result = subprocess.run([sys.executable, "-m", "ruff", "check", str(ROOT)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
