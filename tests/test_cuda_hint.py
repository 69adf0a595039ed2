"""device="cuda" without CuPy (or with CuPy and no GPU): one exception type and one install hint from every path,
and the availability questions answer False instead of raising. Absence is simulated as test_device_api.py does
(sys.modules["cupy"] = None makes `import cupy` fail); "installed, no GPU" is tests/fake_cupy.py with 0 devices."""
import sys

import numpy as np
import pytest

import ir
import nn
import nn.torch as torch
import tracer
from ir.cuda_hint import CudaUnavailableError, cuda_available, device_count, require_cupy
from tests import fake_cupy

HINT = 'device="cuda" needs CuPy: pip install "tracegrad[cuda]" (cupy-cuda12x) on a machine with an NVIDIA GPU'


def _paths():
    """Every way a user asks for the GPU, each a callable."""
    mod = tracer.trace(lambda x: x.sum(), tracer.spec((2,)))
    return {
        'tracer.tensor(..., device="cuda")': lambda: tracer.tensor([1.0], device="cuda"),
        'tracer.zeros(2, device="cuda")': lambda: tracer.zeros(2, device="cuda"),
        "x.cuda()": lambda: tracer.ones(2).cuda(),
        'x.to("cuda")': lambda: tracer.ones(2).to("cuda"),
        'model.to("cuda")': lambda: nn.Linear(2, 2).to("cuda"),
        'torch.zeros(2, device="cuda")': lambda: torch.zeros(2, device="cuda"),
        'ir.Executor(mod, device="cuda")': lambda: ir.Executor(mod, device="cuda"),
    }


def _errors():
    out = {}
    for name, call in _paths().items():
        with pytest.raises(RuntimeError) as info:  # CudaUnavailableError is one; so is the executor's error
            call()
        out[name] = info.value
    return out


@pytest.fixture
def no_cupy(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)
    torch.cuda._cupy.cache_clear()
    yield
    torch.cuda._cupy.cache_clear()


def test_the_exception_is_an_import_error_and_a_runtime_error():
    assert issubclass(CudaUnavailableError, ImportError) and issubclass(CudaUnavailableError, RuntimeError)
    assert tracer.cuda.CudaUnavailableError is CudaUnavailableError


def test_without_cupy_every_path_gives_the_same_hint(no_cupy):
    errors = _errors()
    for name, e in errors.items():
        assert str(e).startswith(HINT), (name, str(e))
        assert "No module named" not in type(e).__name__
        assert isinstance(e, CudaUnavailableError), (name, type(e))
    assert len({str(e) for e in errors.values()}) == 1  # word for word the same message


def test_without_cupy_availability_answers_false(no_cupy):
    assert tracer.cuda.is_available() is False and tracer.cuda.device_count() == 0
    assert cuda_available() is False and device_count() == 0
    assert torch.cuda.is_available() is False and torch.cuda.device_count() == 0
    with pytest.raises(CudaUnavailableError, match=r"torch\.cuda\.current_device\(\) \(no GPU\) needs CuPy: pip install"):
        torch.cuda.current_device()


def test_cupy_without_a_gpu_says_so(monkeypatch):
    fake_cupy.install(monkeypatch, devices=0)
    torch.cuda._cupy.cache_clear()
    try:
        assert tracer.cuda.is_available() is False and tracer.cuda.device_count() == 0
        assert torch.cuda.is_available() is False
        for name, e in _errors().items():
            assert "CuPy is installed but no GPU is usable" in str(e), (name, str(e))
    finally:
        torch.cuda._cupy.cache_clear()


def test_with_a_gpu_the_helper_returns_cupy(monkeypatch):
    cp = fake_cupy.install(monkeypatch, devices=2)
    assert require_cupy() is cp and tracer.cuda.is_available() is True and tracer.cuda.device_count() == 2
    t = tracer.tensor(np.ones(3, "float32"), device="cuda")
    assert type(t._data) is fake_cupy.ndarray and t.device == "cuda:0"
