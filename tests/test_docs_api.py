"""docs/api.md is generated from the docstrings (docs/gen_api.py): every public name has a docstring and
a section there."""
import importlib
import inspect
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "docs"))
import gen_api  # noqa: E402

PUBLIC = [(m, n) for m in gen_api.MODULES for n in gen_api.public_names(importlib.import_module(m))]


@pytest.mark.parametrize("module, name", PUBLIC, ids=[f"{m}.{n}" for m, n in PUBLIC])
def test_every_public_name_has_a_docstring(module, name):
    assert gen_api.docstring(getattr(importlib.import_module(module), name)), f"{module}.{name} has no docstring"


def test_every_public_method_of_the_nn_classes_has_a_docstring():
    import nn
    missing = [f"{cls}.{m}" for cls in nn.__all__ if inspect.isclass(getattr(nn, cls))
               for m, member in gen_api.members(getattr(nn, cls))
               if not gen_api.docstring(member) and not inspect.getdoc(getattr(getattr(nn, cls), m))]
    assert not missing, missing


def test_api_md_has_a_section_for_every_public_name():
    text = (ROOT / "docs" / "api.md").read_text()
    missing = [f"{m}.{n}" for m, n in PUBLIC if f"`{m}.{n}(" not in text and f"`{m}.{n}`" not in text]
    assert not missing, f"run python docs/gen_api.py; missing from docs/api.md: {missing}"


def test_the_generator_renders_doctests_as_pycon_and_strips_quoted_annotations():
    def f(x: "int | None" = None, dtype: str = "float32") -> "str":
        """One line.

        >>> 1 + 1
        2
        """
    assert gen_api.signature(f) == "(x: int | None = None, dtype: str = 'float32') -> str"
    assert gen_api.markdown(gen_api.docstring(f)) == "One line.\n\n```pycon\n>>> 1 + 1\n2\n```"
    assert gen_api.docstring(lambda: 0) is None
