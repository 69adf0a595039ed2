"""torch.utils.data.DataLoader over tracegrad's datasets and samplers, yielding tracegrad Tensors."""
from __future__ import annotations

import numpy as np

from tracer import Tensor
from tracer.tensor import array_module_of

from .collate import _NO_ARRAY, default_collate, default_convert
from .dataset import IterableDataset, TensorDataset
from .sampler import BatchSampler, RandomSampler, SequentialSampler
from .workers import worker_batches


class DataLoader:
    """Batches of a dataset, with torch's signature, defaults, lengths and batch contents.

    Each `for` over the loader is a fresh pass (an epoch): with shuffle=True the RandomSampler draws a new
    order every pass, from `generator` (a tracer.Generator or numpy Generator) or, without one, from the
    global generator that `tracer.manual_seed` seeds. The orders are NumPy permutations, not torch's; with
    shuffle=False the batches are torch's exactly. `len(loader)` is the number of batches per pass.
    sampler, batch_sampler, drop_last, batch_size=None (no batching: each sample through default_convert)
    and IterableDataset follow torch's rules, including its errors for options that exclude each other.

    num_workers > 0 loads in worker processes (nn/data/workers.py: worker_init_fn, get_worker_info(),
    prefetch_factor, persistent_workers, timeout, multiprocessing_context as torch's; the batches in the order
    num_workers=0 gives; a worker's exception re-raised here with its traceback). pin_memory,
    pin_memory_device and in_order are accepted and have no effect here.

    >>> import numpy as np
    >>> from nn.data import TensorDataset
    >>> loader = DataLoader(TensorDataset(np.arange(10).reshape(5, 2), np.arange(5)), batch_size=2)
    >>> len(loader), [y.tolist() for _, y in loader]
    (3, [[0, 1], [2, 3], [4]])
    """

    def __init__(self, dataset, batch_size: int | None = 1, shuffle: bool | None = None, sampler=None,
                 batch_sampler=None, num_workers: int = 0, collate_fn=None, pin_memory: bool = False,
                 drop_last: bool = False, timeout: float = 0, worker_init_fn=None, multiprocessing_context=None,
                 generator=None, *, prefetch_factor: int | None = None, persistent_workers: bool = False,
                 pin_memory_device: str = "", in_order: bool = True):
        if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 0:
            raise ValueError("DataLoader: num_workers option should be non-negative; use num_workers=0 to disable "
                             "multiprocessing.")
        if timeout < 0:
            raise ValueError("DataLoader: timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("DataLoader: prefetch_factor option could only be specified in multiprocessing; let "
                             "num_workers > 0 to enable multiprocessing, otherwise set prefetch_factor to None.")
        if prefetch_factor is not None and prefetch_factor < 0:
            raise ValueError("DataLoader: prefetch_factor option should be non-negative")
        if persistent_workers and num_workers == 0:
            raise ValueError("DataLoader: persistent_workers option needs num_workers > 0")
        iterable = isinstance(dataset, IterableDataset)
        if iterable:
            for name, value in (("shuffle", shuffle), ("sampler", sampler), ("batch_sampler", batch_sampler)):
                if value not in (None, False):
                    raise ValueError(f"DataLoader with IterableDataset: expected unspecified {name} option, but "
                                     f"got {name}={value!r}")
        shuffle = bool(shuffle)
        if sampler is not None and shuffle:
            raise ValueError("DataLoader: sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("DataLoader: batch_sampler option is mutually exclusive with batch_size, shuffle, "
                                 "sampler, and drop_last")
            batch_size, drop_last = None, False
        elif batch_size is None and drop_last:
            raise ValueError("DataLoader: batch_size=None option disables auto-batching and is mutually exclusive "
                             "with drop_last")
        if sampler is None and not iterable:
            sampler = RandomSampler(dataset, generator=generator) if shuffle else SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None and not iterable:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        elif iterable and batch_size is not None:
            BatchSampler(range(0), batch_size, drop_last)  # the same checks of batch_size and drop_last
        self.dataset, self.batch_size, self.drop_last = dataset, batch_size, drop_last
        self.sampler, self.batch_sampler, self.generator = sampler, batch_sampler, generator
        self.num_workers, self.pin_memory, self.timeout = num_workers, pin_memory, timeout
        self.worker_init_fn, self.multiprocessing_context = worker_init_fn, multiprocessing_context
        self.prefetch_factor, self.persistent_workers = prefetch_factor, persistent_workers
        self.pin_memory_device, self.in_order = pin_memory_device, in_order
        self._workers = None  # the worker pool kept across passes with persistent_workers
        auto_collation = batch_sampler is not None or (iterable and batch_size is not None)
        self._auto_collation = auto_collation
        self.collate_fn = collate_fn if collate_fn is not None else (
            default_collate if auto_collation else default_convert)

    def __len__(self) -> int:
        if isinstance(self.dataset, IterableDataset):
            n = len(self.dataset)  # a TypeError when the stream has no length, as torch
            if self.batch_size is None:
                return n
            return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
        return len(self.batch_sampler if self._auto_collation else self.sampler)

    def __iter__(self):
        return _LoaderIter(self)


class _LoaderIter:
    """One pass: batches made on demand; `len()` as the loader's."""

    def __init__(self, loader: DataLoader):
        self._loader = loader
        iterable = isinstance(loader.dataset, IterableDataset)
        if loader.num_workers > 0:
            self._batches = worker_batches(loader, iterable)
        else:
            self._batches = _iterable_batches(loader) if iterable else _map_batches(loader)

    def __iter__(self):
        return self

    def __next__(self):
        return next(self._batches)

    def __len__(self) -> int:
        return len(self._loader)


def _map_batches(loader: DataLoader):
    dataset, collate = loader.dataset, loader.collate_fn
    if not loader._auto_collation:
        for index in loader.sampler:
            yield collate(dataset[index])
        return
    rows = collate is default_collate and type(dataset) is TensorDataset and all(
        isinstance(t, Tensor) or t.dtype.char not in _NO_ARRAY for t in dataset.tensors)
    getitems = getattr(dataset, "__getitems__", None)
    for indices in loader.batch_sampler:
        if rows:  # the same batch as stacking each sample's rows, in one indexing per tensor
            yield [_take_rows(t, indices) for t in dataset.tensors]
        elif getitems is not None:
            yield collate(getitems(indices))
        else:
            yield collate([dataset[i] for i in indices])


def _take_rows(t, indices) -> Tensor:
    data = t._concrete("DataLoader") if isinstance(t, Tensor) else t
    idx = np.asarray(indices, dtype="int64")
    if not isinstance(data, np.ndarray):
        idx = array_module_of(data).asarray(idx)
    return Tensor.wrap(data[idx])


def _iterable_batches(loader: DataLoader):
    collate, size = loader.collate_fn, loader.batch_size
    if size is None:
        for sample in loader.dataset:
            yield collate(sample)
        return
    batch = []
    for sample in loader.dataset:
        batch.append(sample)
        if len(batch) == size:
            yield collate(batch)
            batch = []
    if batch and not loader.drop_last:
        yield collate(batch)


__all__ = ["DataLoader"]
