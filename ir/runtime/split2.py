"""A second thread for NumPy calls that release the GIL: one call split in two halves, the second half on a
kept worker thread while the caller runs the first (issue 23, two threads).

NumPy computes a stack of small matrix products (attention's q @ k^T, p @ v and their gradients: (16, 4, 64,
32) @ (16, 4, 32, 64)) as one BLAS call per matrix, and OpenBLAS runs a product that small on the calling
thread: with two threads the stack still runs on one core. Its halves over the leading axis are independent
and NumPy's matmul releases the GIL, so `run(fn, first, second)` runs `second()` on the worker while the
caller runs `first()`: each matrix is the same BLAS call on the same operands, so the results are the same
bits as one call over the whole stack.

The count of threads comes from the environment as BLAS's does (NUMBA_NUM_THREADS, OPENBLAS_NUM_THREADS,
OMP_NUM_THREADS, MKL_NUM_THREADS, the first that is set, else the CPUs this process may run on); with one
thread nothing is ever split and no thread is started. The worker sleeps on a lock between calls (no
spinning: the cores stay free for OpenBLAS's and numba's threads) and is started at the first split; a child
forked after it started makes its own at its first split.
"""
from __future__ import annotations

import functools
import os
import threading
import time

# a call is split when its serial time is at least this many elements of output (float32, measured on the
# GPT's (16, 4, 64, 64) and (16, 4, 64, 32) stacks, 0.1-0.4 ms each at 1 thread): waking the worker costs
# tens of us, which a product of a few thousand elements does not pay for
MIN_SIZE = 1 << 16
_VARS = ("NUMBA_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


@functools.cache
def threads() -> int:
    """How many threads the split may use: the first of _VARS that is set to a count, else the usable CPUs."""
    for name in _VARS:
        try:
            n = int(os.environ.get(name, ""))
        except ValueError:
            continue
        if n >= 1:
            return n
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


class _Worker:
    """One daemon thread running one task at a time: `go` is released to start it, `done` when it ends."""

    def __init__(self):
        self.go = threading.Lock()
        self.done = threading.Lock()
        self.go.acquire()
        self.done.acquire()
        self.task = None
        self.error = None
        self.ended = 0  # tasks ended (counted before `done` is released: _retire waits by it)
        threading.Thread(target=self._loop, name="tracegrad-split2", daemon=True).start()

    def _loop(self):
        go, done = self.go, self.done
        while True:
            go.acquire()
            task = self.task
            if task is None:  # retired (_retire)
                return
            try:
                task()
            except BaseException as e:  # noqa: BLE001 - raised again on the calling thread
                self.error = e
            self.task = None
            self.ended += 1
            done.release()


_worker: _Worker | None = None
_lock = threading.Lock()  # one split at a time (a second caller thread runs its call whole)


def _reset_after_fork():
    global _worker, _lock
    _worker, _lock = None, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)


def _retire(w: _Worker, ended: int) -> None:
    """After a signal's exception (Ctrl-C) cut the wait for worker `w` short (inside `done.acquire()` or just
    after it took the lock: which one cannot be told): wait for its half by its count of ended tasks, since the
    caller may not go on while the worker still writes the call's arrays, then let it go and leave the next
    split a new worker (a `done` left released would have the next split return before its half ended)."""
    global _worker
    while w.ended < ended:
        try:
            time.sleep(1e-4)
        except BaseException:  # noqa: BLE001, S110 - another Ctrl-C: the first is raised, after the half ends
            pass
    _worker = None
    w.task = None
    w.go.release()  # its loop ends


def run(first, second) -> None:
    """first() on this thread and second() on the worker, at once; returns when both are done (an exception
    of either is raised here). When another thread is splitting already, both run here, one after the other."""
    global _worker
    if not _lock.acquire(blocking=False):
        first()
        second()
        return
    try:
        w = _worker
        if w is None:
            w = _worker = _Worker()
        w.task = second
        ended = w.ended + 1
        try:
            w.go.release()  # in the try: a signal's exception raised as this returns still waits for the half
            first()
        finally:  # the worker's half ends before this returns or raises (its error is never left for later)
            interrupt = None
            try:
                w.done.acquire()
            except BaseException as e:  # a signal's exception while waiting: raised once the half has ended
                interrupt = e
                _retire(w, ended)
            error, w.error = w.error, None
            if interrupt is not None:
                raise interrupt
        if error is not None:
            raise error
    finally:
        _lock.release()


__all__ = ["MIN_SIZE", "run", "threads"]
