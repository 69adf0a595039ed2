"""nn.distributed, issue 19 items 15-17, in one process against test_distributed.py's fake COMM_WORLD of 2
ranks: the start broadcast of data_parallel, the check of shapes before each reduction, None gradients on
some ranks only, and a failure on one rank reaching the other. test_distributed_failures.py runs the same
under `mpiexec -n 2`.

The fake's other rank holds `buf + 2` in every all-reduce (unless a test says otherwise), root 0's buffers
hold 7 in every broadcast seen from rank 1, and the other rank sends `other_object(obj)` in every allgather.
"""
import inspect
import io
import sys

import numpy as np
import pytest

import autodiff
import nn
import tracer
from nn.distributed.agree import Failed
from tests.nn.test_distributed import FakeCupyArray, fake_cupy, fake_mpi, fresh_world  # noqa: F401 (fixtures)

dist = nn.distributed


def _bn_model():
    nn.init.manual_seed(1)
    return nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Linear(4, 2))


# ---------------------------------------------------------------- 15: rank 0's weights when it is built
def test_data_parallel_broadcasts_parameters_and_buffers_when_built(fake_mpi):  # noqa: F811
    fake_mpi.rank = 1  # this is rank 1; rank 0 (root) holds 7 in every value
    model = _bn_model()
    step = autodiff.value_and_grad(lambda x: model(x).sum(), wrt=model.parameters())
    weight = model[0].weight
    dist.data_parallel(step)
    assert model[0].weight is weight  # overwritten in place: the optimizer's tensors are the same ones
    assert all((t.numpy() == 7).all() for t in [*model.parameters(), *model.buffers()])
    bcasts = [c for c in fake_mpi.calls if c[0] == "Bcast"]
    assert sum(c[2] for c in bcasts) == sum(t.numpy().size for t in [*model.parameters(), *model.buffers()])
    names = [name for name, _ in fake_mpi.gathered[0][1]]  # what the processes compared first
    assert names[:2] == ["model.0.weight", "model.0.bias"] and "model.1.running_var" in names


def test_frozen_parameters_and_a_model_held_by_an_object_are_broadcast_too(fake_mpi):  # noqa: F811
    fake_mpi.rank = 1

    class Trainer:
        def __init__(self):
            self.model = _bn_model()
            self.model[2].weight.requires_grad_(False)

        def loss(self, x):
            return self.model(x).sum()

    trainer = Trainer()
    dist.data_parallel(autodiff.grad(trainer.loss, wrt=trainer.model[0].parameters()))
    assert all((t.numpy() == 7).all() for t in [*trainer.model.parameters(), *trainer.model.buffers()])


def test_data_a_step_captures_is_not_broadcast(fake_mpi):  # noqa: F811
    # this process's shard, held by the function: it differs by design
    fake_mpi.rank = 1
    model = nn.Linear(3, 1)
    shard = tracer.tensor(np.full((5, 3), 2.0, "float32"))
    dist.data_parallel(autodiff.grad(lambda: model(shard).sum(), wrt=model.parameters()))
    assert (shard.numpy() == 2).all() and (model.weight.numpy() == 7).all()


def test_different_models_are_refused_when_built_naming_both_shapes(fake_mpi):  # noqa: F811
    def theirs(obj):  # rank 1 built Linear(2, 4) where rank 0 built Linear(3, 4)
        return [(name, ((4, 2), *s[1:]) if name == "model.0.weight" else s) for name, s in obj]

    fake_mpi.other_object = theirs
    model = _bn_model()
    with pytest.raises(ValueError, match=r"data_parallel: model\.0\.weight has shape \(4, 3\) float32 on rank 0 but "
                                         r"shape \(4, 2\) float32 on rank 1; every process must build the same model"):
        dist.data_parallel(autodiff.grad(lambda x: model(x).sum(), wrt=model.parameters()))
    assert not [c for c in fake_mpi.calls if c[0] == "Bcast"]  # nothing sent into mismatched buffers


def test_broadcast_parameters_checks_shapes_first(fake_mpi):  # noqa: F811
    fake_mpi.other_object = lambda obj: obj[:1]
    with pytest.raises(ValueError, match=r"broadcast_parameters: rank 0 has 2 values and rank 1 has 1; .* bias"):
        dist.broadcast_parameters(nn.Linear(3, 4))


