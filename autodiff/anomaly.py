"""The NaN and inf finder: `autodiff.detect_anomaly()`, as torch's `detect_anomaly` and JAX's `debug_nans`.

While it is on, every compiled step, `grad`/`value_and_grad` call, `loss.backward()`, `ir.Executor` run
and eager op checks each binding it runs, and the optimizers check the gradients they are given and the
parameters they update. The first binding of the forward or the adjoint that makes a NaN out of inputs
without NaN, or an inf out of finite inputs, raises `FloatingPointError` naming the op, the printed
binding, its inputs' ranges and the user's source line that made it; a NaN already in a step's inputs
raises naming the argument. The checks live in ir/runtime/anomaly.py; off, each call pays one flag test.
`TRACEGRAD_DEBUG_NANS=1` in the environment turns it on for the whole process.

torch's differs in two ways: it checks only the backward (each function's outputs, for NaN), raising
RuntimeError there; here the forward counts too, inf counts as well as NaN, and the error is
FloatingPointError, as NumPy's `np.errstate(all="raise")` and JAX's debug_nans raise.
"""
from __future__ import annotations

import functools

from ir.runtime import anomaly as _checks


class detect_anomaly:  # noqa: N801  (torch's spelling: a context manager that reads as a function)
    """Turn the NaN and inf finder on (or, with `mode=False`, off) inside a `with` block or a decorated
    function; nested blocks restore the setting they found.

    >>> import numpy as np, tracer, autodiff
    >>> with autodiff.detect_anomaly():
    ...     tracer.log(tracer.tensor(np.zeros(2, "float32")))
    Traceback (most recent call last):
    ...
    FloatingPointError: detect_anomaly: log (eager) produced -inf (2 of 2 values) from finite inputs
    ...
    >>> autodiff.is_anomaly_enabled()
    False
    """

    def __init__(self, mode: bool = True):
        if not isinstance(mode, bool):
            raise TypeError(f"detect_anomaly(mode): mode must be True or False, got {type(mode).__name__}")
        self.mode = mode
        self._saved: list[bool] = []

    def __enter__(self) -> detect_anomaly:
        self._saved.append(_checks.set_enabled(self.mode))
        return self

    def __exit__(self, *exc) -> None:
        _checks.set_enabled(self._saved.pop())

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with detect_anomaly(self.mode):
                return fn(*args, **kwargs)
        return wrapper


class set_detect_anomaly(detect_anomaly):  # noqa: N801  (torch's spelling)
    """Turn the finder on or off from here on, as torch's `torch.autograd.set_detect_anomaly(mode)`; used
    as a context manager, the setting it found comes back at the block's end.

    >>> import autodiff
    >>> _ = autodiff.set_detect_anomaly(True); autodiff.is_anomaly_enabled()
    True
    >>> _ = autodiff.set_detect_anomaly(False)
    """

    def __init__(self, mode: bool):
        super().__init__(mode)
        self._saved.append(_checks.set_enabled(mode))

    def __enter__(self) -> set_detect_anomaly:
        return self


def is_anomaly_enabled() -> bool:
    """Whether the NaN and inf finder is on (torch's `torch.is_anomaly_enabled()`)."""
    return _checks.enabled


def check_optimizer(opt, arrays, when: str) -> None:
    """An optimizer's gradients (`when="gradient"`, before its update) or parameters (`"parameter"`, after
    it): raise naming the first parameter whose array holds NaN or inf. Called only when the finder is on."""
    names = opt.names if opt.names is not None else [p._name or "" for p in opt.params]
    labels = [f"parameter {i}" + (f" ({n})" if n else "") for i, n in enumerate(names)]
    who = f"{type(opt).__name__}.step:" + (" the gradient of" if when == "gradient" else " after the update,")
    _checks.check_values(who, zip(labels, arrays, strict=True))
