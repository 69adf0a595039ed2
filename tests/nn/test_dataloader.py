"""nn.data's DataLoader, datasets and samplers against torch.utils.data: batch contents, shapes, dtypes and
len() with shuffle=False (drop_last both ways, nested samples), fresh shuffles per epoch, torch's errors."""
import collections
import io

import numpy as np
import pytest

import nn
import tracer
from nn import data as D


def _plain(batch):
    """A batch (tracegrad or torch) as nested Python: (kind, dtype, shape, values) for tensors."""
    if isinstance(batch, tracer.Tensor):
        return ("tensor", batch.dtype, tuple(batch.shape), batch.numpy().tolist())
    if type(batch).__module__.startswith("torch") and hasattr(batch, "numpy"):
        return ("tensor", str(batch.dtype).removeprefix("torch."), tuple(batch.shape), batch.numpy().tolist())
    if isinstance(batch, (np.ndarray, np.generic)):
        return ("numpy", str(batch.dtype), batch.shape, batch.tolist())
    if isinstance(batch, dict):
        return (type(batch).__name__, {k: _plain(v) for k, v in batch.items()})
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):
        return (type(batch).__name__, [_plain(v) for v in batch])
    if isinstance(batch, (list, tuple)):
        return (type(batch).__name__, [_plain(v) for v in batch])
    return batch


Pair = collections.namedtuple("Pair", "a b")


class Nested:
    """Samples mixing every kind default_collate knows; the same class serves torch's loader."""

    def __init__(self, n=7):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        x = np.arange(6, dtype="float32").reshape(2, 3) + i
        return {"x": x, "y": i, "w": float(i) / 2, "flag": bool(i % 2), "name": f"s{i}",
                "pair": Pair(np.int16(i), [np.float64(i), np.arange(2) * i]),
                "tup": (np.uint8(i), np.array(i % 3, dtype="int32"))}


@pytest.mark.parametrize("batch_size,drop_last", [(1, False), (3, False), (3, True), (7, True), (10, True),
                                                  (None, False)])
def test_nested_batches_equal_torchs(batch_size, drop_last):
    torch = pytest.importorskip("torch")
    ours = D.DataLoader(Nested(), batch_size=batch_size, drop_last=drop_last)
    theirs = torch.utils.data.DataLoader(Nested(), batch_size=batch_size, drop_last=drop_last)
    assert len(ours) == len(theirs)
    got, want = [_plain(b) for b in ours], [_plain(b) for b in theirs]
    assert len(got) == len(ours)
    assert got == want


@pytest.mark.parametrize("drop_last", [False, True])
def test_tensor_dataset_batches_equal_torchs(drop_last):
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(0).normal(size=(11, 3)).astype("float32")
    y = np.arange(11)
    ours = D.DataLoader(D.TensorDataset(tracer.tensor(x), y), batch_size=4, drop_last=drop_last)
    theirs = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.tensor(x), torch.tensor(y)),
                                         batch_size=4, drop_last=drop_last)
    assert len(ours) == len(theirs) == (2 if drop_last else 3)
    assert [_plain(b) for b in ours] == [_plain(b) for b in theirs]
    # the one-indexing fast path gives what stacking sample by sample gives
    slow = D.DataLoader(D.TensorDataset(tracer.tensor(x), y), batch_size=4, drop_last=drop_last,
                        collate_fn=lambda b: D.default_collate(b))
    assert [_plain(b) for b in slow] == [_plain(b) for b in ours]


