"""A small compiled IR function as ONE numba function (the `fast` extra): forward and adjoint in one call.

On the NumPy executor each binding costs a dispatch of about 2 us, which for a small model (the tiny MLP
64-64-64-10 at batch 32: ~35 bindings of a few thousand elements) is most of the step. When numba kernels
may be used (`numba_hook.ready()`), every binding is one ir.runtime.numba_emit writes (elementwise ops with
broadcasting, 2-D matmul, sum/mean/collapse_sum_to, softmax/log_softmax, the cross-entropy op, reshape,
permute_dims, astype, broadcast_to, fills) and every array is float32, float64 or bool, non-empty and of at
most `MAX_SIZE` elements, the whole function (as the executor has it, after its cross-entropy rewrite) is
the source of one `@njit` function, written to a file of the kernel cache and loaded as
ir.runtime.numba_gen's `load` does: compiled eagerly for C-contiguous arguments with `cache=True`, so a
later process loads the machine code. The executor's generated straight-line function (ir.runtime.codegen)
stays the fallback: an argument that is not C-contiguous (no compiled signature takes it) runs it. Any
other op, dtype or a larger array keeps the executor's path for the whole function.

Values: as the NumPy path to float rounding, no further from the float64 result than NumPy's float32 path
(reductions accumulate in float64); NaN and inf as in NumPy. Results have the executor's structure, shapes
and dtypes, 0-d results as 0-d arrays, a returned (view of a) constant copied.

Memory: `stats.peak_bytes` for calls this program serves is `peak_bytes(compiled, args)`: the arguments'
buffers and the array constants, held for the whole call (the numba function holds references to them
until it returns), plus the most bytes of the arrays the function allocates (outputs, intermediates and
accumulators, each from its allocation to its variable's last use, the point where numba releases it) live
at once. Planned storage (ir.runtime.storage) is not used on this path: the function allocates anew.

When it runs: a compiled function qualifies once, when the executor generates its straight-line function.
If numba is still loading then (numba_hook's tiered start: the first function of a process), the program is
made on numba_hook's background thread before `ready()` turns true, and the executor's re-make of the
function installs it. Otherwise the Python function counts its calls, and from the `HOT_CALLS`-th the
program is made: on a background thread (the Python function serves calls until it is loaded, then the
executor's slot holds the program), or on the calling thread under TRACEGRAD_KERNELS=numba-sync. A cold
compile takes seconds (the tiny MLP's step: about 5 s); loading it from the kernel cache about 0.4 s.
"""
from __future__ import annotations

import os
import threading
import time
import warnings

import numpy as np

from . import numba_hook
from .numba_emit import MAX_SIZE, Unsupported, source

ENABLED = True  # False: the executor's per-op path for every function compiled from now on (A/B, tests)
HOT_CALLS = 50  # calls of the Python function before the program is made (a cold compile takes seconds)
TRIAL_CALLS = 10  # calls of each form, alternating and timed, before the faster one keeps the slot (_install)


class Program:
    """The loaded numba function of one compiled IR function and what its calls hold."""

    def __init__(self, text, arrays, own_peak):
        from .numba_box import boxing
        from .numba_gen import load

        self.source, self.arrays, self.own_peak = text, tuple(arrays), own_peak
        with boxing():  # its results boxed without numba's per-array unpickling (ir.runtime.numba_box)
            self.kernel = load(text, "program").program


def refusal(fn) -> str | None:
    """Why IR function `fn` does not qualify for a program (None: it does)."""
    try:
        source(fn)
    except (Unsupported, KeyError, TypeError) as e:
        return str(e) or type(e).__name__
    return None


def may_serve(compiled) -> bool:
    """Whether a program may ever serve CompiledFunction `compiled` (the IR function qualifying aside)."""
    return ENABLED and numba_hook.ENABLED and compiled.xp is np and not compiled.check_types \
        and getattr(compiled, "specialize_kernels", True)


