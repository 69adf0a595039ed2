"""nn.distributed in one process: the single-process path, and the MPI and NCCL paths through fake modules.

The fakes stand in for mpi4py's COMM_WORLD and cupy.cuda.nccl with a simulated second rank, so the
bucketing, the averaging, the broadcasts and the choice of communicator are checked here without a
launcher or a GPU; test_distributed_mpi.py runs the real thing under mpiexec.
"""
import subprocess
import sys
import types

import numpy as np
import pytest

import nn
import tracer
from nn.distributed import api

SIZE_VARIABLES = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE", "MPI_LOCALRANKID")


@pytest.fixture(autouse=True)
def fresh_world(monkeypatch):
    """No world yet, and no launcher in the environment (and the excepthook that init() sets on several
    processes undone afterwards)."""
    monkeypatch.setattr(api, "_world", None)
    monkeypatch.setattr(sys, "excepthook", sys.excepthook)
    for name in SIZE_VARIABLES:
        monkeypatch.delenv(name, raising=False)


class FakeComm:
    """COMM_WORLD of 2 processes seen from `rank`; the other process holds `other(buf)` in every
    all-reduce, root's buffers hold `root_value` in every broadcast, and the other process sends
    `other_object(obj)` in every allgather (the same as this one's unless a test says otherwise)."""

    def __init__(self, rank=0, other=lambda buf: buf + 2, root_value=7.0, objects=(), other_object=lambda obj: obj):
        self.rank, self.other, self.root_value, self.objects = rank, other, root_value, list(objects)
        self.other_object = other_object
        self.calls = []
        self.gathered = []  # what each allgather returned

    def Get_rank(self):
        return self.rank

    def Get_size(self):
        return 2

    def Allreduce(self, inplace, buf, op):
        assert inplace is FakeMPI.IN_PLACE and buf.flags.c_contiguous
        self.calls.append(("Allreduce", buf.dtype, buf.size, op))
        theirs = self.other(buf.copy())
        buf[...] = {"SUM": buf + theirs, "MAX": np.maximum(buf, theirs), "MIN": np.minimum(buf, theirs)}[op]

    def Bcast(self, buf, root):
        self.calls.append(("Bcast", buf.dtype, buf.size, root))
        if root != self.rank:
            buf[...] = self.root_value

    def bcast(self, obj, root):
        return obj if root == self.rank else self.objects.pop(0)

    def allgather(self, obj):
        theirs = self.other_object(obj)
        out = [obj, theirs] if self.rank == 0 else [theirs, obj]
        self.gathered.append(out)
        return out

    def Barrier(self):
        self.calls.append(("Barrier",))

    def Abort(self, code):
        raise AssertionError(f"MPI_Abort({code}) in a test")


class FakeMPI:
    IN_PLACE, SUM, MAX, MIN = object(), "SUM", "MAX", "MIN"


@pytest.fixture
def fake_mpi(monkeypatch):
    comm = FakeComm()
    mpi = types.SimpleNamespace(**{k: v for k, v in vars(FakeMPI).items() if k.isupper()}, COMM_WORLD=comm)
    monkeypatch.setitem(sys.modules, "mpi4py", types.SimpleNamespace(MPI=mpi))
    monkeypatch.setitem(sys.modules, "mpi4py.MPI", mpi)
    monkeypatch.setenv("PMI_SIZE", "2")
    return comm


def f32(*shape, fill=1.0):
    return np.full(shape, fill, "float32")


# ------------------------------------------------------------ one process
def test_one_process_without_mpi4py(monkeypatch):
    monkeypatch.setitem(sys.modules, "mpi4py", None)  # `import mpi4py` now raises ImportError
    nn.distributed.init()
    assert (nn.distributed.rank(), nn.distributed.world_size()) == (0, 1)
    nn.distributed.barrier()
    out = (tracer.tensor(2.0), [tracer.tensor(f32(3))])
    step = nn.distributed.data_parallel(lambda: out)
    assert step() is out and step.comm_stats.collectives == 0 and step.comm_stats.calls == 1
    t = f32(2)
    assert nn.distributed.all_reduce(t) is t
    model = nn.Linear(2, 2)
    before = model.weight.numpy().copy()
    assert nn.distributed.broadcast_parameters(model) is model
    np.testing.assert_array_equal(model.weight.numpy(), before)


