"""Mini-batches of arrays, torch.utils.data's datasets, samplers and DataLoader, a progress helper, and the
small digits dataset that ships with tracegrad."""
from __future__ import annotations

import os

import numpy as np

from tracer import Tensor
from tracer.tensor import array_module_of

from . import dataloader, distributed  # noqa: F401  (torch.utils.data's module paths)
from .collate import default_collate, default_convert
from .dataset import ConcatDataset, Dataset, IterableDataset, Subset, TensorDataset, random_split
from .loader import DataLoader
from .progress import progress
from .sampler import (
    BatchSampler,
    DistributedSampler,
    RandomSampler,
    Sampler,
    SequentialSampler,
    SubsetRandomSampler,
    WeightedRandomSampler,
)
from .workers import WorkerInfo, get_worker_info


def batches(arrays, batch_size: int, shuffle: bool = True, seed: int | None = None, drop_last: bool = False,
            shard: tuple[int, int] | None = None) -> Batches:
    """Tuples of aligned batches from `arrays` (a tuple/list of arrays or Tensors sharing their first dimension,
    or one array), re-iterable as torch's DataLoader: each `for` over it is a fresh pass (an epoch), reshuffled
    when shuffle=True, and `len()` is the number of batches per pass. Each batch holds what it was given:
    a Tensor's rows as a Tensor (same dtype and device), an array's as an array. seed=None shuffles differently
    every pass; a seed fixes every pass's order: pass k's is a function of (seed, k) (pass 0's is
    `np.random.default_rng(seed).permutation(n)`), and `set_epoch(k)` picks the next pass's k, as torch's
    DistributedSampler. The last batch is smaller unless drop_last; the arguments are checked at once.

    shard=(rank, world_size) gives this process every world_size-th sample of the pass's order, starting
    at `rank`, as torch's DistributedSampler: with the same seed on every rank the shards are disjoint, and
    batch k of each rank together make batch k of batch_size * world_size in the one-process order. Every
    rank gets as many samples (so as many steps): drop_last drops the order's tail to a multiple of
    world_size (and each rank's last short batch), else the order is padded by repeating its start. With
    shuffle and several ranks a seed is required (ValueError without one); passes reshuffle from it.

    >>> x, y = np.arange(10).reshape(5, 2), np.arange(5)
    >>> loader = batches((x, y), 2, shuffle=False)
    >>> len(loader), [b[1].tolist() for b in loader], [b[1].tolist() for b in loader]   # every pass
    (3, [[0, 1], [2, 3], [4]], [[0, 1], [2, 3], [4]])
    >>> [b[1].tolist() for b in batches((x, y), 2, shuffle=False, shard=(1, 2))]   # padded with sample 0
    [[1, 3], [0]]
    """
    if isinstance(arrays, (np.ndarray, Tensor)):
        arrays = (arrays,)
    arrays = [a if isinstance(a, Tensor) else np.asarray(a) for a in arrays]
    for i, a in enumerate(arrays):
        if isinstance(a, Tensor):
            a._concrete(f"batches: array {i}")  # a traced value has no rows to hand out
    if not arrays:
        raise ValueError("batches: got no arrays")
    lengths = [len(a) if a.ndim else None for a in arrays]
    if None in lengths or len(set(lengths)) != 1:
        shapes = ", ".join(str(tuple(a.shape)) for a in arrays)
        raise ValueError(f"batches: the arrays must share their first dimension, got shapes {shapes}")
    whole = isinstance(batch_size, (int, np.integer)) and not isinstance(batch_size, bool) or \
        isinstance(batch_size, (float, np.floating)) and float(batch_size).is_integer()
    if not whole or batch_size < 1:
        raise ValueError(f"batches: batch_size must be a positive integer, got {batch_size!r}")
    if shard is not None:
        ok = isinstance(shard, (tuple, list)) and len(shard) == 2 and \
            all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in shard)
        if not ok or not 0 <= shard[0] < shard[1]:
            raise ValueError(f"batches: shard must be (rank, world_size) with 0 <= rank < world_size, got {shard!r}")
        if shuffle and seed is None and shard[1] > 1:  # each process would draw its own order: overlapping shards
            raise ValueError(f"batches: shard={tuple(shard)!r} with shuffle=True needs a seed, the same on every "
                             "process, so that the shards split one order (each pass reshuffles from it)")
    return Batches(arrays, int(batch_size), shuffle, seed, drop_last, shard)


