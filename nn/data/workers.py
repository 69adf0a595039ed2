"""DataLoader worker processes (num_workers > 0), as torch's: each worker gets its own index queue, batches
are assigned round-robin and yielded in the sampler's order (a reorder buffer), `prefetch_factor` batches per
worker in flight; `worker_init_fn(worker_id)` and `get_worker_info()` in each worker; persistent_workers keeps
them across passes. An exception in a worker comes back as the same exception type with the worker's traceback
text; a worker that dies (a crash, os._exit, a kill) raises RuntimeError naming its pid and exit code instead of
hanging; `timeout` > 0 bounds the wait for one batch.

Batches cross the process boundary as NumPy arrays (tracer Tensors are turned into arrays in the worker and
back into Tensors here); with the default "fork" start method on Linux the dataset itself is inherited, not
pickled.
"""
from __future__ import annotations

import multiprocessing as mp
import queue
import random
import time
import traceback
from dataclasses import dataclass

import numpy as np

from tracer import Tensor

_POLL = 0.05  # seconds between checks that the workers are alive while waiting for a batch
_info = None  # this process's WorkerInfo, in a worker


@dataclass(frozen=True)
class WorkerInfo:
    """torch.utils.data.get_worker_info()'s record: id, num_workers, seed, dataset (this worker's copy)."""

    id: int
    num_workers: int
    seed: int
    dataset: object


def get_worker_info() -> WorkerInfo | None:
    """In a DataLoader worker, its WorkerInfo (an IterableDataset shards itself by id); None in the main process."""
    return _info


class _Wire:
    """A tracer Tensor's array on its way from a worker."""

    __slots__ = ("array",)

    def __init__(self, array):
        self.array = array


def _convert(obj, leaf):
    if isinstance(obj, (Tensor, _Wire)):
        return leaf(obj)
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*(_convert(v, leaf) for v in obj))
    if isinstance(obj, (list, tuple)):
        return type(obj)(_convert(v, leaf) for v in obj)
    if isinstance(obj, dict):
        return type(obj)((k, _convert(v, leaf)) for k, v in obj.items())
    return obj


def _to_wire(obj):
    return _convert(obj, lambda t: _Wire(np.asarray(t._concrete("DataLoader"))) if isinstance(t, Tensor) else t)


def _from_wire(obj):
    return _convert(obj, lambda w: Tensor.wrap(w.array) if isinstance(w, _Wire) else w)


class _Failure:
    """An exception raised in a worker: its type, message and formatted traceback."""

    def __init__(self, worker_id: int, exc: BaseException):
        self.worker_id, self.exc_type = worker_id, type(exc)
        self.text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))

    def reraise(self):
        msg = f"Caught {self.exc_type.__name__} in DataLoader worker process {self.worker_id}.\nOriginal {self.text}"
        try:
            exc = self.exc_type(msg)
        except Exception:  # a type whose constructor takes other arguments, as torch's fallback
            exc = RuntimeError(msg)
        raise exc


_DONE = "__iterable_exhausted__"


def _worker_loop(dataset, fetch, index_queue, result_queue, worker_id, num_workers, seed, init_fn):
    global _info
    _info = WorkerInfo(worker_id, num_workers, seed, dataset)
    random.seed(seed)
    try:
        import tracer

        tracer.manual_seed(seed % 2 ** 63)
        if init_fn is not None:
            init_fn(worker_id)
        state = fetch.start(dataset)
    except Exception as e:  # noqa: BLE001  (sent to the main process, which raises it)
        result_queue.put((None, _Failure(worker_id, e)))
        return
    while True:
        task = index_queue.get()
        if task is None:
            return
        idx, payload = task
        try:
            result_queue.put((idx, _to_wire(fetch.fetch(state, payload))))
        except StopIteration:
            result_queue.put((idx, _DONE))
        except Exception as e:  # noqa: BLE001
            result_queue.put((idx, _Failure(worker_id, e)))


