"""Review of nn.distributed and batches(shard=): cases a user meets that the first tests missed.

The MPI cases run in one process against test_distributed.py's fake COMM_WORLD of 2 ranks, whose other
rank holds `buf + 2` in every all-reduce (so a mean is the local value + 1).
"""
import json

import numpy as np
import pytest

import autodiff
import nn
import tracer
from nn import functional as F
from tests.nn.test_distributed import fake_mpi, fresh_world  # noqa: F401 (fixtures)
from tests.nn.test_distributed_mpi import launch

dist = nn.distributed


def test_frozen_parameter_keeps_its_none_gradient(fake_mpi):  # noqa: F811
    nn.init.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
    frozen = list(model.parameters())[0].requires_grad_(False)
    assert frozen is list(model.parameters())[0]
    step = autodiff.value_and_grad(lambda x, y: F.cross_entropy(model(x), y), wrt=model.parameters())
    x, y = np.ones((5, 3), "float32"), np.zeros(5, "int64")
    loss, grads = step(x, y)
    dloss, dgrads = dist.data_parallel(step)(x, y)
    assert grads[0] is None and dgrads[0] is None  # as on one process: no gradient, no collective
    assert float(dloss) == pytest.approx(float(loss) + 1)
    for g, d in zip(grads[1:], dgrads[1:], strict=True):
        np.testing.assert_allclose(d.numpy(), g.numpy() + 1, rtol=1e-6)


def test_frozen_parameter_in_a_dict_of_gradients(fake_mpi):  # noqa: F811
    model = nn.Linear(3, 1)
    model.bias.requires_grad_(False)
    step = autodiff.grad(lambda x: model(x).sum(), wrt=dict(model.named_parameters()))
    x = np.full((2, 3), 2.0, "float32")
    plain, got = step(x), dist.data_parallel(step)(x)
    assert plain["bias"] is None and got["bias"] is None
    np.testing.assert_array_equal(got["weight"].numpy(), plain["weight"].numpy() + 1)


def test_grad_with_aux_and_a_scalar_parameter_first(fake_mpi):  # noqa: F811
    # grad(has_aux) returns (grads, aux); grads=(0-d, vector) looked like value_and_grad's ((value, aux), grads),
    # so the vector's gradient was taken for aux and left un-averaged: the ranks drifted apart
    s, v = tracer.tensor(np.float32(2.0)), tracer.tensor(np.ones(3, "float32"))
    step = dist.data_parallel(autodiff.grad(lambda x: ((s * v * x).sum(), x.sum()), wrt=(s, v), has_aux=True),
                              has_aux=True)
    (gs, gv), aux = step(np.ones(3, "float32"))
    assert float(gs) == 4.0  # 3 here, 5 on the other rank
    np.testing.assert_array_equal(gv.numpy(), [3.0, 3.0, 3.0])  # 2 here, 4 there
    assert float(aux) == 3.0  # this rank's own


def test_bool_values_are_refused_alike_on_one_and_two_processes(fake_mpi):  # noqa: F811
    # MPI has no SUM for booleans: refused up front with the op, not an MPI error stack from inside Allreduce
    with pytest.raises(TypeError, match=r"all_reduce: .*bool.*shape \(2,\)"):
        dist.all_reduce(np.array([True, False]), "sum")


def test_bool_values_are_refused_on_one_process():
    with pytest.raises(TypeError, match=r"all_reduce: .*bool"):
        dist.all_reduce(np.array([True, False]), "max")


def test_has_aux_form_is_checked_on_one_process_too():
    # a script that runs alone must not fail only once launched on two processes
    with pytest.raises(TypeError, match=r"data_parallel\(has_aux=True\)"):
        dist.data_parallel(lambda: [np.ones(2)], has_aux=True)()


def test_shuffled_shards_without_a_seed_are_refused():
    # each process would draw its own permutation: the shards would overlap and miss samples, silently
    with pytest.raises(ValueError, match=r"batches: shard=\(0, 2\) with shuffle=True needs a seed"):
        nn.data.batches(np.arange(10), 5, shard=(0, 2))


@pytest.mark.parametrize("kw", [dict(shuffle=False), dict(seed=3)])
def test_shards_without_shuffle_or_with_a_seed_are_fine(kw):
    per_rank = [[b[0].tolist() for b in nn.data.batches(np.arange(10), 5, shard=(r, 2), **kw)] for r in range(2)]
    assert sorted(sum(sum(per_rank, []), [])) == list(range(10))


def test_one_shard_shuffles_without_a_seed():
    got = [b[0].tolist() for b in nn.data.batches(np.arange(6), 6, shard=(0, 1))]
    assert sorted(got[0]) == list(range(6))


