"""Tracer functions (being written)."""
__all__ = []
OPERATORS = {}
METHODS = {}
