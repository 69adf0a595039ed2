"""Where the NumPy executor takes numba kernels (the `fast` extra), and the switch that keeps NumPy's.

With numba installed and TRACEGRAD_KERNELS not "numpy", `fused` chains run as generated numba loops
(ir.runtime.numba_gen) and softmax, log_softmax, layer_norm and GELU bindings of float32 as numba kernels
(ir.runtime.numba_composite; the tanh GELU of float32 and the backward chains through ir.runtime.vjp_chains,
which ir.runtime.specialize asks first); ir.runtime.fused_cpu and ir.runtime.specialize call `fused_kernel`,
`into` and `specialize` here. Chains and ops the kernels do not cover, small arrays and CuPy keep the NumPy path.

Tiered start-up, as JIT runtimes do it: numba's import and its first dispatch cost most of a second, so numba
is never on a first call's path. `ready()` is the non-blocking question "may numba kernels be used now"; its
first asking starts a background thread that imports numba and loads (or compiles) every kernel asked for
meanwhile (`prepare`), and it answers True once that is done. A compiled function's first call runs before
the load starts (the executor starts it when that call ends: it runs alone, on NumPy's kernels). Until the
load is done the plain NumPy kernels run: a compiled function whose kernels waited is made again once, at
its first call after `ready()` turned true (ir.runtime.executor), and the per-call kernels (fused chains,
SGD's loop) choose at each call. So the first steps of a training loop run on NumPy and the later ones on
numba; the two give the same values to float rounding (the numba kernels are within 1e-6 relative of
NumPy's). The load holds the GIL for most of its CPU time (about 0.6-1 s: numba's import and its first
dispatch), so the steps that overlap it run slower; while it runs Python switches threads every
`SWITCH_INTERVAL` seconds instead of 5 ms, so the main thread waits little for the GIL after each NumPy
kernel. (A lower OS priority for the thread was measured worse: a preempted loader holding the GIL stalls
the main thread.)

TRACEGRAD_KERNELS (read when `ir` is imported):
  unset or "numba"   tiered: NumPy kernels first, numba's once loaded in the background;
  "numba-sync"       numba's kernels from the first call (the import and loading on the caller's thread, as
                     before the tiers; deterministic kernels from step 1; the test suite sets it);
  "numpy"            the plain NumPy path, numba never imported.
"""
from __future__ import annotations

import functools
import importlib.util
import math
import os
import sys
import threading
import time
import warnings

import numpy as np

from ..ops.fused import Leaf, Node
from ..types import TensorType

SWITCH_INTERVAL = 5e-5  # s between GIL hand-overs while numba loads in the background (Python default: 5 ms)
# the thread sleeps this long before the import: a call that asked near its end (an optimizer's first step
# asks for SGD's loop) finishes alone
START_DELAY = 0.05


def _mode() -> str:
    return os.environ.get("TRACEGRAD_KERNELS", "").strip().lower()


def wanted() -> bool:
    """True when numba is installed and TRACEGRAD_KERNELS does not ask for the NumPy kernels."""
    if _mode() == "numpy":
        return False
    return importlib.util.find_spec("numba") is not None


ENABLED = wanted()
SYNC = _mode() == "numba-sync"  # load on the asking thread: numba's kernels from the first call
if _mode() not in ("", "numba", "numba-sync", "numpy"):  # "off", "0" or a typo would run numba's kernels unsaid
    warnings.warn(f"TRACEGRAD_KERNELS={os.environ['TRACEGRAD_KERNELS']!r} is none of 'numba', 'numba-sync', 'numpy': "
                  "read as unset (numba's tiered kernels where numba is installed; 'numpy' for the plain NumPy path)",
                  RuntimeWarning, stacklevel=2)
loaded = False  # numba imported and every kernel prepared so far loaded: ready() answers True from here
waits = 0  # how often ready() answered False while numba was wanted (a compiled function compares it)
failed: BaseException | None = None  # numba's import failed: the NumPy kernels stay
_lock = threading.RLock()
_queue: list = []  # the prepared kernels' loaders, run on the background thread before `loaded`
_queued: set = set()
_thread: threading.Thread | None = None
hold = 0  # > 0 while the executor compiles: an asking then waits for start() after the first call, not at once


def ready() -> bool:
    """Whether numba kernels may be used now: the fast extra installed, not switched off, numba imported and the
    kernels asked for so far loaded. Never blocks (but under TRACEGRAD_KERNELS=numba-sync, where its first
    asking loads numba on this thread); its first asking starts the background load."""
    return ENABLED and (loaded or _not_yet())


def _not_yet() -> bool:
    global waits
    if failed is not None:
        return False
    if SYNC:
        with _lock:
            if not loaded:
                _load()
        return loaded
    if _thread is None and not hold:
        start()
    waits += 1
    return False


def prepare(key, loader) -> None:
    """Have `loader()` (which makes a kernel and runs it once, so numba loads or compiles its machine code) run
    on the background thread before ready() turns true; once per hashable `key`. Callers ask ready() first:
    once it is true they make the kernel themselves (from the caches this filled)."""
    if loaded or key in _queued:
        return
    with _lock:
        if not loaded and key not in _queued:
            _queued.add(key)
            _queue.append(loader)


def wait(timeout: float | None = None) -> bool:
    """Block until the background load, if one started, is done (or `timeout` seconds have passed); then whether
    numba's kernels are ready. For benchmarks and tests that time or check the numba tier; a training loop never
    needs it, and a process that never asked for numba's kernels starts no load here."""
    thread = _thread
    if thread is not None and thread is not threading.current_thread():
        thread.join(timeout)
    return ENABLED and loaded