class _Pool:
    """The worker processes of one loader: started once per pass, or once for all (persistent_workers)."""

    def __init__(self, loader, fetch):
        n = loader.num_workers
        ctx = loader.multiprocessing_context
        ctx = mp.get_context(ctx) if isinstance(ctx, str) or ctx is None else ctx
        # the workers' base seed is fresh entropy, not a draw from loader.generator (as torch's is): the
        # generator's next shuffle stays the one num_workers=0 gives
        seed = int(np.random.default_rng().integers(2 ** 62))
        self.result_queue = ctx.Queue()
        self.index_queues = [ctx.Queue() for _ in range(n)]
        self.workers = []
        for i in range(n):
            p = ctx.Process(target=_worker_loop, daemon=True,
                            args=(loader.dataset, fetch, self.index_queues[i], self.result_queue, i, n, seed + i,
                                  loader.worker_init_fn))
            p.start()
            self.workers.append(p)
        self.timeout = loader.timeout

    def get(self):
        """The next (task index, result) from any worker; raises when one died or the timeout passed."""
        start = time.monotonic()
        while True:
            try:
                return self.result_queue.get(timeout=_POLL)
            except queue.Empty:
                pass
            dead = [p for p in self.workers if not p.is_alive()]
            if dead:
                p = dead[0]
                self.shutdown()
                raise RuntimeError(f"DataLoader worker (pid {p.pid}) exited unexpectedly with exit code "
                                   f"{p.exitcode}. Details are lost due to multiprocessing.")
            if self.timeout and time.monotonic() - start > self.timeout:
                self.shutdown()
                raise RuntimeError(f"DataLoader timed out after {self.timeout} seconds")

    def shutdown(self) -> None:
        """Ask the workers to stop, terminate those that do not within a second; idempotent."""
        if not self.workers:
            return
        for q, p in zip(self.index_queues, self.workers, strict=True):
            if p.is_alive():
                try:
                    q.put(None)
                except (OSError, ValueError):
                    pass
        for p in self.workers:
            p.join(timeout=1.0)
            if p.is_alive():
                p.terminate()
                p.join(timeout=1.0)
        for q in [*self.index_queues, self.result_queue]:
            q.close()
            q.cancel_join_thread()
        self.workers = []


class _MapFetch:
    """Map-style: a task is a list of indices (auto-collation) or one index."""

    def __init__(self, collate, auto: bool):
        self.collate, self.auto = collate, auto

    def start(self, dataset):
        return dataset

    def fetch(self, dataset, payload):
        if not self.auto:
            return self.collate(dataset[payload])
        getitems = getattr(dataset, "__getitems__", None)
        return self.collate(getitems(payload) if getitems is not None else [dataset[i] for i in payload])


class _IterFetch:
    """IterableDataset: each worker iterates its own copy; a task asks for its next batch."""

    def __init__(self, collate, batch_size, drop_last: bool):
        self.collate, self.batch_size, self.drop_last = collate, batch_size, drop_last

    def start(self, dataset):
        return iter(dataset)

    def fetch(self, it, payload):
        if self.batch_size is None:
            return self.collate(next(it))
        batch = []
        for sample in it:
            batch.append(sample)
            if len(batch) == self.batch_size:
                return self.collate(batch)
        if batch and not self.drop_last:
            return self.collate(batch)
        raise StopIteration


def worker_batches(loader, iterable: bool):
    """One pass of batches produced by the loader's workers, in the order num_workers=0 gives."""
    if iterable:
        fetch = _IterFetch(loader.collate_fn, loader.batch_size, loader.drop_last)
        payloads = None
    else:
        fetch = _MapFetch(loader.collate_fn, loader._auto_collation)
        payloads = iter(loader.batch_sampler if loader._auto_collation else loader.sampler)
    pool = loader._workers if loader.persistent_workers and not iterable else None
    if pool is None:
        pool = _Pool(loader, fetch)
        if loader.persistent_workers and not iterable:
            loader._workers = pool
    try:
        yield from _drive(pool, payloads, loader.num_workers * (loader.prefetch_factor or 2), loader.num_workers)
    except BaseException:
        pool.shutdown()
        if loader._workers is pool:
            loader._workers = None
        raise
    if pool is not loader._workers:
        pool.shutdown()


def _drive(pool: _Pool, payloads, in_flight: int, n: int):
    active = list(range(n))  # workers that still produce (an iterable's worker drops out when exhausted)
    sent = next_out = 0
    buffer: dict[int, object] = {}
    cursor = 0

    def send() -> bool:
        nonlocal sent, cursor
        if not active:
            return False
        if payloads is None:
            payload = None
        else:
            payload = next(payloads, _DONE)
            if payload is _DONE:
                return False
        worker = active[cursor % len(active)]
        cursor += 1
        pool.index_queues[worker].put((sent, payload))
        owner[sent] = worker
        sent += 1
        return True
    owner: dict[int, int] = {}
    more = True
    while more and sent < in_flight:
        more = send()
    while next_out < sent:
        while next_out not in buffer:
            idx, data = pool.get()
            if isinstance(data, _Failure):
                data.reraise()
            buffer[idx] = data
        data = buffer.pop(next_out)
        next_out += 1
        if isinstance(data, str) and data == _DONE:
            w = owner[next_out - 1]
            if w in active:
                active.remove(w)
        else:
            yield _from_wire(data)
        if more:
            more = send()


__all__ = ["WorkerInfo", "get_worker_info", "worker_batches"]
