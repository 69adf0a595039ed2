"""VJP rules of the nn family."""
from .registry import register_vjp  # noqa: F401