def test_argnums_arguments_are_broadcast_on_the_first_call(fake_mpi):  # noqa: F811
    # JAX's form: the parameters are arguments, known only when the step is called
    fake_mpi.rank = 1

    class Step:
        argnums = 0

        def __call__(self, params, x):
            return 0.0, {k: np.ones_like(v) for k, v in params.items()}

    params = {"w": np.zeros((2, 2), "float32"), "b": np.zeros(2, "float32")}
    step = dist.data_parallel(Step())
    step(params, np.ones(3))
    assert (params["w"] == 7).all() and (params["b"] == 7).all()
    bcasts = len([c for c in fake_mpi.calls if c[0] == "Bcast"])
    params["w"][...] = 1.0
    step(params, np.ones(3))
    assert len([c for c in fake_mpi.calls if c[0] == "Bcast"]) == bcasts and (params["w"] == 1).all()  # first only


def test_argnums_python_numbers_must_agree(fake_mpi):  # noqa: F811
    class Step:
        argnums = (0,)

        def __call__(self, scale):
            return 0.0, [np.ones(2)]

    fake_mpi.other_object = lambda obj: [(n, ("number", 3.0)) for n, _ in obj]
    with pytest.raises(ValueError, match=r"argument 0 has the number 2\.0 on rank 0 but the number 3\.0 on rank 1"):
        dist.data_parallel(Step())(2.0)


# ---------------------------------------------------------------- 17: shapes checked before the all-reduce
def test_average_aux_with_an_uneven_last_batch_names_both_shapes(fake_mpi):  # noqa: F811
    def theirs(obj):  # rank 1's last batch holds 3 samples, not 8
        return [(n, ((3, 5), *s[1:]) if n == "aux" else s) for n, s in obj]

    fake_mpi.other_object = theirs
    model = nn.Linear(4, 5)
    step = dist.data_parallel(autodiff.value_and_grad(lambda x: (model(x).sum(), model(x)), wrt=model.parameters(),
                                                      has_aux=True), has_aux=True, average_aux=True)
    with pytest.raises(ValueError, match=r"data_parallel: aux has shape \(8, 5\) float32 on rank 0 but shape \(3, 5\) "
                                         r"float32 on rank 1; average_aux=True .* drop_last=True"):
        step(np.ones((8, 4), "float32"))
    assert not [c for c in fake_mpi.calls if c[0] == "Allreduce"]


def test_gradient_shapes_are_checked_too(fake_mpi):  # noqa: F811
    fake_mpi.other_object = lambda obj: [(n, ((2,), *s[1:]) if n == "result[1]" else s) for n, s in obj]
    with pytest.raises(ValueError, match=r"data_parallel: result\[1\] has shape \(3,\) float32 on rank 0 but shape "
                                         r"\(2,\) float32 on rank 1; every process must run the same model"):
        dist.data_parallel(lambda: [np.ones(2, "float32"), np.ones(3, "float32")])()


def test_all_reduce_checks_shapes(fake_mpi):  # noqa: F811
    fake_mpi.other_object = lambda obj: [(n, s and ((3,), *s[1:])) for n, s in obj]
    with pytest.raises(ValueError, match=r"all_reduce: \[1\] has shape \(2,\) float64 on rank 0 but shape \(3,\) "
                                         r"float64 on rank 1"):
        dist.all_reduce([None, np.ones(2)], "sum")


# ---------------------------------------------------------------- None gradients on some ranks only
def _none_on_rank_1(obj):
    return [(n, None if n == "result[1][0]" else s) for n, s in obj]


def test_a_gradient_none_on_this_rank_only_is_zeros_and_comes_back_averaged(fake_mpi):  # noqa: F811
    # rank 0's batch did not reach head 0, rank 1's did: every rank gets the same averaged array, as DDP
    fake_mpi.other_object = lambda obj: [(n, ((2, 3), "float32", "cpu", True) if n == "result[1][0]" else s)
                                         for n, s in obj]
    fake_mpi.other = lambda buf: buf * 0 + 4.0  # the other rank's gradients are all 4
    step = dist.data_parallel(lambda: (np.float32(1.0), [None, tracer.tensor(np.ones(3, "float32"))]))
    value, (g0, g1) = step()
    assert isinstance(g0, tracer.Tensor) and g0.shape == (2, 3)  # rank 1's form: a Tensor
    np.testing.assert_array_equal(g0.numpy(), np.full((2, 3), 2.0))  # (0 + 4) / 2: zero from this rank
    np.testing.assert_array_equal(g1.numpy(), np.full(3, 2.5))
    assert value == 2.5 and step.comm_stats.checks == 1
    fake_mpi.other_object = _none_on_rank_1  # the other way round: reduced here too, not handed back as it was
    got = dist.data_parallel(lambda: (np.float32(1.0), [tracer.tensor(np.ones(2, "float32"))]))()[1][0]
    np.testing.assert_array_equal(got.numpy(), [2.5, 2.5])


