"""tracegrad's CuPy branches, run on a CPU against a fake `cupy` (tests/fake_cupy.py): an optimizer given
CuPy gradients for NumPy parameters, eager ops mixing NumPy and CuPy, the "CuPy installed, no GPU" error,
and value_and_grad choosing device="cuda". tests/test_cuda.py checks the real CuPy on a GPU."""
import sys

import numpy as np
import pytest

import autodiff
import ir
import nn
import tracer
from nn import optim
from tests import fake_cupy
from tests.cases import all_cases
from tests.devices import flat, forward_on_both, gradients_on_both

rng = np.random.default_rng(0)


@pytest.fixture
def cp(monkeypatch):
    fake = fake_cupy.module(devices=1)
    monkeypatch.setitem(sys.modules, "cupy", fake)
    return fake


def _on_gpu(a):
    return type(a) is fake_cupy.ndarray


def test_the_fake_keeps_cupys_rules(cp):
    a = cp.asarray(np.ones(3, "float32"))
    with pytest.raises(TypeError):
        np.asarray(a)  # no implicit conversion
    with pytest.raises(TypeError):
        cp.add(a, np.ones(3, "float32"))  # no NumPy arguments
    assert _on_gpu(np.exp(a)) and _on_gpu(a + 1) and isinstance(a.get(), np.ndarray)


# ---------------------------------------------------------------- optim: CuPy gradients, NumPy parameters

@pytest.mark.parametrize("make", [lambda p: optim.SGD(p, lr=0.5, momentum=0.9), lambda p: optim.Adam(p, lr=0.1)],
                         ids=["sgd", "adam"])
def test_optimizer_takes_cupy_gradients_for_numpy_parameters(cp, make):
    start = rng.standard_normal((3, 2)).astype("float32")
    grads = [rng.standard_normal((3, 2)).astype("float32") for _ in range(3)]
    host, mixed = nn.Parameter(start.copy()), nn.Parameter(start.copy())
    opt_host, opt_mixed = make([host]), make([mixed])
    for g in grads:
        opt_host.step([g])
        opt_mixed.step([cp.asarray(g)])  # the gradient comes back from a GPU step
    assert isinstance(mixed._data, np.ndarray) and mixed.dtype == "float32"
    np.testing.assert_array_equal(mixed.numpy(), host.numpy())
    assert not np.array_equal(mixed.numpy(), start)


# ---------------------------------------------------------------- eager dispatch

def test_eager_op_with_a_cupy_operand_runs_on_cupy(cp):
    x, y = rng.standard_normal((2, 3)).astype("float32"), rng.standard_normal(3).astype("float32")
    gx = tracer.tensor(cp.asarray(x))
    for out, want in [(gx + tracer.tensor(y), x + y), (tracer.tensor(y) * gx, y * x),
                      (tracer.concat([tracer.tensor(x), gx]), np.concatenate([x, x])),
                      (tracer.where(tracer.tensor(x > 0), gx, tracer.tensor(y)), np.where(x > 0, x, y))]:
        assert _on_gpu(out._data), type(out._data)
        np.testing.assert_array_equal(out.numpy(), want)
        assert isinstance(out.numpy(), np.ndarray)
    host = tracer.tensor(x) + tracer.tensor(y)
    assert isinstance(host._data, np.ndarray)  # NumPy alone stays on NumPy


# ---------------------------------------------------------------- the executor's device check

def test_cuda_without_cupy_or_without_a_gpu_says_which(monkeypatch):
    mod = tracer.trace(lambda x: tracer.exp(x), np.zeros(2, "float32"))
    monkeypatch.setitem(sys.modules, "cupy", None)
    with pytest.raises(RuntimeError, match='device="cuda" needs CuPy'):
        ir.Executor(mod, device="cuda")
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy.module(devices=0))
    with pytest.raises(RuntimeError, match="CuPy is installed but no GPU is usable.*no CUDA-capable device"):
        ir.Executor(mod, device="cuda")


def test_cuda_executor_runs_on_cupy(cp):
    x = rng.standard_normal((2, 3)).astype("float32")
    mod = tracer.trace(lambda a: tracer.softmax(tracer.exp(a) * 2.0).sum(axis=0), x)
    out = ir.Executor(mod, device="cuda")["main"](cp.asarray(x))
    assert _on_gpu(out)
    np.testing.assert_allclose(out.get(), ir.Executor(mod)["main"](x), rtol=1e-6)


# ---------------------------------------------------------------- value_and_grad picks the device

def _loss(w, b):
    return lambda x: (tracer.tanh(x @ w + b) ** 2.0).mean()


def test_value_and_grad_runs_on_cuda_for_cupy_arguments(cp):
    x = rng.standard_normal((4, 3))
    w, b = tracer.tensor(rng.standard_normal((3, 2))), tracer.tensor(rng.standard_normal(2))
    value, (gw, gb) = autodiff.value_and_grad(_loss(w, b), wrt=[w, b])(x)
    gpu_x = tracer.tensor(cp.asarray(x))
    gpu_value, (gpu_gw, gpu_gb) = autodiff.value_and_grad(_loss(w, b), wrt=[w, b])(gpu_x)
    for got, want in [(gpu_value, value), (gpu_gw, gw), (gpu_gb, gb)]:
        data = got._data if isinstance(got, tracer.Tensor) else got
        assert _on_gpu(data), type(data)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)


def test_value_and_grad_runs_on_cuda_for_captured_cupy_weights(cp):
    x = rng.standard_normal((4, 3))
    w = tracer.tensor(cp.asarray(rng.standard_normal((3, 2))))  # a model moved to the GPU, a host batch
    b = tracer.tensor(cp.asarray(rng.standard_normal(2)))
    value, (gw, gb) = autodiff.value_and_grad(_loss(w, b), wrt=[w, b])(x)
    assert _on_gpu(gw._data) and _on_gpu(gb._data)
    host_w, host_b = tracer.tensor(w.numpy()), tracer.tensor(b.numpy())
    host_value, (host_gw, _) = autodiff.value_and_grad(_loss(host_w, host_b), wrt=[host_w, host_b])(x)
    np.testing.assert_allclose(value.numpy(), host_value.numpy(), rtol=1e-12)
    np.testing.assert_allclose(gw.numpy(), host_gw.numpy(), rtol=1e-12)


# ---------------------------------------------------------------- every kernel is written against `xp`

CASES = all_cases()


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_every_case_runs_on_the_cupy_path(cp, case):
    """A kernel that reaches for NumPy on a device array (np.* instead of xp.*) fails here, on a CPU."""
    eager = flat(case.fn(*[tracer.tensor(cp.asarray(a)) for a in case.inputs], **case.kwargs))
    for (c, g), e in zip(forward_on_both(case, cp), eager, strict=True):
        assert _on_gpu(g)  # (an eager result may live on the host: tracer.rand(shape) makes a NumPy array)
        np.testing.assert_allclose(g.get(), c, rtol=1e-6, atol=1e-7)  # GELU's erf: SciPy here, the fallback there
        np.testing.assert_allclose(e.numpy(), c, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("case", [c for c in CASES if c.grad], ids=[c.name for c in CASES if c.grad])
def test_every_gradient_runs_on_the_cupy_path(cp, case):
    for c, g in gradients_on_both(case, cp):
        assert _on_gpu(g)
        np.testing.assert_allclose(g.get(), c, rtol=1e-12, atol=1e-15)
