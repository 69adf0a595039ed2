"""Write docs/api.md, the API reference, from the docstrings of every public name.

    python docs/gen_api.py            # rewrite docs/api.md
    python docs/gen_api.py --check    # exit 1 if docs/api.md is out of date

Public names are each package's `__all__`; a class lists its public methods and properties (those it
defines or overrides). tests/test_docs_api.py fails when a public name has no docstring or when api.md
differs from what this script writes.
"""
from __future__ import annotations

import importlib
import inspect
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "api.md"
MODULES = ["tracer", "ir", "autodiff", "nn", "nn.functional", "nn.init", "nn.optim", "nn.optim.lr_scheduler", "nn.data",
           "nn.distributed", "nn.utils"]


def public_names(module) -> list[str]:
    """The module's `__all__` in alphabetical order, submodules left out (each has its own section)."""
    return sorted((n for n in module.__all__ if not inspect.ismodule(getattr(module, n))), key=str.lower)


def members(cls) -> list[tuple[str, object]]:
    """Public methods and properties that `cls` itself defines, in source order."""
    return [(n, v) for n, v in vars(cls).items()
            if not n.startswith("_") and (inspect.isfunction(v) or isinstance(v, (property, classmethod,
                                                                                      staticmethod)))]


def signature(obj) -> str:
    target = obj.fget if isinstance(obj, property) else obj
    if isinstance(target, (classmethod, staticmethod)):
        target = target.__func__
    if isinstance(obj, property):
        return ""
    try:
        text = str(inspect.signature(target))
    except (TypeError, ValueError):
        return "(...)"
    # postponed annotations print quoted ('int | None'); a default string keeps its quotes (= 'float32');
    # a function default prints by name, not by its address (which changes every run)
    text = re.sub(r"<function ([\w.]+) at 0x[0-9a-f]+>", r"\1", text)
    return re.sub(r"(: |-> )'([^']*)'", r"\1\2", text)


def docstring(obj, owner=None, name: str = "") -> str | None:
    """obj's own docstring, or for a method the docstring of the method it overrides."""
    target = obj.fget if isinstance(obj, property) else obj
    if isinstance(target, (classmethod, staticmethod)):
        target = target.__func__
    doc = target.__doc__
    if not doc and owner is not None:
        doc = inspect.getdoc(getattr(owner, name, None))
    return inspect.cleandoc(doc) if doc else None


def markdown(doc: str) -> str:
    """Prose as it is; doctest examples (paragraphs starting with >>>) fenced as pycon."""
    out = []
    for para in doc.split("\n\n"):
        if para.lstrip().startswith(">>>"):
            out.append("```pycon\n" + para + "\n```")
        else:
            out.append(para)
    return "\n\n".join(out)


def render() -> str:
    lines = ["# API reference", "",
             "Generated from the docstrings by `python docs/gen_api.py`; do not edit by hand.", ""]
    for mod_name in MODULES:
        module = importlib.import_module(mod_name)
        lines += [f"## `{mod_name}`", ""]
        if module.__doc__:
            lines += [inspect.cleandoc(module.__doc__).split("\n\n")[0], ""]
        for name in public_names(module):
            obj = getattr(module, name)
            kind = "class " if inspect.isclass(obj) else ""
            sig = signature(obj) if callable(obj) and not inspect.isclass(obj) else ""
            if inspect.isclass(obj):
                sig = signature(obj.__init__).replace("(self, ", "(").replace("(self)", "()")
            lines += [f"### {kind}`{mod_name}.{name}{sig}`", ""]
            doc = docstring(obj)
            lines += [markdown(doc) if doc else "(no docstring)", ""]
            if inspect.isclass(obj):
                for m_name, member in members(obj):
                    m_doc = docstring(member, obj.__mro__[1], m_name) if len(obj.__mro__) > 1 else None
                    m_doc = docstring(member) or m_doc
                    if m_doc is None:
                        continue
                    m_sig = signature(member).replace("(self, ", "(").replace("(self)", "()")
                    lines += [f"- `{name}.{m_name}{m_sig}`: " + m_doc.split("\n\n")[0].replace("\n", " "), ""]
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        if not OUT.exists() or OUT.read_text() != text:
            print(f"{OUT} is out of date: run python docs/gen_api.py")
            return 1
        return 0
    OUT.write_text(text)
    print(f"wrote {OUT} ({len(text.splitlines())} lines)")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main(sys.argv[1:]))
