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
from tests.devices import HOST_OPERAND_ROWS, eager_on_device, flat, forward_on_both, gradients_on_both

rng = np.random.default_rng(0)


@pytest.fixture
def cp(monkeypatch):
    return fake_cupy.install(monkeypatch, devices=1)


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
    gx, gy = tracer.tensor(cp.asarray(x)), tracer.tensor(y, device="cuda")
    for out, want in [(gx + gy, x + y), (gy * gx, y * x), (gx * 2.0 + 1, x * 2 + 1),
                      (gx * tracer.tensor(np.float32(3.0)), x * 3),  # a host 0-d tensor is a scalar
                      (tracer.concat([gx, gx]), np.concatenate([x, x])), (gx[[1, 0]], x[[1, 0]]),
                      (tracer.where(gx > 0, gx, gy), np.where(x > 0, x, y))]:
        assert _on_gpu(out._data), type(out._data)
        np.testing.assert_array_equal(out.numpy(), want)
        assert isinstance(out.numpy(), np.ndarray)
    host = tracer.tensor(x) + tracer.tensor(y)
    assert isinstance(host._data, np.ndarray)  # NumPy alone stays on NumPy


@pytest.mark.parametrize("op", [lambda a, b: a + b, lambda a, b: b * a, lambda a, b: tracer.concat([a, b]),
                                lambda a, b: tracer.where(a > 0, a, b)], ids=["add", "multiply", "concat", "where"])
def test_mixing_devices_in_one_eager_op_is_an_error(cp, op):
    gx = tracer.tensor(rng.standard_normal(3).astype("float32"), device="cuda")
    host = tracer.tensor(rng.standard_normal(3).astype("float32"))
    with pytest.raises(RuntimeError, match=r"(add|multiply|concat|where): Expected all tensors to be on the same "
                                           r"device.*(cuda:0 and cpu|cpu and cuda:0)"):
        op(gx, host)


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
    if case.name in HOST_OPERAND_ROWS:
        with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
            eager_on_device(case, cp)
        eager = None
    else:
        eager = eager_on_device(case, cp)
    both = forward_on_both(case, cp)
    for k, (c, g) in enumerate(both):
        assert _on_gpu(g)  # (an eager result may live on the host: tracer.rand(shape) makes a NumPy array)
        # GELU's erf: SciPy here, the fallback there; conv on the host runs as im2col + BLAS
        # (ir.runtime.conv_kernels), so float32 sums round in another order: atol scales with the values
        atol = 1e-7 * max(1.0, float(np.abs(c).max())) * (10 if c.dtype == np.float32 else 1) if c.size else 0
        np.testing.assert_allclose(g.get(), c, rtol=1e-6, atol=atol)
        if eager is not None:
            np.testing.assert_allclose(eager[k].numpy(), c, rtol=1e-6, atol=atol)
    assert eager is None or len(eager) == len(both)


@pytest.mark.parametrize("case", [c for c in CASES if c.grad], ids=[c.name for c in CASES if c.grad])
def test_every_gradient_runs_on_the_cupy_path(cp, case):
    for c, g in gradients_on_both(case, cp):
        assert _on_gpu(g)
        np.testing.assert_allclose(g.get(), c, rtol=1e-12, atol=1e-15)


# ---------------------------------------------------------------- scatters stay on the device

@pytest.mark.parametrize("name", ["take_backward", "max_pool2d", "avg_pool2d", "conv2d"])
def test_scatter_backward_helpers_are_one_device_scatter_each(cp, name):
    """take's VJP and the window scatters of pooling and convolution: one ufunc.at (CuPy's atomic scatter
    kernel) per scatter on the device, never a loop of kh * kw adds or a trip to the host."""
    x = rng.standard_normal((2, 3, 6, 6))
    fns = {"take_backward": lambda a: (tracer.take(a, [0, 2, 2, 1], axis=1) ** 2.0).sum(),
           "max_pool2d": lambda a: (tracer.max_pool2d(a, 3, 2, 1) ** 2.0).sum(),
           "avg_pool2d": lambda a: (tracer.avg_pool2d(a, 2) ** 2.0).sum(),
           "conv2d": lambda a: (tracer.conv2d(a, tracer.tensor(np.ones((4, 3, 3, 3))), padding=1) ** 2.0).sum()}
    host = tracer.tensor(x)
    _, want = autodiff.value_and_grad(fns[name], wrt=host)(host)
    device = tracer.tensor(x, device="cuda")
    step = autodiff.value_and_grad(fns[name], wrt=device)
    step(device)  # compile
    fake_cupy.COUNTS.clear()
    _, got = step(device)
    assert _on_gpu(got._data) and fake_cupy.COUNTS["add.at"] == 1 and fake_cupy.COUNTS["get"] == 0
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)


# ---------------------------------------------------------------- optimizers update on the device

@pytest.mark.parametrize("make", [lambda p: optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01),
                                  lambda p: optim.Adam(p, lr=0.1, weight_decay=0.01),
                                  lambda p: optim.AdamW(p, lr=0.1)], ids=["sgd", "adam", "adamw"])
def test_optimizer_state_and_updates_stay_on_the_device(cp, make):
    nn.init.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
    host = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
    host.load_state_dict(model.state_dict())
    model.to("cuda")
    assert all(_on_gpu(p._data) and p.device == "cuda" for p in model.parameters())
    opt, opt_host = make(model.parameters()), make(host.parameters())
    grads = [[rng.standard_normal(p.shape).astype("float32") for p in host.parameters()] for _ in range(3)]
    fake_cupy.COUNTS.clear()
    for g in grads:
        opt.step([cp.asarray(a) for a in g])
        opt_host.step(g)
    assert fake_cupy.COUNTS["get"] == 0  # no device-to-host copy during the updates
    assert all(_on_gpu(v) for state in opt.state for v in state.values()) and opt.state[0]
    for p, q in zip(model.parameters(), host.parameters(), strict=True):
        assert _on_gpu(p._data)
        np.testing.assert_allclose(p.numpy(), q.numpy(), rtol=1e-6, atol=1e-7)


