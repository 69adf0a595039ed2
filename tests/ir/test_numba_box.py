"""ir.runtime.numba_box: a whole-function program's results boxed without numba's per-array unpickling, as the
same arrays numba's own boxer makes (values to the bit, type, dtype, shape, strides, flags, a MemInfo base owning
the data), made in this process or loaded from the kernel cache by another, numba's boxer back afterwards."""
import os
import subprocess
import sys

import numpy as np
import pytest

import tracer

numba = pytest.importorskip("numba")
from numba.core import boxing, types  # noqa: E402 - after the skip
from numba.core.pythonapi import _boxers  # noqa: E402

from ir.runtime import numba_box, numba_emit, numba_hook, numba_program  # noqa: E402
from ir.runtime.numba_gen import load  # noqa: E402

pytestmark = pytest.mark.skipif(not numba_hook.ENABLED, reason="TRACEGRAD_KERNELS=numpy")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _fn(a, b):
    """Results of several kinds: 0-d, 1-d, 2-d, float64 and bool, one a reduction, one a returned argument."""
    return (a * b).sum(), tracer.exp(a) - b, a.sum(axis=0), a > b, b


def _program(dtype="float64"):
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=(3, 5)).astype(dtype), rng.normal(size=(3, 5)).astype(dtype)
    a[0, 0], b[1, 1] = np.nan, np.inf
    text, arrays, own = numba_emit.source(tracer.trace(_fn, a, b)["main"])
    return text, arrays, own, (a, b)


class _Unpickles:
    """Counts the calls of numba.core.serialize._numba_unpickle (numba's C helper calls it at each boxing)."""

    def __enter__(self):
        self.n = 0
        sys.setprofile(self._count)
        return self

    def _count(self, frame, event, arg):
        if event == "call" and frame.f_code.co_name == "_numba_unpickle":
            self.n += 1

    def __exit__(self, *exc):
        sys.setprofile(None)


def _describe(out):
    return [(type(r), r.dtype, r.shape, r.strides, r.flags.c_contiguous, r.flags.writeable, r.flags.owndata,
             type(r.base).__name__, r.tobytes()) for r in out]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_same_arrays_as_numbas_boxer_without_unpickling(dtype):
    text, arrays, own, args = _program(dtype)
    mine = numba_program.Program(text, arrays, own).kernel
    # the same source compiled with numba's own boxer (another kernel file: the header differs)
    theirs = load(text.replace("result arrays boxed by", "numba's boxer, not"), "program").program
    with np.errstate(all="ignore"):
        want = theirs(*args, *arrays)
        with _Unpickles() as numba_way:
            theirs(*args, *arrays)
        got = mine(*args, *arrays)
        with _Unpickles() as ours:
            refs = sys.getrefcount(np.ndarray)
            for _ in range(20):
                got = mine(*args, *arrays)
            leaked = sys.getrefcount(np.ndarray) - refs
    assert numba_way.n == len(got) and ours.n == 0  # the test can fail: numba's boxer unpickles per array
    assert leaked == 0
    assert _describe(got) == _describe(want)
    assert got[4] is not args[1] and not np.shares_memory(got[4], args[1])  # a returned argument is a copy
    assert all(r.base.parent is None for r in got)  # the glue's test of "an allocation of the call's own"
    assert len({r.base.data for r in got}) == len(got)


def test_numbas_boxer_is_back_after_and_on_errors():
    assert _boxers.functions[types.Array] is boxing.box_array
    with numba_box.boxing():
        assert _boxers.functions[types.Array] is numba_box._box_array
    assert _boxers.functions[types.Array] is boxing.box_array
    with pytest.raises(RuntimeError), numba_box.boxing():
        raise RuntimeError
    assert _boxers.functions[types.Array] is boxing.box_array

    @numba.njit
    def plain(n):
        return np.zeros(n)
    with _Unpickles() as count:
        plain(3)
        plain(3)
    assert count.n >= 1  # compiled after: numba's own boxer


CACHED = """
import sys, numpy as np
sys.path.insert(0, {tests!r})
from test_numba_box import _program, _Unpickles, _describe
from ir.runtime import numba_program
text, arrays, own, args = _program()
kernel = numba_program.Program(text, arrays, own).kernel
with np.errstate(all="ignore"):
    kernel(*args, *arrays)
    with _Unpickles() as count:
        out = kernel(*args, *arrays)
print(count.n, sum(kernel.stats.cache_hits.values()))
np.save({path!r}, np.array(repr(_describe(out))))
"""


def test_a_process_loading_the_cached_program_boxes_the_same(tmp_path):
    env = {**os.environ, "TRACEGRAD_CACHE": str(tmp_path / "cache"), "TRACEGRAD_KERNELS": "numba-sync"}
    outs = []
    for k in range(2):  # the first compiles and writes the cache, the second loads it
        path = str(tmp_path / f"out{k}.npy")
        code = CACHED.format(tests=os.path.join(ROOT, "tests", "ir"), path=path)
        run = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True,
                             timeout=600)
        assert run.returncode == 0, run.stderr
        outs.append((run.stdout.split(), str(np.load(path))))
    assert outs[0][0][0] == outs[1][0][0] == "0"
    assert outs[1][0][1] != "0"  # loaded from the kernel cache
    assert outs[0][1] == outs[1][1]


@pytest.mark.parametrize("version, ok", [("0.68.1", True), ("0.68.0", True), ("0.67.1", False), ("0.69.0", False),
                                         ("1.0.0", False), ("0.70.0rc1", False), ("dev", False)])
def test_the_boxer_swaps_only_on_the_numba_releases_it_was_read_from(version, ok):
    assert numba_box.supported(version) is ok