def attach(compiled, python_source, ns, name):
    """What the executor's generated-function slot holds, (source, function), for ir.runtime.codegen's straight-line
    function `ns[name]` of `python_source`: that function itself when the IR function does not qualify, else the
    same function counting its calls (a prologue of one increment and one test); from its `HOT_CALLS`-th call,
    once numba_hook.ready(), the program is made (on a background thread: the Python function runs until it is
    loaded; on the calling thread under TRACEGRAD_KERNELS=numba-sync) and takes the slot. While numba itself
    loads in the background (numba_hook's tiers), the program is made on that thread before ready() turns
    true, and the executor's re-make of this function (its tiers) installs it at once."""
    python = ns[name]
    compiled.program = compiled.direct = None
    if not may_serve(compiled):
        return python_source, python
    try:
        text, arrays, own = source(compiled.fn, compiled.name)
    except (Unsupported, KeyError, TypeError):
        return python_source, python
    if text in _slower:  # a trial in this process found its program slower than the per-op function
        return python_source, python
    hot = _Hot(compiled, text, arrays, own, python_source, python)
    if not numba_hook.ready():  # numba loads in the background: the program is made there too, and the
        prepare = getattr(numba_hook, "prepare", None)  # executor makes this function again once it is ready
        if prepare is not None:
            prepare(("program", text), hot.program)
        return python_source, python
    program = _made.get(text)
    if program is not None or HOT_CALLS <= 1:  # made already (numba's background load, another executor)
        hot.done = True
        program = program or hot.program()
        return python_source, python if program is None else _install(compiled, program, python_source, python)[1]
    head, rest = python_source.split("\n", 1)
    counted = f"{head}\n    hot_.n += 1\n    if hot_.n >= {HOT_CALLS}: hot_.tick()\n{rest}"
    ns = dict(ns, hot_=hot)
    exec(compile(counted, f"<tracegrad {compiled.name}>", "exec"), ns)  # noqa: S102 - generated from the IR
    return python_source, ns[name]


class _Hot:
    """The call count of a qualifying function and the making of its program (see `attach`)."""

    def __init__(self, compiled, text, arrays, own, python_source, python):
        self.n, self.compiled, self.parts = 0, compiled, (text, arrays, own)
        self.python_source, self.python = python_source, python
        self.thread = None
        self.done = False

    def tick(self) -> None:
        """Make the program, or see to its making (once: threads calling the same step meanwhile run the Python
        function)."""
        if self.done or self.thread is not None or not numba_hook.ready():
            return
        _watch_forks()
        with _tick_lock:
            if self.done or self.thread is not None:
                return
            if getattr(numba_hook, "SYNC", True):
                self.thread = threading.current_thread()
            else:
                self.thread = threading.Thread(target=self.make, name="tracegrad-numba-program", daemon=True)
                _threads.add(self.thread)
                self.thread.start()
                return
        self.make()

    def program(self):
        # one maker at a time per process: two threads loading the same source at once would see each other's
        # half-written kernel file and half-executed module (numba_gen.load)
        _watch_forks()
        with _make_lock:
            program = _made.get(self.parts[0])
            if program is not None:
                return program
            try:
                program = _made[self.parts[0]] = Program(*self.parts)
                return program
            except Exception as e:  # noqa: BLE001 - numba refused the generated source: the executor's path stays
                warnings.warn(f"{self.compiled.name}: the whole-function numba program could not be compiled "
                              f"({e!r}); the per-op kernels run", RuntimeWarning, stacklevel=2)
                return None

    def make(self):
        compiled = self.compiled
        program = self.program()
        if program is not None and compiled._fast is not None and compiled._fast[0] is self.python_source:
            compiled._fast = _install(compiled, program, self.python_source, self.python)
        self.done = True
        _threads.discard(threading.current_thread())


_threads: set = set()
_made: dict = {}  # source -> its Program, once loaded in this process
_slower: set = set()  # sources whose Program a trial found slower than the per-op function (not tried again)
_tick_lock = threading.Lock()
_make_lock = threading.RLock()


def wait(timeout: float | None = None) -> None:
    """Block until the programs being made on background threads are loaded (or `timeout` seconds have passed
    for each): for benchmarks that time the steady state. A training loop never needs it."""
    for thread in list(_threads):
        thread.join(timeout)


def _join_before_fork() -> None:
    # a fork while a program compiles (numba's compiler lock held) would leave the child unable to compile
    for thread in list(_threads):
        if thread.is_alive() and thread is not threading.current_thread():
            thread.join()


