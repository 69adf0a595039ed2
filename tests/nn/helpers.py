"""Shared helpers for the nn tests: run a callable eagerly and traced, and finite-difference gradients."""
import numpy as np

import autodiff
import ir
import tracer
from tracer.trace import trace_function


def eager(fn, *args):
    return np.asarray(fn(*[tracer.tensor(a) for a in args]))


def traced(fn, *args):
    """Trace fn on args, then run the IR on the executor, feeding the captured weights' current values."""
    t = trace_function(fn, args)
    ir.verify(t.mod)
    return np.asarray(ir.Executor(t.mod)["main"](*args, *[c._data for c in t.captured]))


def both(fn, *args):
    """(eager result, traced-and-executed result) as arrays."""
    return eager(fn, *args), traced(fn, *args)


def numeric_grad(loss, tensor, eps=1e-6):
    """Central differences of the scalar `loss()` with respect to `tensor`'s values, perturbed in place."""
    data = tensor._data
    out = np.zeros_like(data, dtype="float64")
    for idx in np.ndindex(data.shape):
        orig = data[idx]
        data[idx] = orig + eps
        hi = float(np.asarray(loss()))
        data[idx] = orig - eps
        lo = float(np.asarray(loss()))
        data[idx] = orig
        out[idx] = (hi - lo) / (2 * eps)
    return out


def check_grads(loss, tensors, rtol=1e-5, atol=1e-7):
    """value_and_grad of `loss()` (no arguments; it captures `tensors`) against finite differences."""
    tensors = list(tensors)  # model.parameters() is a generator, read twice below
    value, grads = autodiff.value_and_grad(loss, wrt=tensors)()
    np.testing.assert_allclose(float(np.asarray(value)), float(np.asarray(loss())), rtol=1e-10)
    for t, g in zip(tensors, grads, strict=True):
        np.testing.assert_allclose(np.asarray(g), numeric_grad(loss, t), rtol=rtol, atol=atol,
                                   err_msg=f"gradient of {t._name or t.shape}")


def weighted_sum(out, seed=0):
    """A scalar that depends on every element of `out` differently (a random vector-Jacobian product)."""
    w = np.random.default_rng(seed).uniform(0.5, 1.5, out.shape).astype(out.dtype)
    return (out * tracer.tensor(w)).sum()