def test_all_reduce_keeps_none_leaves(fake_mpi):  # noqa: F811
    # Horovod-style averaging by hand of value_and_grad's gradients, one of them a frozen parameter's None
    got = dist.all_reduce([None, np.ones(2)])
    assert got[0] is None and got[1].tolist() == [2.0, 2.0]
    assert dist.all_reduce({"a": None})["a"] is None


def test_broadcast_parameters_of_a_module_sends_its_buffers(fake_mpi):  # noqa: F811
    # a checkpoint loaded on root only: BatchNorm's running statistics must reach the other processes too
    fake_mpi.rank = 1  # root 0 holds 7 everywhere
    model = nn.Sequential(nn.Linear(2, 3), nn.BatchNorm1d(3))
    dist.broadcast_parameters(model)
    assert all((p.numpy() == 7).all() for p in model.parameters())
    assert [n for n, _ in model.named_buffers()] == ["1.running_mean", "1.running_var", "1.num_batches_tracked"]
    assert all((b.numpy() == 7).all() for b in model.buffers())


def test_bucket_bytes_is_not_a_bool():
    with pytest.raises(ValueError, match=r"data_parallel: bucket_bytes must be a positive integer, got True"):
        dist.data_parallel(lambda: [np.ones(2)], bucket_bytes=True)



def test_bucket_boundaries(fake_mpi):  # noqa: F811
    big, a, b = np.zeros(1000), np.zeros(2), np.zeros(2)  # float64: 8000, 16, 16 bytes in 24-byte buckets
    step = dist.data_parallel(lambda: (0.0, [big, a, b]), bucket_bytes=24)
    value, (g_big, g_a, g_b) = step()
    # the value's 8 bytes, then the large one alone, then 16 + 16 > 24
    assert [c[2] for c in fake_mpi.calls] == [1, 1000, 2, 2]
    assert value == 1.0 and (g_big == 1).all() and g_a.tolist() == g_b.tolist() == [1.0, 1.0]
    empty = dist.data_parallel(lambda: (0.0, []))
    assert empty()[1] == [] and len(fake_mpi.calls) == 5  # the value alone: one more collective
    assert dist.all_reduce([]) == [] and len(fake_mpi.calls) == 5

# ---------------------------------------------------------------- the same under `mpiexec -n 2`
def test_under_mpiexec():
    out = launch(__file__, timeout=60)
    lines = [line for line in out.splitlines() if line.startswith("RESULT ")]
    assert len(lines) == 1, out
    r = json.loads(lines[0][len("RESULT "):])
    assert r["frozen"] == [None, 1.5]  # frozen weight: None; the bias gradients 1 and 2, averaged
    assert r["scalar_first"] == [1.5, 0.75, 0.0]  # both gradients averaged (1, 2 and 0.5, 1), aux rank 0's own
    assert r["buffers"] is True
    assert r["seed_none"].startswith("ValueError: batches: shard=(0, 2) with shuffle=True needs a seed")


def main():
    dist.init()
    rank = dist.rank()
    model = nn.Linear(2, 1)
    model.weight.requires_grad_(False)
    x = np.full((1, 2), rank + 1.0, "float32")
    grads = dist.data_parallel(autodiff.grad(lambda x: (model(x) * x.sum()).sum() / 2, wrt=model.parameters()))(x)
    frozen = [None if g is None else float(g.numpy().reshape(-1)[0]) for g in grads]
    s, v = tracer.tensor(np.float32(1.0)), tracer.tensor(np.ones(2, "float32"))
    step = dist.data_parallel(autodiff.grad(lambda x: ((s * v * x).sum() / 2, x.sum() * 0 + rank),
                                            wrt=(s, v), has_aux=True), has_aux=True)
    (gs, gv), aux = step(np.full(2, rank + 1.0, "float32"))
    nn.init.manual_seed(rank)
    bn = nn.Sequential(nn.Linear(2, 3), nn.BatchNorm1d(3))
    if rank == 0:
        bn[1].running_mean.copy_(tracer.tensor(np.arange(3.0, dtype="float32")))
    dist.broadcast_parameters(bn)
    same = all(bool((dist.all_reduce(b.numpy(), "max") == dist.all_reduce(b.numpy(), "min")).all())
               for b in [*bn.parameters(), *bn.buffers()])
    try:
        nn.data.batches(np.arange(10), 5, shard=(rank, 2))
        seed_none = "no error"
    except ValueError as e:
        seed_none = f"ValueError: {e}"
    if rank == 0:
        print("RESULT " + json.dumps({"frozen": frozen, "scalar_first": [float(gs), float(gv.numpy()[0]),
                                                                          float(aux)],
                                      "buffers": same and bn[1].running_mean.numpy().tolist() == [0, 1, 2],
                                      "seed_none": seed_none}), flush=True)


if __name__ == "__main__":
    main()
