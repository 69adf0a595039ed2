"""VJP rules of the elementwise family."""
from .registry import register_vjp  # noqa: F401