def test_launched_on_two_processes_without_mpi4py_says_so(monkeypatch):
    monkeypatch.setitem(sys.modules, "mpi4py", None)
    monkeypatch.setenv("OMPI_COMM_WORLD_SIZE", "2")
    with pytest.raises(RuntimeError, match=r"one of 2 started by mpiexec.*mpi4py is not installed.*tracegrad\[mpi\]"):
        nn.distributed.init()
    with pytest.raises(RuntimeError, match="mpi4py"):
        nn.distributed.init(backend="mpi")


def test_mpiexec_n_1_is_one_process_without_mpi(monkeypatch):
    monkeypatch.setitem(sys.modules, "mpi4py", None)
    monkeypatch.setenv("PMI_SIZE", "1")
    nn.distributed.init()
    assert nn.distributed.world_size() == 1


def test_a_fresh_interpreter_never_imports_mpi4py():
    code = ("import sys, numpy as np, nn.distributed as d; d.init(); d.barrier(); d.all_reduce(np.ones(2));"
            "d.data_parallel(lambda: [np.ones(2)])(); assert 'mpi4py' not in sys.modules, 'imported'; print('ok')")
    env = {k: v for k, v in __import__("os").environ.items() if k not in SIZE_VARIABLES}
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr


def test_init_rejects_an_unknown_backend():
    with pytest.raises(ValueError, match="backend must be one of mpi, nccl, single"):
        nn.distributed.init(backend="gloo")


# ------------------------------------------------------------ MPI, one real process and a simulated one
def test_data_parallel_averages_value_and_gradients_in_buckets(fake_mpi):
    nn.distributed.init()
    assert (nn.distributed.rank(), nn.distributed.world_size()) == (0, 2)
    grads = [tracer.tensor(f32(100, fill=1.0)), tracer.tensor(f32(10, 10, fill=3.0)), tracer.tensor(f32(100))]
    inner = lambda x: (tracer.tensor(np.float32(x)), grads)  # noqa: E731
    # value 4 B + first gradient 400 B; the second would pass 800 B: a new bucket for the last two
    step = nn.distributed.data_parallel(inner, bucket_bytes=800)
    value, got = step(5.0)
    assert [c[2] for c in fake_mpi.calls] == [101, 200] and step.comm_stats.collectives == 2
    assert step.comm_stats.bytes == 4 + 3 * 400 and step.comm_stats.calls == 1
    assert isinstance(value, tracer.Tensor) and value.item() == 6.0  # (5 + 7) / 2
    assert all(isinstance(g, tracer.Tensor) for g in got) and got[1].shape == (10, 10)
    np.testing.assert_array_equal(got[1].numpy(), np.full((10, 10), 4.0))  # (3 + 5) / 2
    np.testing.assert_array_equal(grads[1].numpy(), np.full((10, 10), 3.0))  # the step's own result untouched
    fake_mpi.calls.clear()
    whole = nn.distributed.data_parallel(inner)  # 25 MiB: one bucket
    whole(1.0)
    assert len(fake_mpi.calls) == 1 and whole.comm_stats.collectives == 1


def test_buckets_split_by_dtype_and_keep_structure(fake_mpi):
    nn.distributed.init()
    grads = {"w": f32(3), "b": np.ones(2, "float64"), "v": f32(2)}
    got = nn.distributed.data_parallel(lambda: grads)()
    assert sorted((str(c[1]), c[2]) for c in fake_mpi.calls) == [("float32", 5), ("float64", 2)]
    assert list(got) == ["w", "b", "v"] and got["b"].dtype == np.float64
    np.testing.assert_array_equal(got["v"], [2.0, 2.0])


def test_has_aux_in_both_forms(fake_mpi):
    nn.distributed.init()
    aux = {"logits": f32(2, fill=1.0), "count": np.array(3), "name": "batch"}
    (value, got_aux), grads = nn.distributed.data_parallel(lambda: ((np.float32(1.0), aux), [f32(2)]), has_aux=True)()
    assert value == 2.0 and got_aux is aux and grads[0].tolist() == [2.0, 2.0]
    (value, got_aux), _ = nn.distributed.data_parallel(lambda: ((1.0, aux), [f32(2)]), has_aux=True,
                                                       average_aux=True)()
    assert value == 2.0 and isinstance(value, float)
    assert got_aux["logits"].tolist() == [2.0, 2.0] and got_aux["count"] is aux["count"] and got_aux["name"] == "batch"
    grads, got_aux = nn.distributed.data_parallel(lambda: ([f32(2)], aux), has_aux=True)()  # grad's form
    assert grads[0].tolist() == [2.0, 2.0] and got_aux is aux


