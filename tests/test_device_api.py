"""The device API, PyTorch's way: tracer.device, t.device, .to/.cpu/.cuda, device= on the constructors.

The GPU side runs against the fake CuPy (tests/fake_cupy.py); tests/test_cuda.py runs the real one."""
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import autodiff
import nn
import tracer
from tests import fake_cupy
from tracer.device import DeviceError


@pytest.fixture
def cp(monkeypatch):
    return fake_cupy.install(monkeypatch, devices=1)


def _on_gpu(t):
    return type(t._data) is fake_cupy.ndarray


# ---------------------------------------------------------------- the device object

def test_device_prints_compares_and_hashes_like_torch_device():
    cpu, cuda, cuda1 = tracer.device("cpu"), tracer.device("cuda"), tracer.device("cuda:1")
    assert (str(cpu), str(cuda), str(cuda1), repr(cuda1)) == ("cpu", "cuda", "cuda:1", "device(type='cuda', index=1)")
    assert (cuda1.type, cuda1.index, cpu.index) == ("cuda", 1, None)
    assert tracer.device("cuda", 1) == cuda1 == "cuda:1" == tracer.device(cuda1)
    assert cuda == "cuda:0" and cuda == cuda1 and tracer.device("cuda:0") != cuda1  # no index matches any
    assert cpu == "cpu" and cpu != "cuda" and cpu != "tpu" and cpu != 3
    assert len({cpu, tracer.device("cpu"), cuda}) == 2


@pytest.mark.parametrize("bad", ["tpu", "cuda:x", "cuda:-1", "cpu:1", ""])
def test_a_string_that_names_no_device_is_refused(bad):
    with pytest.raises(DeviceError) as info:
        tracer.device(bad)
    assert isinstance(info.value, RuntimeError) and isinstance(info.value, ValueError)
    with pytest.raises(ValueError, match=f"tensor: .*{bad!r}"):
        tracer.tensor([1.0], device=bad)
    with pytest.raises(TypeError, match="device: expected a string"):
        tracer.device(0.5)


# ---------------------------------------------------------------- CPU tensors

def test_cpu_tensors_report_the_cpu_and_stay_where_they_are():
    x = tracer.tensor([1.0, 2.0])
    assert x.device == "cpu" and str(x.device) == "cpu" and not x.is_cuda
    assert x.cpu() is x and x.to("cpu") is x and x.to(tracer.device("cpu")) is x and x.to(x) is x
    for made in [tracer.tensor([1.0], device="cpu"), tracer.zeros(2, device="cpu"), tracer.ones(2, device="cpu"),
                 tracer.full((2,), 3.0, device="cpu"), tracer.empty(2, device="cpu"), tracer.arange(3, device="cpu"),
                 tracer.linspace(0, 1, 3, device="cpu"), tracer.eye(2, device="cpu"),
                 tracer.randn(2, seed=0, device="cpu"), tracer.rand(2, seed=0, device="cpu"),
                 tracer.randint(0, 5, (2,), seed=0, device="cpu")]:
        assert isinstance(made._data, np.ndarray) and made.device == "cpu"


def test_cuda_without_cupy_says_so(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)
    with pytest.raises(ImportError):
        tracer.ones(2).cuda()
    with pytest.raises(ImportError):
        tracer.zeros(2, device="cuda")


def test_inside_a_trace_device_is_left_to_the_executor():
    def fn(x):
        y = tracer.zeros(x.shape, device="cuda") + x.to("cuda")  # constants and values: no CuPy needed
        return (y * tracer.ones(3, device=x.device)).sum()
    mod = tracer.trace(fn, np.ones(3, "float32"))
    assert "R.sum" in str(mod)


# ---------------------------------------------------------------- on the (fake) GPU

def test_tensors_move_to_the_gpu_and_back(cp):
    a = np.arange(6, dtype="float32").reshape(2, 3)
    g = tracer.tensor(a, device="cuda")
    assert _on_gpu(g) and g.is_cuda and g.device == "cuda" and str(g.device) == "cuda:0"
    assert g.cuda() is g and g.to("cuda:0") is g and g.to(g) is g
    assert _on_gpu(tracer.ones(2).cuda()) and _on_gpu(tracer.ones(2).cuda(0)) and _on_gpu(tracer.ones(2).to("cuda"))
    back = g.cpu()
    assert isinstance(back._data, np.ndarray) and back.device == "cpu" and back.numpy().tolist() == a.tolist()
    assert g.numpy().tolist() == a.tolist()  # .numpy() copies back (torch asks for .cpu().numpy() first)
    assert g.to("cuda", "float64").dtype == "float64" and _on_gpu(g.to("cuda", "float64"))
    assert tracer.ones(2).to(g).device == "cuda"  # to(other) takes its device too
    assert repr(tracer.ones(2).cuda()) == 'Tensor([1., 1.], dtype="float32", device="cuda:0")'
    assert repr(tracer.ones(2)) == 'Tensor([1., 1.], dtype="float32")'
    with pytest.raises(ValueError, match="cuda: expected a CUDA device"):
        tracer.ones(2).cuda("cpu")


