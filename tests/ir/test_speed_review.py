"""Adversarial review of the speed work of issue 10 (specialized kernels, optimize(), the generated
step's fresh results): each test is a case where the fast path once differed from the generic one."""
import numpy as np
import pytest

import ir
import tracer


def _both(fn, *args):
    """fn traced on args, run with the generic kernels and with the specialized ones (both paths of the
    executor: the counting interpreter, then the generated function)."""
    mod = tracer.trace(fn, *args)
    out = []
    for spec in (False, True):
        ex = ir.Executor(mod, check_types=True)
        ex.specialize_kernels = spec
        out.append(ex["main"](*args))
    fast = ir.Executor(mod)["main"]
    fast(*args)
    out.append(fast(*args))
    return out


def _same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape
    assert np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_tanh_gelu_of_a_0d_tensor(dtype):
    # NumPy gives a scalar, not an array, for a 0-d product: the in-place GELU cannot write into it
    x = np.array(-0.75, dtype)
    want, *got = _both(lambda x: tracer.gelu(x, approximate="tanh"), x)
    for g in got:
        _same_bits(g, want)