def test_data_parallel_errors(fake_mpi):
    nn.distributed.init()
    with pytest.raises(TypeError, match=r"data_parallel: op='mean' needs floating-point values, got int64 at result\[1\]"):
        nn.distributed.data_parallel(lambda: (f32(1), np.arange(3)))()
    with pytest.raises(TypeError, match=r"has_aux=True\): the step must return .* got list"):
        nn.distributed.data_parallel(lambda: [f32(1)], has_aux=True)()
    with pytest.raises(TypeError, match="cannot reduce str"):
        nn.distributed.data_parallel(lambda: [f32(1), "x"])()
    with pytest.raises(TypeError, match="step must be callable"):
        nn.distributed.data_parallel(3)
    with pytest.raises(ValueError, match="bucket_bytes must be a positive integer"):
        nn.distributed.data_parallel(lambda: 1.0, bucket_bytes=0)


def test_all_reduce_ops(fake_mpi):
    nn.distributed.init()
    x = np.array([1.0, 5.0], "float32")  # the other process holds x + 2
    assert nn.distributed.all_reduce(x).tolist() == [2.0, 6.0]
    assert nn.distributed.all_reduce(x, op="sum").tolist() == [4.0, 12.0]
    assert nn.distributed.all_reduce(x, op="max").tolist() == [3.0, 7.0]
    assert nn.distributed.all_reduce(x, op="min").tolist() == [1.0, 5.0]
    assert x.tolist() == [1.0, 5.0]
    assert nn.distributed.all_reduce(np.array([1, 2]), op="sum").tolist() == [4, 6]
    assert nn.distributed.all_reduce(3, op="sum") == 8
    t = nn.distributed.all_reduce(tracer.tensor(x))
    assert isinstance(t, tracer.Tensor) and t.numpy().tolist() == [2.0, 6.0]
    with pytest.raises(ValueError, match="op must be one of mean, sum, max, min, got 'avg'"):
        nn.distributed.all_reduce(x, op="avg")
    with pytest.raises(TypeError, match=r"all_reduce: op='mean' needs floating-point values, got int64 at the top with shape \(2,\)"):
        nn.distributed.all_reduce(np.array([1, 2]))


def test_broadcast_parameters_overwrites_in_place(fake_mpi):
    fake_mpi.rank = 1  # root 0 holds 7 everywhere
    nn.distributed.init()
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    weight = model[0].weight
    nn.distributed.broadcast_parameters(model)
    assert model[0].weight is weight and all((p.numpy() == 7.0).all() for p in model.parameters())
    assert [c[0] for c in fake_mpi.calls] == ["Bcast"] and fake_mpi.calls[0][2] == 12 + 4 + 8 + 2
    arrays = [np.zeros(2), np.zeros((2, 2), "float32")]
    nn.distributed.broadcast_parameters(arrays, root=0)
    assert arrays[0].tolist() == [7.0, 7.0] and arrays[1].dtype == np.float32 and (arrays[1] == 7).all()
    with pytest.raises(ValueError, match=r"root must be a rank in 0\.\.1, got 2"):
        nn.distributed.broadcast_parameters(model, root=2)
    with pytest.raises(TypeError, match=r"cannot overwrite float at \[0\] in place"):
        nn.distributed.broadcast_parameters([1.0])


def test_broadcast_optimizer_state_from_root(fake_mpi):
    fake_mpi.rank = 1
    model = nn.Linear(2, 3)
    opt = nn.optim.Adam(model.parameters(), lr=0.5)  # no state yet on this process
    layout = [{"exp_avg": ((3, 2), "float32"), "exp_avg_sq": ((3, 2), "float32")},
              {"exp_avg": ((3,), "float32"), "exp_avg_sq": ((3,), "float32")}]
    fake_mpi.objects.append((layout, 0.01, 4))
    nn.distributed.init()
    nn.distributed.broadcast_parameters(opt)
    assert opt.lr == 0.01 and opt.step_count == 4
    assert opt.state[0]["exp_avg"].shape == (3, 2) and (opt.state[1]["exp_avg_sq"] == 7.0).all()
    assert [c[0] for c in fake_mpi.calls] == ["Bcast"]


