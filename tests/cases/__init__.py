"""Tables of op cases; every table drives forward, round-trip and gradient tests.

One file per op family (`tests/cases/<family>.py`) defines `CASES: list[OpCase]`.
"""
from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np


@dataclass
class OpCase:
    """`fn(*tensors)` written with tracer functions, `ref(*arrays)` the same in NumPy.

    `inputs` are NumPy arrays (made with `rand` for reproducibility). `grad=True` checks the
    gradient of every floating input against float64 finite differences through trace ->
    Gradient -> execute (set False for non-differentiable ops). `ops` names the IR ops the case
    exercises, so the registry test can see every op is covered.
    """

    name: str
    fn: Callable
    ref: Callable
    inputs: list
    ops: tuple[str, ...]
    grad: bool = True
    rtol: float = 1e-5
    atol: float = 1e-6
    kwargs: dict = field(default_factory=dict)


def rand(*shape, dtype="float32", low=-1.0, high=1.0, seed=0):
    rng = np.random.default_rng(seed + 7919 * len(shape) + sum(shape))
    if np.dtype(dtype).kind in "iu":
        return rng.integers(int(low), int(high), size=shape).astype(dtype)
    if dtype == "bool":
        return rng.random(shape) < 0.5
    return rng.uniform(low, high, size=shape).astype(dtype)


def all_cases() -> list[OpCase]:
    cases = []
    for mod in pkgutil.iter_modules(__path__):
        cases.extend(importlib.import_module(f"{__name__}.{mod.name}").CASES)
    return cases