def test_subset_concat_and_random_split_follow_torchs_rules():
    torch = pytest.importorskip("torch")
    tds = torch.utils.data
    for lengths in ([0.5, 0.3, 0.2], [0.34, 0.33, 0.33], [0.25] * 4, [3, 7]):
        got = [len(s) for s in D.random_split(range(10), lengths, generator=tracer.Generator(0))]
        assert got == [len(s) for s in tds.random_split(range(10), lengths)]
    parts = D.random_split(range(10), [3, 7], generator=tracer.Generator(1))
    assert sorted(parts[0].indices + parts[1].indices) == list(range(10))
    again = D.random_split(range(10), [3, 7], generator=tracer.Generator(1))
    assert parts[0].indices == again[0].indices
    with pytest.raises(ValueError, match="sum of input lengths"):
        D.random_split(range(10), [3, 3])
    a, b = Nested(3), Nested(4)
    cat, tcat = D.ConcatDataset([a, b]), tds.ConcatDataset([a, b])
    assert cat.cumulative_sizes == tcat.cumulative_sizes and len(cat) == len(tcat) == 7
    for i in (0, 2, 3, 6, -1, -7):
        assert _plain(cat[i]) == _plain(tcat[i])
    with pytest.raises(IndexError):
        cat[7]
    with pytest.raises(ValueError, match="absolute value"):
        cat[-8]
    sub = D.Subset(Nested(), [5, 1, 3])
    assert [s["y"] for s in sub] == [5, 1, 3] and len(sub) == 3
    assert len(D.TensorDataset(np.zeros((4, 2))) + D.TensorDataset(np.zeros((2, 2)))) == 6
    with pytest.raises(ValueError, match="size mismatch"):
        D.TensorDataset(np.zeros(3), np.zeros(4))


def test_epochs_reshuffle_and_generators_repeat():
    data = D.TensorDataset(np.arange(20))
    loader = D.DataLoader(data, batch_size=5, shuffle=True)
    epochs = [np.concatenate([b[0].numpy() for b in loader]).tolist() for _ in range(3)]
    assert all(sorted(e) == list(range(20)) for e in epochs)
    assert len({tuple(e) for e in epochs}) == 3
    assert [len(list(loader)) for _ in range(2)] == [4, 4] and len(iter(loader)) == 4

    def orders(seed):
        loader = D.DataLoader(data, batch_size=5, shuffle=True, generator=tracer.Generator(seed))
        return [np.concatenate([b[0].numpy() for b in loader]).tolist() for _ in range(2)]

    assert orders(3) == orders(3) and orders(3) != orders(4)
    tracer.manual_seed(5)
    first = [b[0].tolist() for b in D.DataLoader(data, batch_size=20, shuffle=True)]
    tracer.manual_seed(5)
    assert [b[0].tolist() for b in D.DataLoader(data, batch_size=20, shuffle=True)] == first


def test_samplers_match_torchs_lengths_and_contents():
    torch = pytest.importorskip("torch")
    tds = torch.utils.data
    for n, bs, drop in [(10, 3, False), (10, 3, True), (9, 3, True), (2, 5, True)]:
        ours = D.BatchSampler(D.SequentialSampler(range(n)), bs, drop)
        theirs = tds.BatchSampler(tds.SequentialSampler(range(n)), bs, drop)
        assert list(ours) == list(theirs) and len(ours) == len(theirs)
    r = D.RandomSampler(range(6), num_samples=14, generator=tracer.Generator(0))
    drawn = list(r)
    assert len(drawn) == len(r) == 14 and sorted(drawn[:6]) == sorted(drawn[6:12]) == list(range(6))
    assert all(0 <= i < 6 for i in D.RandomSampler(range(6), replacement=True, num_samples=50))
    assert sorted(D.SubsetRandomSampler([4, 8, 9])) == [4, 8, 9]
    w = list(D.WeightedRandomSampler([0, 0, 1.0, 0], 5))
    assert w == [2] * 5
    loader = D.DataLoader(Nested(), sampler=D.SubsetRandomSampler([1, 3, 5]), batch_size=2)
    assert sorted(np.concatenate([b["y"].numpy() for b in loader]).tolist()) == [1, 3, 5] and len(loader) == 2
    bl = D.DataLoader(Nested(), batch_sampler=[[0, 6], [2]])
    assert [b["y"].tolist() for b in bl] == [[0, 6], [2]]


@pytest.mark.parametrize("n,world,drop_last", [(10, 3, False), (10, 3, True), (2, 5, False), (12, 4, True),
                                               (7, 2, False)])
