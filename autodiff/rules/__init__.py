"""VJP rules, one file per op family (the same families as ir/ops)."""
from . import conv, create, elementwise, linalg, manipulate, markers, nn, reduction, scan, update  # noqa: F401
from .registry import VJPS, register_vjp

__all__ = ["VJPS", "register_vjp"]
