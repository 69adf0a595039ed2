"""VJP rules of the linalg family."""
from .registry import register_vjp  # noqa: F401
