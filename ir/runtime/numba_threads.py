"""How many threads the numba kernels' `prange` forms use, and the thread pool they run on.

The count comes from the same environment as BLAS's: NUMBA_NUM_THREADS if set, else the first of
OPENBLAS_NUM_THREADS, OMP_NUM_THREADS, MKL_NUM_THREADS that is set, else numba's own default (the CPU
count). With one thread only the serial kernels run (no pool is ever started); with more, an array of at
least `PARALLEL_SIZE` elements runs the `prange` form.

The pool: numba's default threading layer here is OpenMP (GNU libgomp; TBB is not installed), whose
threads spin after each parallel loop, and OpenBLAS's threads spin after each GEMM. A step alternating the
two then has each pool's spinning threads take the cores the other needs: benchmarks/numba_threads.py
measured a GEMM + elementwise pair at 6.5x the 1-thread time on 2 threads with the default layer. So,
unless the user chose a layer or a wait policy, the pool is started here with OMP_WAIT_POLICY=PASSIVE
(libgomp reads it once, when it loads; the variable is restored afterwards): idle threads sleep at once.
"""
from __future__ import annotations

import functools
import os
import sys

# from here, with more than one thread, the prange loop runs. `python -m benchmarks.numba_threads --forms` on
# 2 threads (layer_norm, softmax, a GELU chain, each after a GEMM; 4 runs on the shared 2-core machine): at
# 65536 elements the prange form is slower at the median in every run (0.57-0.84x) and at best 0.7-1.3x, at
# 131072 best 0.8-1.8x, median 0.7-1.3x; from 262144 softmax and GELU are at best 1.5-1.7x faster in every run
# (layer_norm, cheaper per element, 0.9-1.5x). Waking the second thread costs tens of us; it pays for a
# kernel of a few hundred us of serial work
PARALLEL_SIZE = 1 << 18
# a layer norm's row kernels (forward, dx, dgamma) count each element this many times against PARALLEL_SIZE
# (they read a row two or three times: statistics, then the result)
ROW_WEIGHT = 1
_BLAS_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def _count(name: str) -> int | None:
    try:
        n = int(os.environ.get(name, ""))
    except ValueError:
        return None
    return n if n >= 1 else None


@functools.cache
def threads() -> int:
    """The kernels' thread count (NUMBA_NUM_THREADS, else BLAS's variables, else numba's default)."""
    n = _count("NUMBA_NUM_THREADS")
    if n is None:
        n = next((c for c in map(_count, _BLAS_VARS) if c is not None), None)
    import numba

    limit = numba.config.NUMBA_NUM_THREADS  # the pool's size, fixed when numba was imported
    n = limit if n is None else min(n, limit)
    if n > 1:
        _start_pool(n)
    return n


def _start_pool(n: int) -> None:
    from numba.np.ufunc import parallel

    quiet = "OMP_WAIT_POLICY" not in os.environ and "GOMP_SPINCOUNT" not in os.environ
    quiet = quiet and "NUMBA_THREADING_LAYER" not in os.environ and "libgomp" not in _loaded()
    if quiet:
        os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_in_child)
    try:
        parallel._launch_threads()
    finally:
        if quiet:
            del os.environ["OMP_WAIT_POLICY"]
    import numba

    numba.set_num_threads(n)


def _loaded() -> str:
    """The shared libraries mapped into this process (Linux), or '' where that cannot be read."""
    if not sys.platform.startswith("linux"):
        return ""
    try:
        with open("/proc/self/maps") as f:
            return f.read()
    except OSError:
        return ""


def use_parallel(size: int, rows: bool = False) -> bool:
    """Whether a kernel over `size` elements should run its prange form (`rows`: a layer norm's row kernel, whose
    elements count ROW_WEIGHT times)."""
    return size * (ROW_WEIGHT if rows else 1) >= PARALLEL_SIZE and not _forked and threads() > 1


# GNU OpenMP is not fork-safe: a prange loop in a child forked after the pool started kills the child
# ("Terminating: fork() called from a process already using GNU OpenMP"). So from such a fork on, the child
# runs the serial forms, also of the kernels chosen before the fork (`fork_safe`).
_forked = False


def _in_child() -> None:
    global _forked
    _forked = True


def fork_safe(serial, parallel):
    """`parallel` (a prange kernel chosen by use_parallel), run as `serial` in a child forked after the thread
    pool started; `py_func` is the parallel kernel's."""
    def run(*args):
        return (serial if _forked else parallel)(*args)
    run.py_func = parallel.py_func
    return run


__all__ = ["PARALLEL_SIZE", "ROW_WEIGHT", "fork_safe", "threads", "use_parallel"]
