"""The CuPy path: the same modules and training steps on a GPU agree with NumPy.

Skipped cleanly where CuPy or a GPU is missing (CI has neither); run on a machine with both.
"""
import numpy as np
import pytest

import autodiff
import ir
import nn
import tracer
from nn import functional as F
from nn import optim
from tests.cases import all_cases
from tests.devices import HOST_OPERAND_ROWS, eager_on_device, forward_on_both, gradients_on_both


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


EAGER = [c for c in CASES if c.name not in HOST_OPERAND_ROWS]


@pytest.mark.parametrize("case", EAGER, ids=[c.name for c in EAGER])
def test_eager_rows_on_gpu_tensors_match_cpu(case):
    for (c, _), e in zip(forward_on_both(case, cp), eager_on_device(case, cp), strict=True):
        np.testing.assert_allclose(e.numpy(), c, rtol=1e-4, atol=1e-5, err_msg=case.name)


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


# ---------------------------------------------------------------- the device API on the real GPU

def test_tensors_models_and_optimizers_stay_on_the_gpu():
    g = tracer.tensor(np.ones((2, 3), "float32"), device="cuda")
    assert g.is_cuda and g.device == "cuda" and str(g.device) == "cuda:0" and g.cpu().device == "cpu"
    assert type(tracer.zeros(3, device="cuda")._data) is cp.ndarray and tracer.randn_like(g, seed=0).is_cuda
    with pytest.raises(RuntimeError, match="add: Expected all tensors to be on the same device"):
        g + tracer.ones((2, 3))
    assert (g * 2 + tracer.tensor(1.0)).is_cuda and g[:, [0, 2]].is_cuda  # scalars and host indices are fine
    nn.init.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.GELU(), nn.Linear(4, 2)).to("cuda")
    opt = optim.Adam(model.parameters(), lr=1e-2)
    step = autodiff.value_and_grad(lambda x: (model(x) ** 2.0).mean(), wrt=model.parameters())
    for _ in range(3):
        loss, grads = step(g)
        opt.step(grads)
    assert loss.is_cuda and all(p.is_cuda for p in model.parameters())
    assert all(type(v) is cp.ndarray for state in opt.state for v in state.values())


def test_generated_fused_kernels_match_numpy():
    """Every CUDA form of ir/runtime/fused_cuda.py compiled by NVRTC and run, against the op's NumPy kernel."""
    from ir.ops.fused import evaluate_unfused
    from ir.runtime import fused_cuda
    from tests.test_fused_cuda import CHAINS, _inputs
    wrong = []
    for name, expr, dtypes in CHAINS:
        xs = _inputs(dtypes, broadcast=name.startswith("broadcast"))
        with np.errstate(all="ignore"):
            want = evaluate_unfused(np, expr, xs)
        got = fused_cuda.run(cp, [cp.asarray(x) for x in xs], expr)
        if got is None:
            wrong.append((name, fused_cuda.FAILED.get((expr, tuple(dtypes)), "no kernel")))
            continue
        tol = 1e-5 if want.dtype == np.float32 else 1e-12  # CUDA's math functions: a few ulp from NumPy's
        if not np.allclose(cp.asnumpy(got), want, rtol=tol, atol=tol, equal_nan=True):
            wrong.append((name, float(np.nanmax(np.abs(cp.asnumpy(got).astype("float64") - want)))))
    assert not wrong, wrong


def test_checkpointing_lowers_the_pools_high_water_mark():
    from benchmarks import checkpoint_memory as cm
    weights, x = cm.make_weights(16, 256), cm.make_batch(2048, 256)
    pool, peaks = cp.get_default_memory_pool(), {}
    for variant in ("none", "every"):
        c = cm.compile_variant(weights, x, variant)
        ex = ir.Executor(c.mod, device="cuda")
        args = [cp.asarray(x)] + [cp.asarray(t.numpy()) for t in c.captured]
        ex["main_adjoint"](*args)
        cp.cuda.Device().synchronize()
        start = peak = pool.used_bytes()

        def allocate(size):
            nonlocal peak
            memory = pool.malloc(size)
            peak = max(peak, pool.used_bytes())
            return memory
        cp.cuda.set_allocator(allocate)
        try:
            out = ex["main_adjoint"](*args)
            cp.cuda.Device().synchronize()
            del out
        finally:
            cp.cuda.set_allocator(pool.malloc)
        peaks[variant] = (peak - start, ex.stats.peak_bytes)
    assert peaks["every"][0] < 0.7 * peaks["none"][0], peaks
    assert peaks["every"][1] < peaks["none"][1], peaks
