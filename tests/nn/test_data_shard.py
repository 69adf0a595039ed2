"""nn.data.batches(shard=(rank, world_size)): torch DistributedSampler's split of each epoch's order."""
import numpy as np
import pytest

import nn


def shards(n, batch, world, **kw):
    """Per rank: its batches of sample indices."""
    return [[b[0].tolist() for b in nn.data.batches(np.arange(n), batch, shard=(r, world), **kw)]
            for r in range(world)]


@pytest.mark.parametrize("world", [2, 3])
def test_shards_make_the_one_process_batches(world):
    n, batch = 7 * 4 * world, 4
    single = [b[0].tolist() for b in nn.data.batches(np.arange(n), batch * world, seed=5)]
    per_rank = shards(n, batch, world, seed=5)
    assert all(len(p) == len(single) for p in per_rank)
    for k, whole in enumerate(single):  # batch k of every rank together is batch k of the one process
        parts = [p[k] for p in per_rank]
        assert sorted(sum(parts, [])) == sorted(whole)
        assert parts[1] == whole[1::world]  # strided, as DistributedSampler
    flat = [i for p in per_rank for b in p for i in b]
    assert sorted(flat) == list(range(n))  # disjoint and complete


def test_drop_last_cuts_the_tail_and_keeps_equal_step_counts():
    n, batch, world = 23, 3, 2
    single = [b[0].tolist() for b in nn.data.batches(np.arange(n), batch * world, seed=1, drop_last=True)]
    per_rank = shards(n, batch, world, seed=1, drop_last=True)
    assert [len(p) for p in per_rank] == [len(single)] * world == [3, 3]
    for k, whole in enumerate(single):
        assert sorted(per_rank[0][k] + per_rank[1][k]) == sorted(whole)


def test_without_drop_last_the_order_is_padded_from_its_start():
    per_rank = shards(5, 2, 3, shuffle=False)  # order 0..4 padded to 0 1 2 3 4 0
    assert per_rank == [[[0, 3]], [[1, 4]], [[2, 0]]]
    assert shards(5, 4, 2, shuffle=False) == [[[0, 2, 4]], [[1, 3, 0]]]  # every rank as many samples


def test_one_shard_is_the_plain_order():
    plain = [b[0].tolist() for b in nn.data.batches(np.arange(10), 3, seed=2)]
    assert shards(10, 3, 1, seed=2) == [plain]


def test_shard_keeps_arrays_aligned():
    x, y = np.arange(20).reshape(10, 2), np.arange(10)
    for bx, by in nn.data.batches((x, y), 2, seed=0, shard=(1, 2)):
        np.testing.assert_array_equal(bx[:, 0] // 2, by)


@pytest.mark.parametrize("shard", [(2, 2), (-1, 2), (0, 0), (0,), 3, (0.0, 2), (True, 2), "0,2"])
def test_bad_shard(shard):
    with pytest.raises(ValueError, match=r"batches: shard must be \(rank, world_size\) with 0 <= rank < world_size"):
        nn.data.batches(np.arange(4), 2, shard=shard)