def test_a_gpu_gradient_none_here_is_cupy_zeros_in_the_nccl_all_reduce(fake_cupy, fake_mpi):  # noqa: F811
    fake_mpi.other_object = lambda obj: [(n, ((4,), "float32", "gpu", False)) for n, _ in obj]
    fake_mpi.objects.append((7, 7))  # rank 0's NCCL id, sent over MPI (this is rank 0 of the fake: unused)
    got = dist.data_parallel(lambda: [None])()[0]
    assert type(got) is FakeCupyArray and got.shape == (4,) and (got == 0).all()  # the fake NCCL adds nothing
    assert [e[0] for e in fake_cupy if e[0] == "allReduce"] == ["allReduce"] and not fake_mpi.calls


def test_none_everywhere_stays_none_and_max_refuses_a_none_on_one_rank(fake_mpi):  # noqa: F811
    assert dist.data_parallel(lambda: (np.float32(1.0), [None, np.ones(2, "float32")]))()[1][0] is None
    fake_mpi.other_object = lambda obj: [(n, ((2,), "float64", "cpu", False)) for n, _ in obj]
    assert dist.all_reduce([None], "sum")[0].tolist() == [2.0, 2.0]  # zeros here, + 2 there
    with pytest.raises(ValueError, match=r"all_reduce: \[0\] is None on rank 0 but has shape \(2,\) float64 on rank "
                                         r"1; op='max' has no neutral value"):
        dist.all_reduce([None], "max")


# ---------------------------------------------------------------- 16: one rank's exception reaches the others
def test_this_rank_raising_in_its_step_tells_the_other(fake_mpi):  # noqa: F811
    def step():
        raise ValueError("bad batch")

    with pytest.raises(ValueError, match="bad batch") as info:
        dist.data_parallel(step)()
    assert fake_mpi.gathered[-1][0] == Failed(0, "ValueError: bad batch")  # sent instead of the shapes
    assert "raised on rank 0 of 2; the other processes were told and raise too" in "".join(info.value.__notes__)
    assert not [c for c in fake_mpi.calls if c[0] == "Allreduce"]


def test_the_other_rank_raising_makes_this_one_raise_naming_it(fake_mpi):  # noqa: F811
    step = dist.data_parallel(lambda: (np.float32(1.0), [np.ones(2, "float32")]))
    fake_mpi.other_object = lambda obj: Failed(1, "ValueError: bad batch on rank 1")
    with pytest.raises(RuntimeError, match=r"data_parallel: rank 1 raised ValueError: bad batch on rank 1\. This "
                                           r"process \(rank 0 of 2\) stops as well"):
        step()
    assert not [c for c in fake_mpi.calls if c[0] == "Allreduce"]


def test_an_uncaught_exception_aborts_every_process(fake_mpi, monkeypatch):  # noqa: F811
    aborted = []
    fake_mpi.Abort = aborted.append
    dist.init()
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    try:
        raise KeyError("lost")
    except KeyError as e:
        sys.excepthook(type(e), e, e.__traceback__)
    assert aborted == [1]
    assert "nn.distributed: rank 0 of 2 stopped with an uncaught KeyError: 'lost'; aborting all 2 processes" in \
        err.getvalue()
    assert "Traceback" in err.getvalue()  # the default hook's report comes too
    hook = sys.excepthook
    dist.init(backend="mpi")  # a second world does not wrap the hook twice
    assert sys.excepthook is hook



def test_argnums_of_autodiff_value_and_grad(fake_mpi):  # noqa: F811
    if "argnums" not in inspect.signature(autodiff.value_and_grad).parameters:
        pytest.skip("autodiff.value_and_grad has no argnums= here")
    fake_mpi.rank = 1
    params = {"w": tracer.tensor(np.zeros((3, 1), "float32")), "s": 2.0}
    fake_mpi.other_object = lambda obj: obj  # rank 0 passes the same number s
    step = dist.data_parallel(autodiff.value_and_grad(lambda p, x: (x @ p["w"]).sum() * p["s"], argnums=0))
    loss, grads = step(params, np.ones((2, 3), "float32"))
    assert (params["w"].numpy() == 7).all()  # rank 0's, before the step ran
    assert float(loss) == pytest.approx((2 * 3 * 7 * 2.0 + (2 * 3 * 7 * 2.0 + 2)) / 2)
