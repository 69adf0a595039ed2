"""VJP rules of the manipulate family."""
from .registry import register_vjp  # noqa: F401
