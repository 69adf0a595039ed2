"""tracegrad's four top-level packages check each other at import: a foreign package of the same name fails loudly.

tracegrad installs `ir`, `tracer`, `autodiff` and `nn` as top-level packages (the layering `ir <- tracer <-
autodiff <- nn` is the layout). Unrelated projects on PyPI use some of these names: installing one overwrites
tracegrad's `__init__.py` of that name, and one earlier on sys.path (a folder `nn/` beside a script) shadows
it. Either way tracegrad would import someone else's code in its place and fail somewhere far away, so each
package's `__init__` first sets `__tracegrad__ = True` and then calls `check_siblings`, which finds every
other sibling (without importing it: `importlib.util.find_spec`, then a read of its `__init__.py` for the
marker line) and raises `PackageClashError`, an ImportError naming the package, where it was found and the
fix. It costs a few file reads per import of the first package.
"""
from __future__ import annotations

import importlib.util
import sys

PACKAGES = ("ir", "tracer", "autodiff", "nn")
MARKER = "__tracegrad__ = True"


class PackageClashError(ImportError):
    """A top-level package of tracegrad's (ir, tracer, autodiff, nn) is another project's package."""


def clash_message(importer: str, name: str, where) -> str:
    """The error text: which package is foreign, where it was found, and how to repair the install."""
    return (f"{importer}: the top-level package `{name}` found at {where} is not tracegrad's: another project "
            f"of the same name shadows it or has overwritten tracegrad's files (tracegrad installs the top-level "
            f"packages {', '.join(PACKAGES)}; unrelated projects on PyPI use some of these names). Fix: remove "
            f"the other one (pip uninstall it, or take its folder off sys.path / out of the script's directory), "
            f"then `pip install --force-reinstall tracegrad` (or use a virtual environment of its own)")


def foreign_location(name: str) -> str | None:
    """Where the package `name` that Python would import is, if it is not tracegrad's; None when it is
    tracegrad's or absent (a partial install is not a clash)."""
    module = sys.modules.get(name)
    if module is not None:
        return None if getattr(module, "__tracegrad__", False) else str(getattr(module, "__file__", module))
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):  # sys.modules[name] is None (import refused), or no spec at all
        return None
    if spec is None:
        return None
    origin = spec.origin
    if not spec.submodule_search_locations or not origin or not origin.endswith(("__init__.py", "__init__.pyc")):
        return str(origin or list(spec.submodule_search_locations or ()))  # a module, or a namespace package
    return None if _has_marker(spec.loader, origin) else origin


def _has_marker(loader, origin: str) -> bool:
    """Whether the `__init__` at `origin` is tracegrad's, read through its loader, so a zip on sys.path (a
    zipapp) and a sourceless install (`__init__.pyc` only, which keeps the name `__tracegrad__` among its
    constants) are recognised as well as a plain `__init__.py`."""
    try:
        data = loader.get_data(origin) if hasattr(loader, "get_data") else open(origin, "rb").read()  # noqa: SIM115
    except OSError:
        return False
    if origin.endswith(".py"):
        return MARKER.encode() in data[:4096]  # among the first lines of each of tracegrad's __init__.py
    return b"__tracegrad__" in data  # a compiled __init__: the marker's name is one of its code's constants


def check_siblings(importer: str) -> None:
    """Raise PackageClashError when a sibling of `importer` (one of PACKAGES) is another project's package."""
    for name in PACKAGES:
        if name != importer:
            where = foreign_location(name)
            if where is not None:
                raise PackageClashError(clash_message(importer, name, where), name=name)


# Imported first by each package's __init__: the `ir` it was imported from must be tracegrad's too (a foreign
# `ir` written over tracegrad's __init__.py leaves this file in place, so the import reaches here).
if not getattr(sys.modules.get(__package__), "__tracegrad__", False):
    raise PackageClashError(clash_message("tracegrad", __package__, getattr(sys.modules.get(__package__),
                                                                           "__file__", "?")), name=__package__)

__all__ = ["MARKER", "PACKAGES", "PackageClashError", "check_siblings", "clash_message", "foreign_location"]
