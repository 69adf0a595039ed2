"""VJP rules of the conv family."""
from .registry import register_vjp  # noqa: F401