def test_module_to_moves_parameters_and_buffers_and_back(cp):
    model = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2)) if hasattr(nn, "BatchNorm2d") else None
    if model is None:
        pytest.skip("no module with buffers")
    tensors = [*model.parameters(), *model.buffers()]
    assert model.buffers()
    model.to(tracer.device("cuda"))
    assert all(_on_gpu(t._data) for t in tensors)
    model.to("cpu")
    assert all(isinstance(t._data, np.ndarray) for t in tensors)


def test_a_training_step_on_the_device_never_copies_to_the_host(cp):
    nn.init.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4)).to("cuda")
    x = tracer.tensor(rng.standard_normal((5, 8)).astype("float32"), device="cuda")
    y = tracer.tensor(np.arange(5) % 4, device="cuda")
    opt = optim.Adam(model.parameters(), lr=1e-2)
    step = autodiff.value_and_grad(lambda x, y: nn.functional.cross_entropy(model(x), y), wrt=model.parameters())
    step(x, y)  # tracing and compiling may read shapes; the replayed steps must not copy back
    fake_cupy.COUNTS.clear()
    for _ in range(3):
        loss, grads = step(x, y)
        opt.step(grads)
    assert fake_cupy.COUNTS["get"] == 0 and _on_gpu(loss._data)


# ---------------------------------------------------------------- fused chains: one generated kernel

def test_a_fused_step_on_the_device_launches_generated_kernels(cp, monkeypatch):
    from ir.runtime import fused_cuda
    from ir.transform import fuse
    from ir.transform.fuse import fusion
    monkeypatch.setattr(fuse, "MIN_ELEMENTS", 0, raising=False)  # fuse small chains too (a CUDA launch pays)
    x = rng.standard_normal((6, 8)).astype("float32")
    w = rng.standard_normal((8, 8)).astype("float32")

    def loss(a, b):
        h = a @ b
        return (tracer.gelu(h * 0.5 + 1.0) * tracer.sigmoid(h)).sum()
    with fusion(True):
        mod = ir.transform.cleanup()(autodiff.Gradient("main")(tracer.trace(loss, x, w)))
    assert "R.fused" in str(mod)
    want = ir.Executor(mod)["main_adjoint"](x, w)
    fake_cupy.COUNTS.clear()
    got = ir.Executor(mod, device="cuda")["main_adjoint"](cp.asarray(x), cp.asarray(w))
    adjoint_text = str(mod).split("def main_adjoint")[1]
    assert fake_cupy.COUNTS["kernel"] == adjoint_text.count("R.fused(") >= 2 and not fused_cuda.FAILED
    for g, c in zip(flat(got[1]) + [got[0]], flat(want[1]) + [want[0]], strict=True):
        np.testing.assert_allclose(g.get(), c, rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- tests/test_cuda.py's own code, on the fake

@pytest.mark.parametrize("name", ["test_dropout_mask_is_the_same_on_both_devices",
                                  "test_value_and_grad_runs_a_training_step_on_the_gpu",
                                  "test_tensors_models_and_optimizers_stay_on_the_gpu",
                                  "test_generated_fused_kernels_match_numpy"])
def test_the_real_gpu_tests_run_against_the_fake(cp, monkeypatch, name):
    """So that a typo in a GPU-only test shows on a CPU, not in the scarce GPU minutes."""
    from tests import test_cuda
    monkeypatch.setattr(test_cuda, "cp", cp)
    getattr(test_cuda, name)()


def test_state_dicts_copies_and_initialisers_write_into_gpu_tensors(cp):
    nn.init.manual_seed(0)
    host = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4)) if hasattr(nn, "BatchNorm1d") else nn.Linear(3, 4)
    gpu = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4)) if hasattr(nn, "BatchNorm1d") else nn.Linear(3, 4)
    gpu.to("cuda")
    gpu.load_state_dict(host.state_dict())  # NumPy values into CuPy buffers (CuPy refuses `a[...] = ndarray`)
    for (name, want), got in zip(host.state_dict().items(), gpu.state_dict().values(), strict=True):
        np.testing.assert_array_equal(got, want, err_msg=name)
    w = list(gpu.parameters())[0]
    nn.init.normal_(w)
    w.copy_(tracer.ones(w.shape))  # a CPU source, as torch's copy_ across devices
    assert _on_gpu(w._data) and w.numpy().tolist() == np.ones(w.shape).tolist()
    p = nn.Parameter(tracer.ones(2, device="cuda"))
    assert _on_gpu(p._data) and _on_gpu(nn.Parameter(cp.asarray(np.zeros(2)))._data)


def test_an_optimizer_on_the_gpu_saves_host_state_and_loads_it_back_onto_the_device(cp, tmp_path):
    w = nn.Parameter(cp.asarray(np.ones((2, 3), "float32")))
    opt = optim.Adam([w], lr=0.1)
    opt.step([cp.asarray(np.full((2, 3), 0.5, "float32"))])
    saved = opt.state_dict()
    assert all(isinstance(v, np.ndarray) for v in saved["state"][0].values())
    nn.save({"opt": saved["state"][0]}, tmp_path / "opt.npz")  # savable, as the docstring says
    again = optim.Adam([w], lr=0.1)
    again.load_state_dict(saved)
    assert all(_on_gpu(v) for v in again.state[0].values())
    np.testing.assert_array_equal(again.state[0]["exp_avg"].get(), opt.state[0]["exp_avg"].get())