class Batches:
    """What `batches` returns: a re-iterable, sized sequence of passes over the arrays (see `batches`)."""

    def __init__(self, arrays, batch_size: int, shuffle: bool, seed, drop_last: bool, shard):
        self.arrays, self.batch_size, self.shuffle, self.seed = arrays, batch_size, shuffle, seed
        self.drop_last, self.shard = drop_last, shard
        self.epoch = 0  # the next pass's number

    def set_epoch(self, epoch: int) -> None:
        """Make the next pass pass number `epoch` (its order is a function of (seed, epoch))."""
        if isinstance(epoch, bool) or not isinstance(epoch, (int, np.integer)) or epoch < 0:
            raise ValueError(f"batches.set_epoch: epoch must be an integer >= 0, got {epoch!r}")
        self.epoch = int(epoch)

    def _samples(self) -> int:
        n = len(self.arrays[0])
        if self.shard is not None:
            world = int(self.shard[1])
            n = (n - n % world if self.drop_last else -(-n // world) * world) // world
        return n

    def __len__(self) -> int:
        n = self._samples()
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def _order(self, epoch: int) -> np.ndarray:
        n = len(self.arrays[0])
        if not self.shuffle:
            return np.arange(n)
        seed = self.seed if self.seed is None or epoch == 0 else [self.seed, epoch]
        return np.random.default_rng(seed).permutation(n)

    def __iter__(self):
        epoch, self.epoch = self.epoch, self.epoch + 1
        order = self._order(epoch)
        if self.shard is not None:
            order = _shard(order, self.drop_last, self.shard)
        return _passes(self.arrays, order, self.batch_size, self.drop_last)

    def __repr__(self) -> str:
        return (f"batches({len(self.arrays)} arrays of {len(self.arrays[0])} rows, batch_size={self.batch_size}, "
                f"shuffle={self.shuffle}, seed={self.seed}, drop_last={self.drop_last}, shard={self.shard})")


def _shard(order: np.ndarray, drop_last: bool, shard) -> np.ndarray:
    """This rank's strided part of `order`, cut or padded to a multiple of world_size (DistributedSampler)."""
    rank, world = int(shard[0]), int(shard[1])
    if drop_last:
        order = order[:len(order) - len(order) % world]
    elif len(order) % world:
        order = np.resize(order, len(order) + world - len(order) % world)  # repeats from the start
    return order[rank::world]


def _rows(a, idx):
    """Rows idx of an array, or of a Tensor as a Tensor on its device (read now: in-place updates show)."""
    if not isinstance(a, Tensor):
        return a[idx]
    data = a._concrete("batches")
    if not isinstance(data, np.ndarray):
        idx = array_module_of(data).asarray(idx)
    return Tensor.wrap(data[idx])


def _passes(arrays, order: np.ndarray, batch_size: int, drop_last: bool):
    n = len(order)
    stop = n - n % batch_size if drop_last else n
    for start in range(0, stop, batch_size):
        idx = order[start:start + batch_size]
        yield tuple(_rows(a, idx) for a in arrays)


def load_digits(test_fraction: float = 0.2):
    """The UCI ML hand-written digits (1,797 images of 8x8 pixels, 10 classes), split deterministically.

    Returns ((x_train, y_train), (x_test, y_test)): images float32 (N, 8, 8) scaled to [0, 1], labels
    int64. The split is a fixed shuffle, the last `test_fraction` of it the test set.

    Data: "Optical Recognition of Handwritten Digits", E. Alpaydin and C. Kaynak (1998), UCI Machine
    Learning Repository, https://doi.org/10.24432/C50P49, licensed CC BY 4.0; the copy here is
    scikit-learn's `load_digits` (images 0..16) stored as uint8.

    >>> (xtr, ytr), (xte, yte) = load_digits()
    >>> xtr.shape, xte.shape, xtr.dtype, ytr.dtype, float(xtr.max())
    ((1438, 8, 8), (359, 8, 8), dtype('float32'), dtype('int64'), 1.0)
    """
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"load_digits: test_fraction must be in (0, 1), got {test_fraction}")
    with np.load(os.path.join(os.path.dirname(__file__), "digits.npz"), allow_pickle=False) as f:
        images, labels = f["images"], f["labels"]
    x = images.astype("float32") / 16.0
    y = labels.astype("int64")
    order = np.random.default_rng(0).permutation(len(y))
    n_test = int(round(len(y) * test_fraction))
    train, test = order[:-n_test], order[-n_test:]
    return (x[train], y[train]), (x[test], y[test])


__all__ = ["batches", "load_digits",
           "BatchSampler", "ConcatDataset", "DataLoader", "Dataset", "DistributedSampler", "IterableDataset",
           "RandomSampler", "Sampler", "SequentialSampler", "Subset", "SubsetRandomSampler", "TensorDataset",
           "WeightedRandomSampler", "default_collate", "default_convert", "progress", "random_split",
           "WorkerInfo", "get_worker_info"]