def test_distributed_sampler_equals_torchs_without_shuffle(n, world, drop_last):
    torch = pytest.importorskip("torch")
    for rank in range(world):
        ours = D.DistributedSampler(range(n), num_replicas=world, rank=rank, shuffle=False, drop_last=drop_last)
        theirs = torch.utils.data.DistributedSampler(range(n), num_replicas=world, rank=rank, shuffle=False,
                                                     drop_last=drop_last)
        assert list(ours) == list(theirs) and len(ours) == len(theirs)


def test_distributed_sampler_shuffles_one_order_per_epoch_split_over_ranks():
    parts = [D.DistributedSampler(range(12), num_replicas=3, rank=r, seed=4) for r in range(3)]
    first = [list(p) for p in parts]
    assert sorted(sum(first, [])) == list(range(12))
    for p in parts:
        p.set_epoch(1)
    second = [list(p) for p in parts]
    assert sorted(sum(second, [])) == list(range(12)) and second != first
    assert [list(p) for p in parts] == second  # the epoch, not the call count, fixes the order
    default = D.DistributedSampler(range(5))  # nn.distributed's one process
    assert (default.num_replicas, default.rank) == (nn.distributed.world_size(), nn.distributed.rank())
    with pytest.raises(ValueError, match="invalid rank 3"):
        D.DistributedSampler(range(5), num_replicas=3, rank=3)


def test_torchs_option_errors():
    ds = Nested()
    for kwargs, match in [({"sampler": D.SequentialSampler(ds), "shuffle": True}, "mutually exclusive with shuffle"),
                          ({"batch_sampler": [[0]], "batch_size": 2}, "batch_sampler option"),
                          ({"batch_size": None, "drop_last": True}, "batch_size=None"),
                          ({"num_workers": -1}, "non-negative"),
                          ({"prefetch_factor": 2}, "prefetch_factor"),
                          ({"persistent_workers": True}, "persistent_workers"),
                          ({"batch_size": 0}, "positive integer")]:
        with pytest.raises(ValueError, match=match):
            D.DataLoader(ds, **kwargs)
    with pytest.raises(RuntimeError, match="equal size"):
        D.default_collate([[1, 2], [1]])
    with pytest.raises(TypeError, match="found"):
        D.default_collate([object(), object()])


def test_workers_keep_the_order_and_iterable_datasets_batch_in_order():
    calls = []  # worker_init_fn runs in each worker process (tests/nn/test_workers.py), not here
    loader = D.DataLoader(Nested(5), batch_size=2, num_workers=3, worker_init_fn=calls.append, pin_memory=True)
    assert [b["y"].tolist() for b in loader] == [[0, 1], [2, 3], [4]] and calls == []

    class Stream(D.IterableDataset):
        def __iter__(self):
            return iter(range(7))

        def __len__(self):
            return 7

    s = D.DataLoader(Stream(), batch_size=3, drop_last=True)
    assert [b.tolist() for b in s] == [[0, 1, 2], [3, 4, 5]] and len(s) == 2
    with pytest.raises(ValueError, match="IterableDataset"):
        D.DataLoader(Stream(), shuffle=True)


def test_progress_without_tqdm_prints_flushed_lines(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "tqdm", None)  # as if not installed
    out = io.StringIO()
    assert list(D.progress(range(5), desc="train", file=out, mininterval=0.0)) == list(range(5))
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("train: 1/5 (20%)") and lines[-1].startswith("train: 5/5 (100%)")
    assert len(lines) == 5
    out = io.StringIO()
    assert list(D.progress(iter([1, 2]), file=out)) == [1, 2]
    assert out.getvalue().startswith("2 ")


def test_progress_uses_tqdm_when_installed(monkeypatch):
    import sys
    import types

    seen = {}

    def fake_tqdm(iterable, **kwargs):
        seen.update(kwargs)
        return iter(iterable)

    monkeypatch.setitem(sys.modules, "tqdm", types.SimpleNamespace(tqdm=fake_tqdm))
    assert list(D.progress([3, 4], total=2, desc="x")) == [3, 4]
    assert seen["total"] == 2 and seen["desc"] == "x"
