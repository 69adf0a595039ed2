"""Passes over IR modules: `pass(mod) -> mod`."""