# ------------------------------------------------------------ NCCL through a fake cupy
class FakeCupyArray(np.ndarray):
    """A NumPy array that calls itself CuPy's, with CuPy's `.data.ptr`."""

    @property
    def data(self):
        return types.SimpleNamespace(ptr=self.ctypes.data)


FakeCupyArray.__module__ = "cupy._core.core"


@pytest.fixture
def fake_cupy(monkeypatch):
    log = []

    class Communicator:
        def __init__(self, ndev, uid, rank):
            log.append(("init", ndev, uid, rank))

        def allReduce(self, send, recv, count, dtype, op, stream):
            log.append(("allReduce", send == recv, count, dtype, op, stream))

        def bcast(self, buf, count, dtype, root, stream):
            log.append(("bcast", count, dtype, root, stream))

    nccl = types.SimpleNamespace(available=True, get_unique_id=lambda: (1, 2, 3), NcclCommunicator=Communicator,
                                 NCCL_SUM="sum", NCCL_MAX="max", NCCL_MIN="min", NCCL_FLOAT32="f32",
                                 NCCL_FLOAT64="f64", NCCL_FLOAT16="f16", NCCL_INT32="i32", NCCL_INT64="i64",
                                 NCCL_UINT8="u8", NCCL_INT8="i8")
    device = types.SimpleNamespace(use=lambda: None)
    cuda = types.SimpleNamespace(
        nccl=nccl, runtime=types.SimpleNamespace(getDeviceCount=lambda: 2),
        Device=lambda i: log.append(("device", i)) or device,
        get_current_stream=lambda: types.SimpleNamespace(ptr=99))
    cupy = types.SimpleNamespace(cuda=cuda, empty=lambda n, dtype: np.empty(n, dtype).view(FakeCupyArray))
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    monkeypatch.setitem(sys.modules, "cupy.cuda", cuda)
    monkeypatch.setitem(sys.modules, "cupy.cuda.nccl", nccl)
    return log


def test_nccl_backend_on_one_process_is_a_single_rank_communicator(fake_cupy, monkeypatch):
    monkeypatch.setitem(sys.modules, "mpi4py", None)
    monkeypatch.setenv("MPI_LOCALRANKID", "3")  # local rank 3 on a machine with 2 GPUs: GPU 1
    nn.distributed.init(backend="nccl")
    assert fake_cupy[:2] == [("device", 1), ("init", 1, (1, 2, 3), 0)]
    x = np.array([1.0, 2.0, 3.0], "float32").view(FakeCupyArray)
    out = nn.distributed.all_reduce(x)
    assert type(out) is FakeCupyArray and out.tolist() == [1.0, 2.0, 3.0]
    assert fake_cupy[2:] == [("allReduce", True, 3, "f32", "sum", 99)]
    nn.distributed.all_reduce(np.ones(2))  # NumPy buffers stay on the host communicator
    assert len(fake_cupy) == 3
    nn.distributed.broadcast_parameters([np.ones(4, "float64").view(FakeCupyArray)])
    assert fake_cupy[3] == ("bcast", 4, "f64", 0, 99)


def test_cupy_buffers_on_mpi_get_an_nccl_communicator_on_first_use(fake_cupy, fake_mpi):
    fake_mpi.rank = 1
    fake_mpi.objects.append((7, 7))  # rank 0's NCCL id, sent over MPI
    nn.distributed.init()
    assert fake_cupy == []  # nothing on the GPU until a CuPy buffer comes
    step = nn.distributed.data_parallel(lambda: (np.float32(1), [np.ones(3, "float32").view(FakeCupyArray)]))
    step()
    assert fake_cupy[:2] == [("device", 0), ("init", 2, (7, 7), 1)]
    assert [e[0] for e in fake_cupy[2:]] == ["allReduce"] and [c[0] for c in fake_mpi.calls] == ["Allreduce"]
    with pytest.raises(TypeError, match="NCCL has no data type for complex64"):
        nn.distributed.all_reduce(np.ones(2, "complex64").view(FakeCupyArray), op="sum")
