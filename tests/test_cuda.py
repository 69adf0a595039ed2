"""The CuPy path: the same modules and training steps on a GPU agree with NumPy.

Skipped cleanly where CuPy or a GPU is missing (CI has neither); run on a machine with both.
"""
import numpy as np
import pytest

import autodiff
import nn
import tracer
from nn import functional as F
from nn import optim
from tests.cases import all_cases
from tests.devices import forward_on_both, gradients_on_both


def _gpu():
    try:
        import cupy
        return cupy if cupy.cuda.runtime.getDeviceCount() > 0 else None
    except Exception:  # ImportError, or CuPy without a driver or device
        return None


cp = _gpu()
pytestmark = pytest.mark.skipif(cp is None, reason="needs CuPy and an NVIDIA GPU")
CASES = all_cases()


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_forward_matches_cpu(case):
    for c, g in forward_on_both(case, cp):
        np.testing.assert_allclose(cp.asnumpy(g), c, rtol=1e-4, atol=1e-5, err_msg=case.name)


@pytest.mark.parametrize("case", [c for c in CASES if c.grad], ids=[c.name for c in CASES if c.grad])
def test_gradients_match_cpu(case):
    for c, g in gradients_on_both(case, cp):
        np.testing.assert_allclose(cp.asnumpy(g), c, rtol=1e-7, atol=1e-9, err_msg=case.name)


def test_dropout_mask_is_the_same_on_both_devices():
    x = np.ones((64, 64), "float32")
    cpu = tracer.dropout(tracer.tensor(x), 0.5, seed=123).numpy()
    gpu = tracer.dropout(tracer.tensor(cp.asarray(x)), 0.5, seed=123).numpy()
    np.testing.assert_array_equal(cpu, gpu)


def test_value_and_grad_runs_a_training_step_on_the_gpu():
    nn.init.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    for p in model.parameters():
        p._data = cp.asarray(p._data)
    x = cp.asarray(np.random.default_rng(0).normal(size=(8, 16)).astype("float32"))
    y = cp.asarray(np.arange(8) % 4)
    step = autodiff.value_and_grad(lambda x, y: F.cross_entropy(model(x), y), wrt=model.parameters())
    opt = optim.SGD(model.parameters(), lr=0.5)
    first, grads = step(x, y)
    assert step.module is not None and type(grads[0]._data).__module__.startswith("cupy")
    for _ in range(20):
        loss, grads = step(x, y)
        opt.step(grads)
    assert loss.item() < first.item() / 2