def start() -> None:
    """Start the background load if numba is wanted and it has not started (the executor calls it after the
    first call of a function whose kernels waited: that call then ran alone on NumPy's kernels)."""
    global _thread
    if _thread is not None or not ENABLED or SYNC or loaded or failed is not None:
        return
    # A fork waits for the load (_join_before_fork). Fork handlers run newest first, so this one is registered
    # here, after logging's (numba's import needs logging's lock, which logging's handler holds across a fork;
    # imported by the load while a fork waited, logging's after-fork handler would release a lock never taken)
    import logging  # noqa: F401
    with _lock:
        if _thread is None:
            if hasattr(os, "register_at_fork"):
                os.register_at_fork(before=_join_before_fork)
            _thread = threading.Thread(target=_background, name="tracegrad-numba-load", daemon=True)
            _thread.start()


def _background() -> None:
    time.sleep(START_DELAY)
    old = sys.getswitchinterval()
    sys.setswitchinterval(min(old, SWITCH_INTERVAL))
    try:
        _load()
    finally:
        sys.setswitchinterval(old)


def _load() -> None:
    """Import numba and run the prepared loaders until none is left, then set `loaded` (under the lock, so a
    kernel prepared meanwhile is either run here or made by its caller after ready())."""
    global loaded, failed
    try:
        import numba  # noqa: F401

        from .numba_threads import threads
        threads()
    except Exception as e:  # noqa: BLE001 - a broken numba install: warn once, keep NumPy's kernels
        failed = e
        warnings.warn(f"tracegrad: numba could not be imported ({e!r}); the NumPy kernels run", RuntimeWarning,
                      stacklevel=2)
        return
    while True:
        with _lock:
            if not _queue:
                loaded = True
                return
            loader = _queue.pop(0)
        try:
            loader()
        except Exception:  # noqa: BLE001, S110 - the caller makes this kernel again after ready() and meets it there
            pass


def _join_before_fork() -> None:
    # a fork while the load holds the import machinery's locks would leave the child a half-imported numba
    thread = _thread
    if thread is not None and thread.is_alive() and thread is not threading.current_thread():
        thread.join()



def _runner(expr, xs):
    from . import numba_gen

    if max(x.size for x in xs) < numba_gen.MIN_SIZE:
        return None
    sig = numba_gen.signature(xs)
    if not ready():
        prepare(("chain", expr, sig), functools.partial(_load_chain, expr, sig))
        return None
    return numba_gen.chain_runner(expr, sig)


def _load_chain(expr, sig):
    from .numba_gen import chain_runner

    run = chain_runner(expr, sig)
    if run is not None:
        run([np.zeros(s, d) for s, d in sig])


def fused_kernel(fallback):
    """The `fused` op's kernel: the chain's numba loop where there is one, else `fallback` (NumPy's)."""
    def kernel(xp, xs, expr):
        run = _runner(expr, xs) if xp is np and xs else None
        return fallback(xp, xs, expr) if run is None else run(xs)
    return kernel


def into(xs, expr, k):
    """The chain written into input k's buffer (it dies here) by its numba loop, or None for NumPy's path."""
    run = _runner(expr, xs) if xs else None
    if run is None:
        return None
    kw = run.keywords
    x = xs[k]
    fits = x.shape == kw["out_shape"] and x.dtype == kw["dtype"]
    return run(xs, out=x if fits else None)


def specialize(call):
    """A numba kernel of the arrays alone for a float32 softmax, log_softmax, layer_norm or GELU binding; None
    for NumPy's, also while numba loads (ready() false: the kernel is prepared for the executor's re-make)."""
    if call.op not in ("nn.gelu", "nn.softmax", "nn.log_softmax", "nn.layer_norm"):
        return None
    types = [a.type for a in call.args]
    out = call.type
    if not isinstance(out, TensorType) or not all(isinstance(t, TensorType) for t in types):
        return None
    from . import numba_gen

    if out.dtype != "float32" or math.prod(out.shape) < numba_gen.MIN_SIZE or not out.shape:
        return None
    attrs = dict(call.attrs)
    if not ready():
        key = ("specialize", call.op, repr(types), repr(out), repr(sorted(attrs.items())))
        prepare(key, functools.partial(_load_kernel, call.op, types, out, attrs))
        return None
    return _kernel(call.op, types, out, attrs)


def _kernel(op, types, out, attrs):
    if op == "nn.gelu":
        from .numba_gen import chain_runner

        expr = Node("nn.gelu", (Leaf(0),), attrs).text()
        run = chain_runner(expr, ((types[0].shape, np.dtype(types[0].dtype)),))
        return None if run is None else _planned(_unary(run))
    from .numba_composite import composite

    fast = composite(op, types, out, attrs)
    return None if fast is None else _planned(fast)


def _load_kernel(op, types, out, attrs):
    fast = _kernel(op, types, out, attrs)
    if fast is not None:
        fast(*[np.zeros(t.shape, t.dtype) for t in types])


def _planned(fn):
    # as ir.runtime.specialize.planned marks a kernel: it takes out= and returns out or a new array
    fn.takes_out, fn.scratch, fn.fresh = True, (), True
    return fn


def _unary(run):
    def gelu(x, out=None):
        return run((x,), out=out)
    return gelu


__all__ = ["ENABLED", "SYNC", "fused_kernel", "into", "prepare", "ready", "specialize", "start", "wait", "wanted"]
