"""Packaging: a foreign package named like one of tracegrad's four top-level packages fails loudly at import
(ir/siblings.py), and the LICENSE matches pyproject's license metadata. Each clash runs in a subprocess with the
foreign package in a temporary folder first on sys.path, as a folder `nn/` beside a user's script would be."""
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ir.siblings import MARKER, PACKAGES

ROOT = Path(__file__).resolve().parents[1]


def _import_in_subprocess(tmp_path: Path, statement: str) -> subprocess.CompletedProcess:
    code = f"import sys; sys.path[:0] = [{str(tmp_path)!r}, {str(ROOT)!r}]; {statement}"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path)


def _foreign(tmp_path: Path, name: str) -> Path:
    pkg = tmp_path / name
    pkg.mkdir()
    (pkg / "__init__.py").write_text('"""Someone else\'s package."""\nVALUE = 42\n')
    return pkg


@pytest.mark.parametrize("first", ["tracer", "ir", "autodiff"])
def test_a_foreign_nn_first_on_the_path_is_named_with_the_fix(tmp_path, first):
    pkg = _foreign(tmp_path, "nn")
    done = _import_in_subprocess(tmp_path, f"import {first}")
    assert done.returncode != 0
    err = done.stderr
    assert err.splitlines()[-1].startswith("ir.siblings.PackageClashError: "), err
    assert f"the top-level package `nn` found at {pkg / '__init__.py'} is not tracegrad's" in err, err
    assert "pip install --force-reinstall tracegrad" in err and "pip uninstall" in err


def test_a_foreign_ir_written_over_tracegrads_is_named(tmp_path):
    """pip writing another `ir` over tracegrad's replaces ir/__init__.py and leaves tracegrad's other files."""
    shutil.copytree(ROOT / "ir", tmp_path / "ir", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "ir" / "__init__.py").write_text('"""Someone else\'s ir."""\nVALUE = 42\n')
    for name in ("tracer", "nn"):
        done = _import_in_subprocess(tmp_path, f"import {name}")
        assert done.returncode != 0
        assert "PackageClashError" in done.stderr and "the top-level package `ir` found at" in done.stderr, done.stderr


@pytest.mark.parametrize("name", ["tracer", "autodiff", "nn"])
def test_a_foreign_ir_first_on_the_path_is_named_with_the_fix(tmp_path, name):
    """A folder `ir/` of another project beside the script: it has no ir.siblings to do the check."""
    pkg = _foreign(tmp_path, "ir")
    done = _import_in_subprocess(tmp_path, f"import {name}")
    assert done.returncode != 0
    last = done.stderr.splitlines()[-1]
    assert last.startswith("ImportError: the top-level package `ir` found at "), done.stderr
    assert str(pkg / "__init__.py") in last and "pip install --force-reinstall tracegrad" in last


def test_the_clash_is_an_import_error_and_tracegrads_own_packages_pass(tmp_path):
    _foreign(tmp_path, "autodiff")
    done = _import_in_subprocess(tmp_path, "exec('try: import tracer\\nexcept ImportError as e: "
                                           "print(type(e).__name__, e.name)')")
    assert done.stdout.split() == ["PackageClashError", "autodiff"], (done.stdout, done.stderr)
    clean = _import_in_subprocess(tmp_path / "..", "import nn, tracer, ir, autodiff; print(nn.Linear)")
    assert clean.returncode == 0, clean.stderr


def test_every_package_carries_the_marker_first():
    for name in PACKAGES:
        head = (ROOT / name / "__init__.py").read_text().splitlines()
        assert MARKER in head[1], (name, head[:3])  # the line after the docstring, before any import


def test_the_license_file_matches_the_metadata():
    pyproject = (ROOT / "pyproject.toml").read_text()
    license_id = re.search(r'^license = \{ text = "([^"]+)" \}', pyproject, re.M).group(1)
    text = (ROOT / "LICENSE").read_text()
    assert license_id == "Apache-2.0"
    assert text.startswith("Copyright 2026 The tracegrad authors\n")
    body = text[text.index("                                 Apache License"):]
    assert body.count("\n") == 201 and "Version 2.0, January 2004" in body  # the standard text, all 202 lines
    assert "END OF TERMS AND CONDITIONS" in body and body.rstrip().endswith("limitations under the License.")
    assert re.search(r"^## Licen[cs]e", (ROOT / "README.md").read_text(), re.M)


def test_the_readme_names_the_four_packages_and_the_clash():
    text = (ROOT / "README.md").read_text()
    install = text[text.index("## Set-up"):text.index("## What it looks like")]
    assert all(f"`{name}`" in install for name in PACKAGES)
    assert "PackageClashError" in install and "--force-reinstall" in install
