"""Benchmarks (run them as scripts); a package so tests can import the models they measure."""
