"""VJP rules of the markers family."""
from .registry import register_vjp  # noqa: F401