def _new_locks() -> None:
    # in a forked child: a lock another thread of the parent held is held forever there
    global _tick_lock, _make_lock
    _tick_lock, _make_lock = threading.Lock(), threading.RLock()


_watching = False


def _watch_forks() -> None:
    """Register the fork handlers, once, before any program's lock is taken or thread started: after
    importing logging, so that ours run before logging's (handlers run newest first; logging's holds its lock
    across the fork, which a program compiling on a joined thread may need), as ir.runtime.numba_hook does."""
    global _watching
    if _watching or not hasattr(os, "register_at_fork"):
        return
    import logging  # noqa: F401

    os.register_at_fork(before=_join_before_fork, after_in_child=_new_locks)
    _watching = True


def _install(compiled, program, python_source, python):
    compiled.program = program
    compiled._peaks.clear()  # counted again at the next call, as this program's calls hold (peak_bytes)
    kernel, arrays = program.kernel, program.arrays
    refused = False  # an argument layout numba refused once: from then on each call's layouts are looked at first

    def direct(*args):
        # (results, whether the program made them: then each is an allocation of the call's own that no other
        # result is on, numba_emit._returned). numba's refusal of an argument (not C-contiguous, read-only,
        # unaligned: no compiled signature takes it) costs ~200 us per call, so after the first one such calls
        # go to the Python function directly; the fallback runs outside the except clause, so an error it raises
        # (a target out of range) is its own, not chained to the program's
        nonlocal refused
        if refused and not all(a.flags.c_contiguous and a.flags.writeable and a.flags.aligned for a in args):
            return python(*args), False
        try:
            return kernel(*args, *arrays), True
        except TypeError:
            refused = True
        except IndexError:  # a target out of range: the executor's path raises its own error
            pass
        return python(*args), False

    def serve(*args):
        return direct(*args)[0]

    serve.program = program
    if TRIAL_CALLS <= 0:
        compiled.direct = direct  # the executor's call_own: checked arguments of its own layout come straight here
        return python_source, serve
    times: tuple[list, list] = ([], [])  # the program's and the Python function's call times, alternating

    def run(*args):
        # the trial: the first 2 * TRIAL_CALLS calls alternate between the two forms, timed; then the faster
        # one takes the executor's slot for good (the program loses where NumPy's SIMD kernels beat numba's
        # loops: a residual tanh model of (256, 32) blocks, 0.41 against 0.29 ms a step); stats.peak_bytes
        # meanwhile reports the program's count for both
        first = len(times[0]) == len(times[1])
        start = time.perf_counter()
        out = serve(*args) if first else python(*args)
        times[0 if first else 1].append(time.perf_counter() - start)
        if len(times[1]) >= TRIAL_CALLS and compiled._fast is not None and compiled._fast[1] is run:
            _decide(compiled, program, python_source, python, (serve, direct), times)
        return out
    run.program = program
    return python_source, run


def _decide(compiled, program, python_source, python, forms, times) -> None:
    if min(times[0]) <= min(times[1]):
        compiled._fast, compiled.direct = (python_source, forms[0]), forms[1]
        return
    compiled.program = compiled.direct = None  # the per-op function serves: the interpreter's peak count again
    compiled._peaks.clear()
    compiled._fast = (python_source, python)
    _slower.add(program.source)


def peak_bytes(compiled, args, counted: int) -> int:
    """`stats.peak_bytes` of a call with `args`: the interpreter's count `counted` when no Program serves it,
    else the arguments' and array constants' buffers plus the Program's own allocations (see the module)."""
    program = getattr(compiled, "program", None)
    if program is None or not all(type(a) is np.ndarray and a.flags.c_contiguous and a.flags.writeable
                                  and a.flags.aligned for a in args):
        return counted  # the Python function serves layouts the program's signature does not take
    from .executor import _Memory

    mem = _Memory()
    for a in args:
        mem.hold(a)
    for c in program.arrays:
        mem.hold(c)
    return mem.live + program.own_peak


__all__ = ["ENABLED", "HOT_CALLS", "MAX_SIZE", "TRIAL_CALLS", "Program", "attach", "may_serve", "peak_bytes", "refusal",
           "source", "wait"]
