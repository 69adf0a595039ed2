"""VJP rules of the create family."""
from .registry import register_vjp  # noqa: F401