def test_constructors_make_their_values_on_the_gpu(cp):
    for made in [tracer.zeros(2, 3, device="cuda"), tracer.ones((2,), device="cuda"),
                 tracer.full((2,), 3.0, device=tracer.device("cuda")), tracer.empty(2, device="cuda"),
                 tracer.arange(4, device="cuda"), tracer.linspace(0, 1, 5, device="cuda"),
                 tracer.eye(3, device="cuda")]:
        assert _on_gpu(made) and made.device == "cuda"
    # the random ones draw on the host and move: the same values on every device
    for fn in (tracer.randn, tracer.rand):
        np.testing.assert_array_equal(fn(4, seed=7, device="cuda").numpy(), fn(4, seed=7).numpy())
    np.testing.assert_array_equal(tracer.randint(0, 9, (4,), seed=1, device="cuda").numpy(),
                                  tracer.randint(0, 9, (4,), seed=1).numpy())


def test_like_constructors_follow_the_device_of_x(cp):
    g = tracer.ones(3, device="cuda")
    for made in [tracer.zeros_like(g), tracer.ones_like(g), tracer.full_like(g, 2.0), tracer.empty_like(g),
                 tracer.zeros_like(g, "float64"), tracer.ones_like(g, "int64"), tracer.full_like(g, 1, "int32"),
                 tracer.randn_like(g, seed=0), tracer.rand_like(g, seed=0), tracer.randint_like(g, 5, seed=0)]:
        assert _on_gpu(made), made
    assert _on_gpu(tracer.layer_norm(tracer.ones((2, 3), device="cuda")))  # its default weight follows x


def test_mixing_a_gpu_tensor_and_a_cpu_tensor_names_the_op_and_both_devices(cp):
    g, h = tracer.ones((2, 3), device="cuda"), tracer.ones((2, 3))
    with pytest.raises(RuntimeError, match=r"matmul: Expected all tensors to be on the same device, but found at "
                                           r"least two devices, cuda:0 and cpu"):
        g @ h.T
    with pytest.raises(RuntimeError, match="subtract: Expected all tensors"):
        h - g
    # Python numbers, host 0-d tensors and host indices are fine (as torch's CPU scalars and indices)
    assert _on_gpu(g * 2 + tracer.tensor(1.0)) and _on_gpu(g[:, [0, 2]]) and _on_gpu(tracer.take(g, [1], axis=1))


def test_a_compiled_step_with_a_model_on_the_gpu_returns_gpu_values(cp):
    nn.init.manual_seed(0)
    model = nn.Linear(3, 2).to(tracer.device("cuda"))
    x = tracer.randn(4, 3, seed=0, device="cuda")
    loss, grads = autodiff.value_and_grad(lambda x: model(x).sum(), wrt=model.parameters())(x)
    assert loss.device == "cuda" and all(g.device == "cuda" for g in grads)


# ---------------------------------------------------------------- the NumPy path never loads CuPy

def test_the_numpy_path_never_imports_cupy():
    code = textwrap.dedent("""
        import sys
        import numpy as np
        import autodiff, ir, nn, tracer
        from nn import functional as F, optim
        nn.init.manual_seed(0)
        model = nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Linear(8, 3))
        opt = optim.Adam(model.parameters(), lr=1e-2)
        step = autodiff.value_and_grad(lambda x, y: F.cross_entropy(model(x), y), wrt=model.parameters())
        x, y = tracer.randn(5, 4, seed=0), tracer.tensor(np.arange(5) % 3)
        for _ in range(2):
            loss, grads = step(x, y)
            opt.step(grads)
        print(x.device, (x * 2).sum().item() == (x.cpu() * 2).sum().item(), loss.device)
        assert not [m for m in sys.modules if m.split(".")[0] in ("cupy", "cupyx")], sorted(sys.modules)
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          cwd=str(__import__("pathlib").Path(__file__).resolve().parents[1]))
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["cpu", "True", "cpu"]
