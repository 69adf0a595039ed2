"""Doctest collection over the packages (pyproject's testpaths): modules that exist only for an optional
extra are left out when the extra is not installed (tests/ holds their tests, which skip cleanly)."""
import importlib.util

collect_ignore = []
if importlib.util.find_spec("numba") is None:  # the `fast` extra
    collect_ignore.append("ir/runtime/numba_math.py")
