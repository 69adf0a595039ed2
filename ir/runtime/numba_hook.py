"""Where the NumPy executor takes numba kernels (the `fast` extra), and the switch that keeps NumPy's.

With numba installed and TRACEGRAD_KERNELS not "numpy", `fused` chains run as generated numba loops
(ir.runtime.numba_gen) and softmax, log_softmax, layer_norm and GELU bindings of float32 as numba kernels
(ir.runtime.numba_composite); ir.runtime.fused_cpu and ir.runtime.specialize call `fused_kernel`, `into` and
`specialize` here. Chains and ops the kernels do not cover, small arrays and CuPy keep the NumPy path.
numba itself is imported on the first kernel made, not with `ir`.

`TRACEGRAD_KERNELS=numpy` (read when `ir` is imported) forces the plain NumPy path.
"""
from __future__ import annotations

import importlib.util
import math
import os

import numpy as np

from ..ops.fused import Leaf, Node
from ..types import TensorType


def wanted() -> bool:
    """True when numba is installed and TRACEGRAD_KERNELS does not ask for the NumPy kernels."""
    if os.environ.get("TRACEGRAD_KERNELS", "").strip().lower() == "numpy":
        return False
    return importlib.util.find_spec("numba") is not None


ENABLED = wanted()


def ready() -> bool:
    """True when numba kernels may be used now (the fast extra installed and not switched off)."""
    return ENABLED


def _runner(expr, xs):
    from . import numba_gen

    if max(x.size for x in xs) < numba_gen.MIN_SIZE:
        return None
    return numba_gen.chain_runner(expr, numba_gen.signature(xs))


def fused_kernel(fallback):
    """The `fused` op's kernel: the chain's numba loop where there is one, else `fallback` (NumPy's)."""
    def kernel(xp, xs, expr):
        run = _runner(expr, xs) if xp is np and xs else None
        return fallback(xp, xs, expr) if run is None else run(xs)
    return kernel


def into(xs, expr, k):
    """The chain written into input k's buffer (it dies here) by its numba loop, or None for NumPy's path."""
    run = _runner(expr, xs) if xs else None
    if run is None:
        return None
    kw = run.keywords
    x = xs[k]
    fits = x.shape == kw["out_shape"] and x.dtype == kw["dtype"]
    return run(xs, out=x if fits else None)


def specialize(call):
    """A numba kernel of the arrays alone for a float32 softmax, log_softmax, layer_norm or GELU binding."""
    if call.op not in ("nn.gelu", "nn.softmax", "nn.log_softmax", "nn.layer_norm"):
        return None
    types = [a.type for a in call.args]
    out = call.type
    if not isinstance(out, TensorType) or not all(isinstance(t, TensorType) for t in types):
        return None
    from . import numba_gen

    if out.dtype != "float32" or math.prod(out.shape) < numba_gen.MIN_SIZE or not out.shape:
        return None
    if call.op == "nn.gelu":
        from .numba_gen import chain_runner

        expr = Node("nn.gelu", (Leaf(0),), dict(call.attrs)).text()
        run = chain_runner(expr, ((types[0].shape, np.dtype(types[0].dtype)),))
        return None if run is None else _planned(_unary(run))
    from .numba_composite import composite

    fast = composite(call.op, types, out, dict(call.attrs))
    return None if fast is None else _planned(fast)


def _planned(fn):
    # as ir.runtime.specialize.planned marks a kernel: it takes out= and returns out or a new array
    fn.takes_out, fn.scratch, fn.fresh = True, (), True
    return fn


def _unary(run):
    def gelu(x, out=None):
        return run((x,), out=out)
    return gelu


__all__ = ["ENABLED", "fused_kernel", "into", "ready", "specialize", "wanted"]
