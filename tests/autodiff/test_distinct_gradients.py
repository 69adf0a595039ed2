"""Gradients that simplify to one array come back as separate arrays: writing into one (an optimizer's
in-place update) leaves the others alone, as torch's separate .grad tensors do."""
import numpy as np
import pytest

import autodiff
import tracer


@pytest.mark.parametrize("fn", [lambda x, y: (x * 2 + y * 2).sum(), lambda x, y: tracer.tanh(x + y).sum()])
def test_gradients_sharing_a_buffer_are_separate_arrays(fn):
    x, y = tracer.tensor(np.ones(3, "float32")), tracer.tensor(np.full(3, 0.5, "float32"))
    step = autodiff.grad(lambda: fn(x, y), wrt=[x, y])
    for _ in range(2):  # the interpreted first call and the generated one
        gx, gy = step()
        want = gy.numpy().copy()
        gx._data[...] = 100.0
        np.testing.assert_array_equal(gy.numpy(), want)
