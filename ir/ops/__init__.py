"""Op families; importing this package registers every op."""
from . import conv, create, elementwise, fused, linalg, manipulate, markers, nn, random, reduction, scan, update  # noqa: F401
from .registry import OPS, REQUIRED, Attr, Op, declare, get_op, make_call

__all__ = ["OPS", "REQUIRED", "Attr", "Op", "declare", "get_op", "make_call"]
