"""The device API attacked as a PyTorch user would: idioms from torch training loops that must work (or fail
with a clear error of the documented type), run against the fake CuPy (tests/fake_cupy.py)."""
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


def test_to_takes_non_blocking_as_torch_loops_pass_it(cp):
    x = tracer.tensor([1.0, 2.0])
    y = x.to("cuda", non_blocking=True)
    assert _on_gpu(y) and y.tolist() == [1.0, 2.0]
    assert x.to("float64", non_blocking=False).dtype == "float64"
    model = nn.Linear(2, 2).to("cuda", non_blocking=True)
    assert all(_on_gpu(p) for p in model.parameters())


def test_new_constructors_follow_the_device_of_self(cp):
    g = tracer.ones((2,), device="cuda")
    made = [g.new_zeros(3), g.new_ones((2, 2)), g.new_full((2,), 5.0), g.new_tensor([1.0, 2.0])]
    assert all(_on_gpu(t) for t in made), [t.device for t in made]
    assert made[2].tolist() == [5.0, 5.0] and made[3].tolist() == [1.0, 2.0]
    c = tracer.ones((2,))
    assert not any(_on_gpu(t) for t in [c.new_zeros(3), c.new_ones(2), c.new_full((2,), 1.0), c.new_tensor([1.0])])


def test_a_gpu_value_written_into_a_cpu_tensor_is_copied_as_copy_does(cp):
    c = tracer.zeros((2,))
    c[:] = tracer.tensor([1.0, 2.0], device="cuda")
    assert type(c._data) is np.ndarray and c.tolist() == [1.0, 2.0]
    with pytest.raises(RuntimeError, match=r"x\[key\] = value: .*cuda:0.*cpu"):
        c[tracer.tensor([0], device="cuda")] = 3.0  # indices on another device: torch refuses them too


@pytest.mark.parametrize("bad", ["mps", "cudax", "cuda:x", "cpu:1"])
def test_module_to_refuses_what_names_no_device_as_tensor_to_does(cp, bad):
    with pytest.raises(DeviceError, match=f"Linear.to: .*{bad!r}"):
        nn.Linear(2, 2).to(bad)


def test_module_to_takes_cpu_0_a_device_object_and_a_tensor(cp):
    m = nn.Linear(2, 2).to(tracer.device("cuda"))
    assert all(_on_gpu(p) for p in m.parameters())
    m.to("cpu:0")
    assert not any(_on_gpu(p) for p in m.parameters())
    m.to(tracer.ones((2,), dtype="float64", device="cuda"))  # torch's to(tensor): its dtype and device
    assert all(_on_gpu(p) and p.dtype == "float64" for p in m.parameters())


def test_module_cuda_and_cpu_as_torch(cp):
    m = nn.Linear(2, 2)
    assert m.cuda() is m and all(_on_gpu(p) for p in m.parameters())
    assert m.cpu() is m and not any(_on_gpu(p) for p in m.parameters())


def test_a_device_index_or_a_torch_device_is_taken(cp):
    assert _on_gpu(tracer.tensor([1.0], device=0)) and tracer.device(0) == "cuda:0"
    torch = pytest.importorskip("torch")
    assert _on_gpu(tracer.tensor([1.0], device=torch.device("cuda:0")))
    assert _on_gpu(tracer.ones((2,)).to(torch.device("cuda")))
    assert tracer.device(torch.device("cpu")) == "cpu"


def _loss(m):
    return lambda x: (m(x) ** 2).mean()


@pytest.mark.parametrize("opt_cls", [nn.optim.Adam, nn.optim.SGD])
def test_an_optimizer_with_state_follows_its_parameters_to_the_gpu_and_back(cp, opt_cls):
    m = nn.Linear(2, 2)
    kwargs = {"momentum": 0.9} if opt_cls is nn.optim.SGD else {}
    opt = opt_cls(m.parameters(), lr=0.1, **kwargs)
    x = tracer.ones((3, 2))
    opt.step(autodiff.value_and_grad(_loss(m), wrt=m.parameters())(x)[1])  # state made on the CPU
    m.to("cuda")
    opt.step(autodiff.value_and_grad(_loss(m), wrt=m.parameters())(x.to("cuda"))[1])
    assert all(_on_gpu(p) for p in m.parameters())
    assert all(type(v) is fake_cupy.ndarray for s in opt.state for v in s.values() if hasattr(v, "shape"))
    m.to("cpu")
    opt.step(autodiff.value_and_grad(_loss(m), wrt=m.parameters())(x)[1])
    assert all(type(v) is np.ndarray for s in opt.state for v in s.values() if hasattr(v, "shape"))
