"""DataLoader(num_workers=2) worker processes (issue 21 item 10), on tiny data: the batches (Tensors) and their
order equal num_workers=0's for map-style datasets (plain, shuffled, custom collate); worker_init_fn and
get_worker_info() run in each worker; an IterableDataset shards itself by worker id; persistent_workers keeps
the processes; a worker's exception is re-raised with its traceback; a worker that dies raises instead of
hanging."""
import os

import numpy as np
import pytest

import tracer
from nn.data import DataLoader, Dataset, IterableDataset, TensorDataset, get_worker_info


class Squares(Dataset):
    """Samples (i, i*i, pid of the process that loaded it); index `fail` raises, `die` ends the process."""

    def __init__(self, n=10, fail=None, die=None):
        self.n, self.fail, self.die = n, fail, die

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i == self.fail:
            raise KeyError(f"sample {i} is broken")
        if i == self.die:
            os._exit(7)
        info = get_worker_info()
        return np.float32(i), np.float32(i * i), -1 if info is None else info.id


class Stream(IterableDataset):
    def __iter__(self):
        info = get_worker_info()
        start, step = (0, 1) if info is None else (info.id, info.num_workers)
        return iter(range(start, 9, step))


def _values(loader):
    return [[np.asarray(t.numpy()).tolist() if isinstance(t, tracer.Tensor) else t for t in b] for b in loader]


@pytest.mark.parametrize("kwargs", [dict(batch_size=3), dict(batch_size=2, shuffle=True),
                                    dict(batch_size=None), dict(batch_size=4, drop_last=True)],
                         ids=["batched", "shuffled", "unbatched", "drop_last"])
def test_same_batches_in_the_same_order(kwargs):
    ds = TensorDataset(np.arange(20.0).reshape(10, 2), np.arange(10))
    g0, g2 = tracer.Generator().manual_seed(3), tracer.Generator().manual_seed(3)
    plain = _values(DataLoader(ds, generator=g0, **kwargs))
    workers = DataLoader(ds, num_workers=2, generator=g2, **kwargs)
    batches = list(workers)
    assert all(isinstance(t, tracer.Tensor) for b in batches for t in b)
    assert _values(batches) == plain
    assert len(batches) == len(workers)


def test_workers_run_init_fn_and_know_their_id():
    loader = DataLoader(Squares(), batch_size=2, num_workers=2, worker_init_fn=lambda i: np.random.seed(i))
    batches = list(loader)
    assert [b[0].numpy().tolist() for b in batches] == [[0, 1], [2, 3], [4, 5], [6, 7], [8, 9]]
    assert [b[2].numpy().tolist() for b in batches] == [[0, 0], [1, 1], [0, 0], [1, 1], [0, 0]]  # round-robin
    assert get_worker_info() is None


def test_iterable_dataset_sharded_by_worker():
    out = [int(b.numpy()[0]) for b in DataLoader(Stream(), batch_size=1, num_workers=2)]
    assert out == [0, 1, 2, 3, 4, 5, 6, 7, 8]  # worker 0: 0 2 4 6 8, worker 1: 1 3 5 7, taken in turn


def test_persistent_workers_keep_their_processes():
    class Pid(Squares):
        def __getitem__(self, i):
            return np.int64(os.getpid())
    loader = DataLoader(Pid(4), batch_size=1, num_workers=2, persistent_workers=True)
    first = {int(b.numpy()[0]) for b in loader}
    second = {int(b.numpy()[0]) for b in loader}
    assert first == second and len(first) == 2 and os.getpid() not in first
    fresh = DataLoader(Pid(4), batch_size=1, num_workers=2)
    assert {int(b.numpy()[0]) for b in fresh}.isdisjoint({int(b.numpy()[0]) for b in fresh} | first)


def test_worker_error_is_reraised_with_its_traceback():
    loader = DataLoader(Squares(fail=5), batch_size=2, num_workers=2)
    with pytest.raises(KeyError) as info:
        list(loader)
    text = str(info.value)
    assert "Caught KeyError in DataLoader worker process 0" in text
    assert "sample 5 is broken" in text and "__getitem__" in text  # the worker's traceback


def test_dead_worker_raises_instead_of_hanging():
    loader = DataLoader(Squares(die=3), batch_size=1, num_workers=2)
    with pytest.raises(RuntimeError, match=r"DataLoader worker \(pid \d+\) exited unexpectedly with exit code 7"):
        list(loader)
