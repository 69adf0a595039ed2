"""torch.utils.data's samplers: orders of sample indices (and batches of them) for a DataLoader.

Random orders come from a `generator=` (a tracer.Generator or a numpy Generator) or, without one, from the
global generator that `tracer.manual_seed` seeds; they are NumPy's permutations, not torch's.
"""
from __future__ import annotations

import math

import numpy as np

from tracer import rng as _rng


def _numpy_rng(generator) -> np.random.Generator:
    """A numpy Generator for one draw: the given one, or one seeded from the tracer.Generator / global."""
    if isinstance(generator, np.random.Generator):
        return generator
    if generator is None:
        return np.random.default_rng(int(_rng.draw_seed()))
    if isinstance(generator, _rng.Generator):
        return np.random.default_rng(int(generator.draw_seed()))
    raise TypeError(f"generator must be a tracer.Generator, a numpy Generator or None, got {type(generator).__name__}")


def _permutation(n: int, generator) -> np.ndarray:
    return _numpy_rng(generator).permutation(n)


def _positive_int(value, what: str, owner: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
        raise ValueError(f"{owner}: {what} should be a positive integer value, but got {what}={value!r}")
    return int(value)


class Sampler:
    """Base class: `__iter__` yields indices (or, for a batch sampler, lists of them); `__len__` where known."""

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__} must define __iter__")


class SequentialSampler(Sampler):
    """0, 1, ..., len(data_source) - 1."""

    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)


class RandomSampler(Sampler):
    """A fresh random order of the indices on every pass; with replacement, `num_samples` independent draws.
    Without replacement and num_samples > len(data_source), whole permutations follow each other (torch's rule).

    >>> import tracer
    >>> sorted(RandomSampler(range(5), generator=tracer.Generator(0)))
    [0, 1, 2, 3, 4]
    """

    def __init__(self, data_source, replacement: bool = False, num_samples: int | None = None, generator=None):
        if not isinstance(replacement, bool):
            raise TypeError("RandomSampler: replacement should be a boolean value, but got "
                            f"replacement={replacement!r}")
        self.data_source, self.replacement, self._num_samples, self.generator = \
            data_source, replacement, num_samples, generator
        _positive_int(self.num_samples, "num_samples", "RandomSampler")

    @property
    def num_samples(self) -> int:
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        n, count = len(self.data_source), self.num_samples
        g = _numpy_rng(self.generator)
        if self.replacement:
            return iter(g.integers(0, n, count).tolist())
        whole = [g.permutation(n) for _ in range(-(-count // n))] if n else [np.zeros(0, "int64")]
        return iter(np.concatenate(whole)[:count].tolist())

    def __len__(self) -> int:
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given indices in a fresh random order on every pass."""

    def __init__(self, indices, generator=None):
        self.indices, self.generator = indices, generator

    def __iter__(self):
        for i in _permutation(len(self.indices), self.generator).tolist():
            yield self.indices[i]

    def __len__(self) -> int:
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """`num_samples` indices drawn with probabilities proportional to `weights`."""

    def __init__(self, weights, num_samples: int, replacement: bool = True, generator=None):
        self.num_samples = _positive_int(num_samples, "num_samples", "WeightedRandomSampler")
        if not isinstance(replacement, bool):
            raise ValueError(f"WeightedRandomSampler: replacement should be a boolean value, but got {replacement!r}")
        w = np.asarray(weights, dtype="float64")
        if w.ndim != 1 or (w < 0).any() or not np.isfinite(w).all() or w.sum() <= 0:
            raise ValueError("WeightedRandomSampler: weights must be a 1-d sequence of finite, non-negative numbers "
                             "that are not all zero")
        if not replacement and num_samples > int((w > 0).sum()):
            raise ValueError("WeightedRandomSampler: without replacement num_samples cannot exceed the number of "
                             "non-zero weights")
        self.weights, self.replacement, self.generator = w, replacement, generator

    def __iter__(self):
        g = _numpy_rng(self.generator)
        p = self.weights / self.weights.sum()
        picks = g.choice(len(self.weights), self.num_samples, replace=self.replacement, p=p)
        return iter(picks.tolist())

    def __len__(self) -> int:
        return self.num_samples


class BatchSampler(Sampler):
    """Lists of `batch_size` indices from `sampler`; the last one shorter unless drop_last.

    >>> list(BatchSampler(SequentialSampler(range(5)), 2, drop_last=False))
    [[0, 1], [2, 3], [4]]
    """

    def __init__(self, sampler, batch_size: int, drop_last: bool):
        self.batch_size = _positive_int(batch_size, "batch_size", "BatchSampler")
        if not isinstance(drop_last, bool):
            raise ValueError(f"BatchSampler: drop_last should be a boolean value, but got drop_last={drop_last!r}")
        self.sampler, self.drop_last = sampler, drop_last

    def __iter__(self):
        batch = []
        for idx in self.sampler:
            batch.append(idx)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self) -> int:
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)


class DistributedSampler(Sampler):
    """This rank's part of the dataset, as torch's DistributedSampler: every `num_replicas`-th index of the
    pass's order starting at `rank`, the order padded by repeating its start to a multiple of num_replicas
    (or cut down to one with drop_last), so every rank takes as many steps. num_replicas and rank default
    to `nn.distributed.world_size()` and `rank()`. With shuffle, the order is a permutation seeded by
    `seed + epoch`, the same on every rank; call `set_epoch(epoch)` before each epoch to reshuffle.

    >>> [list(DistributedSampler(range(5), num_replicas=2, rank=r, shuffle=False)) for r in (0, 1)]
    [[0, 2, 4], [1, 3, 0]]
    """

    def __init__(self, dataset, num_replicas: int | None = None, rank: int | None = None, shuffle: bool = True,
                 seed: int = 0, drop_last: bool = False):
        if num_replicas is None or rank is None:
            from nn import distributed  # the world is joined only when a default is needed

            num_replicas = distributed.world_size() if num_replicas is None else num_replicas
            rank = distributed.rank() if rank is None else rank
        if rank >= num_replicas or rank < 0:
            raise ValueError(f"DistributedSampler: invalid rank {rank}, rank should be in the interval "
                             f"[0, {num_replicas - 1}]")
        self.dataset, self.num_replicas, self.rank = dataset, int(num_replicas), int(rank)
        self.shuffle, self.seed, self.drop_last, self.epoch = shuffle, int(seed), drop_last, 0
        n = len(dataset)
        if drop_last and n % self.num_replicas:
            self.num_samples = math.ceil((n - self.num_replicas) / self.num_replicas)
        else:
            self.num_samples = math.ceil(n / self.num_replicas)
        self.total_size = self.num_samples * self.num_replicas

    def __iter__(self):
        n = len(self.dataset)
        indices = (np.random.default_rng(self.seed + self.epoch).permutation(n).tolist() if self.shuffle
                   else list(range(n)))
        if not self.drop_last:
            pad = self.total_size - len(indices)
            if pad <= len(indices):
                indices += indices[:pad]
            else:
                indices += (indices * math.ceil(pad / len(indices)))[:pad]
        else:
            indices = indices[:self.total_size]
        return iter(indices[self.rank:self.total_size:self.num_replicas])

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        """Make the next pass's order the one of `epoch` (with shuffle, a permutation seeded by seed + epoch)."""
        self.epoch = epoch


__all__ = ["BatchSampler", "DistributedSampler", "RandomSampler", "Sampler", "SequentialSampler",
           "SubsetRandomSampler", "WeightedRandomSampler"]
