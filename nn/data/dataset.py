"""torch.utils.data's map-style datasets: Dataset, TensorDataset, Subset, ConcatDataset, random_split."""
from __future__ import annotations

import bisect
import math
import warnings

import numpy as np

from tracer import Tensor

from .sampler import _permutation


class Dataset:
    """A map-style dataset: `dataset[i]` is sample i and `len(dataset)` their number (subclasses define
    both, as torch's). `a + b` is `ConcatDataset([a, b])`."""

    def __getitem__(self, index):
        raise NotImplementedError(f"{type(self).__name__} must define __getitem__")

    def __add__(self, other: Dataset) -> ConcatDataset:
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    """A stream of samples: subclasses define `__iter__`; a DataLoader batches them in order (no sampler)."""

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__} must define __iter__")

    def __getitem__(self, index):
        raise TypeError(f"{type(self).__name__} is an IterableDataset: it has no indexing, only iteration")


def _rows_of(t):
    return len(t) if getattr(t, "ndim", 1) else None


class TensorDataset(Dataset):
    """Samples are `tuple(t[i] for t in tensors)`: Tensors or arrays sharing their first dimension.

    >>> import numpy as np
    >>> ds = TensorDataset(np.arange(6).reshape(3, 2), np.array([7, 8, 9]))
    >>> len(ds), [a.tolist() for a in ds[1]]
    (3, [[2, 3], 8])
    """

    def __init__(self, *tensors):
        tensors = tuple(t if isinstance(t, Tensor) else np.asarray(t) for t in tensors)
        sizes = [_rows_of(t) for t in tensors]
        if None in sizes or len(set(sizes)) > 1:
            raise ValueError("TensorDataset: size mismatch between tensors: first dimensions "
                             + ", ".join(str(s) for s in sizes))
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self) -> int:
        return _rows_of(self.tensors[0]) if self.tensors else 0


class Subset(Dataset):
    """The samples of `dataset` at `indices`, in that order (`subset[i]` is `dataset[indices[i]]`)."""

    def __init__(self, dataset, indices):
        self.dataset, self.indices = dataset, indices

    def __getitem__(self, idx):
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __len__(self) -> int:
        return len(self.indices)


class ConcatDataset(Dataset):
    """The datasets one after another; `cumulative_sizes` holds the running totals, as torch's."""

    def __init__(self, datasets):
        self.datasets = list(datasets)
        if not self.datasets:
            raise ValueError("ConcatDataset: datasets should not be an empty iterable")
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise TypeError("ConcatDataset does not support IterableDataset")
        self.cumulative_sizes = list(np.cumsum([len(d) for d in self.datasets]).tolist())

    def __len__(self) -> int:
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx):
        if idx < 0:
            if -idx > len(self):
                raise ValueError("ConcatDataset: absolute value of index should not exceed dataset length")
            idx = len(self) + idx
        if idx >= len(self):
            raise IndexError(f"ConcatDataset: index {idx} out of range for {len(self)} samples")
        which = bisect.bisect_right(self.cumulative_sizes, idx)
        start = self.cumulative_sizes[which - 1] if which else 0
        return self.datasets[which][idx - start]


def random_split(dataset, lengths, generator=None) -> list[Subset]:
    """Split `dataset` into non-overlapping Subsets of the given lengths, or of fractions summing to 1
    (floor(n * f) each, the remainder handed out one by one from the first split, as torch). The order
    is a random permutation from `generator` (a tracer.Generator or numpy Generator; None: the global
    generator that tracer.manual_seed seeds); it is not torch's permutation.

    >>> [len(s) for s in random_split(range(10), [0.5, 0.3, 0.2])], [len(s) for s in random_split(range(5), [0.5, 0.5])]
    ([5, 3, 2], [3, 2])
    """
    lengths = list(lengths)
    n = len(dataset)
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        sizes = []
        for i, frac in enumerate(lengths):
            if frac < 0 or frac > 1:
                raise ValueError(f"random_split: fraction at index {i} is not between 0 and 1")
            sizes.append(int(math.floor(n * frac)))
        for i in range(n - sum(sizes)):
            sizes[i % len(sizes)] += 1
        for i, size in enumerate(sizes):
            if size == 0:
                warnings.warn(f"Length of split at index {i} is 0. This might result in an empty dataset.",
                              stacklevel=2)
        lengths = sizes
    if sum(lengths) != n:
        raise ValueError(f"random_split: sum of input lengths ({sum(lengths)}) does not equal the length of the "
                         f"input dataset ({n})")
    order = _permutation(sum(lengths), generator).tolist()
    out, start = [], 0
    for size in lengths:
        out.append(Subset(dataset, order[start:start + size]))
        start += size
    return out


__all__ = ["ConcatDataset", "Dataset", "IterableDataset", "Subset", "TensorDataset", "random_split"]
