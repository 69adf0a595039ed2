"""nn.distributed's NCCL path on real GPUs: a single-rank NCCL communicator on one GPU, and `mpiexec -n 2`
with one GPU per process where a machine has two. Skipped cleanly without CuPy (with NCCL) and a GPU; the
selection logic is tested without either in test_distributed.py.
"""
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import autodiff
import nn
from nn.distributed import api

ROOT = Path(__file__).resolve().parents[2]


def _gpus() -> int:
    try:
        import cupy
        from cupy.cuda import nccl
        return cupy.cuda.runtime.getDeviceCount() if nccl.available else 0
    except Exception:  # ImportError, or CuPy without a driver or device
        return 0


GPUS = _gpus()
pytestmark = pytest.mark.skipif(GPUS == 0, reason="needs CuPy with NCCL and an NVIDIA GPU")


@pytest.fixture
def nccl_world(monkeypatch):
    monkeypatch.setattr(api, "_world", None)
    for name in ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    nn.distributed.init(backend="nccl")
    yield api._world


def test_single_rank_nccl_all_reduce_runs_on_the_gpu(nccl_world):
    import cupy

    x = cupy.arange(10, dtype="float32")
    out = nn.distributed.all_reduce(x, op="sum")
    assert isinstance(out, cupy.ndarray) and out is not x
    np.testing.assert_array_equal(cupy.asnumpy(out), np.arange(10))
    assert nccl_world.device_comm().collectives == 1
    before = nccl_world.collectives
    nn.distributed.broadcast_parameters([x])
    assert nccl_world.collectives == before + 1


def test_data_parallel_on_cupy_gradients(nccl_world):
    import cupy

    model = nn.Linear(64, 32)
    for p in model.parameters():
        p._data = cupy.asarray(p._data)  # the model on the GPU
    step = autodiff.value_and_grad(lambda x: (model(x) ** 2).mean(), wrt=model.parameters())
    x = cupy.asarray(np.random.default_rng(0).standard_normal((8, 64)).astype("float32"))
    want_loss, want = step(x)
    dp = nn.distributed.data_parallel(step, bucket_bytes=8196)  # value 4 B + weight 8 KiB, then the bias
    loss, grads = dp(x)
    assert dp.comm_stats.collectives == 2
    assert isinstance(grads[0]._data, cupy.ndarray) and float(loss.item()) == pytest.approx(float(want_loss.item()))
    for g, w in zip(grads, want, strict=True):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-6)


@pytest.mark.skipif(GPUS < 2 or importlib.util.find_spec("mpi4py") is None, reason="needs 2 GPUs and mpi4py")
def test_two_processes_one_gpu_each():
    code = ("import cupy, nn.distributed as d; d.init(backend='nccl'); r = d.rank();"
            "out = d.all_reduce(cupy.full(4, r + 1.0, 'float32'));"
            "assert cupy.cuda.Device().id == r and float(out[0]) == 1.5, (r, out); print('ok', r)")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run(["mpiexec", "-n", "2", sys.executable, "-c", code], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.count("ok") == 2, proc.stdout + proc.stderr
