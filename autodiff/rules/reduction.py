"""VJP rules of the reduction family."""
from .registry import register_vjp  # noqa: F401
