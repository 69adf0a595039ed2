"""The glue's fast path with the whole-function numba program serving (issue 23 item 3): results numba hands back
(each with a MemInfo of its own as its base, views of one allocation too) are recognised as buffers of their own
without the copy checks, yet no result ever shares memory with a weight, an input or another result; and every
guard still catches a changed layout (a view, a Fortran-ordered or read-only array, one array fed twice), with
the generic path's values and peak bytes."""
import numpy as np
import pytest

import autodiff
import tracer
from autodiff import step_cache
from tests.autodiff import test_glue

numba = pytest.importorskip("numba")
from ir.runtime import numba_hook, numba_program  # noqa: E402 - after the skip

pytestmark = pytest.mark.skipif(not numba_hook.ENABLED, reason="TRACEGRAD_KERNELS=numpy")
RNG = np.random.default_rng(3)
arrays, generic_calls = test_glue.arrays, test_glue.generic_calls  # generic_calls: a fixture


@pytest.fixture(autouse=True)
def _at_once(monkeypatch):
    monkeypatch.setattr(numba_program, "HOT_CALLS", 1)  # the program from the executor's generated call on
    monkeypatch.setattr(numba_program, "TRIAL_CALLS", 0)  # and it keeps the slot
    monkeypatch.setattr(step_cache, "reuse", lambda step, fn, options: step)  # twins stay twins


def _r(*shape):
    return RNG.normal(size=shape).astype("float32")


def _served(step, *args, calls=4):
    """The results of a call the program served (after a few calls: traced, counted, installed)."""
    for _ in range(calls):
        out = step(*args)
    assert step.last.step.program is not None, "the program should serve this step"
    return out


def _flat(out):
    return [a for o in out for a in _flat(o)] if isinstance(out, tuple) else [out]


def _no_two_share(arrays):
    for i, a in enumerate(arrays):
        for b in arrays[i + 1:]:
            assert not np.shares_memory(a, b)


def _reference(fn, wrt, *args, **kw):
    """fn's results on the per-op path (no program), the generic path every call."""
    numba_program.ENABLED = False
    try:
        step = autodiff.value_and_grad(fn, wrt=wrt, **kw)
        step._adopt_glue = lambda *a: None
        for _ in range(2):
            out = step(*args)
    finally:
        numba_program.ENABLED = True
    return out


def _same(got, want):
    """The program sums in float64 and rounds once: as the per-op path to float32 rounding."""
    for g, w in zip(arrays(got), arrays(want), strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6 * float(np.abs(w).max(initial=1.0)))


def test_a_gradient_that_is_a_view_of_a_weight_is_its_own_copy(generic_calls):
    # d sum(w1.T * w2)/dw1 = w2.T: the program once handed back the transposed view of w2's buffer
    w1, w2 = tracer.tensor(_r(3, 2)), tracer.tensor(_r(2, 3))

    def loss():
        return (w1.T * w2).sum()
    step = autodiff.value_and_grad(loss, wrt=[w1, w2])
    value, grads = _served(step)
    want = _reference(loss, [w1, w2])
    _same((value, grads), want)
    _no_two_share([w1.numpy(), w2.numpy()] + [g.numpy() for g in grads])
    grads[0].numpy()[...] = 0  # the user's to write: the weight stays
    assert np.abs(w2.numpy()).sum() > 0
    assert generic_calls.count(step) == 1  # the glue served the other calls


def test_results_on_one_allocation_are_distinct(generic_calls):
    w1, w2 = tracer.tensor(_r(4)), tracer.tensor(_r(4))

    def loss(x):
        t = tracer.tanh(x)
        return (w1 * t).sum() + (w2 * t).sum(), {"t": t, "r": tracer.reshape(t, (2, 2))}
    x = _r(4)
    step = autodiff.value_and_grad(loss, wrt=[w1, w2, w1], has_aux=True)
    out = _served(step, x)
    _same(out, _reference(loss, [w1, w2, w1], x, has_aux=True))
    _no_two_share(arrays(out) + [w1.numpy(), w2.numpy(), x])
    assert generic_calls.count(step) == 1


@pytest.mark.parametrize("program", [True, False])
@pytest.mark.parametrize("made_by", ["numba", "numpy"])
def test_an_input_handed_back_is_copied(generic_calls, program, made_by):
    if made_by == "numba":  # its base is a MemInfo: the glue's layout for call_own is not this one
        x = numba.njit(lambda n: np.arange(n).astype(np.float32))(3)
        assert x.base is not None and not isinstance(x.base, np.ndarray)
    else:  # an array of its own: the program serves through call_own, its results taken as they come
        x = np.arange(3, dtype=np.float32)
    w = tracer.tensor(_r(3))
    numba_program.ENABLED = program
    try:
        step = autodiff.value_and_grad(lambda x: (x * w).sum(), wrt=[w])  # the gradient is x itself
        for _ in range(4):
            value, (gw,) = step(x)
            assert not np.shares_memory(gw.numpy(), x)
            np.testing.assert_array_equal(gw.numpy(), x)
    finally:
        numba_program.ENABLED = True
    assert (step.last.step.program is not None) == program
    assert generic_calls.count(step) == 1


def test_fast_path_takes_no_copy_checks(generic_calls):
    w1, w2 = tracer.tensor(_r(4, 3)), tracer.tensor(_r(3))
    step = autodiff.value_and_grad(lambda x: tracer.relu(x @ w1 + w2).sum(), wrt=[w1, w2])
    x = _r(5, 4)
    _served(step, x)
    ns = step.glues[0].__globals__
    counted = []
    for name in ("key", "unshared"):
        real = ns[name]
        ns[name] = lambda *a, real=real, name=name: counted.append(name) or real(*a)
    _, grads = step(x)
    assert counted == []  # every result was recognised as a buffer of its own
    _no_two_share([g.numpy() for g in grads] + [w1.numpy(), w2.numpy(), x])


def test_program_hands_back_buffers_of_its_own():
    # each result of the program is a numba allocation no other result is on (its MemInfo over no array of the
    # caller's): a parameter, a view of one or a second view of one allocation is copied inside the program
    w1, w2, b = tracer.tensor(_r(3, 2)), tracer.tensor(_r(2, 3)), tracer.tensor(_r(6))

    def loss(x):
        t = tracer.tanh(x)
        return (w1.T * w2).sum() + (tracer.reshape(b, (2, 3)) * t).sum(), (tracer.reshape(t, (6,)), x)
    x = _r(2, 3)
    step = autodiff.value_and_grad(loss, wrt=[w1, w2, b], has_aux=True)
    _served(step, x)
    c = step.last
    feed = [x, w1.numpy(), w2.numpy(), b.numpy()]
    assert [p.name for p in c.params][:1] and len(c.params) == len(feed)
    flat = _flat(c.step(*feed))
    assert len(flat) == 6  # the loss, two aux (x itself) and three gradients
    datas = []
    for r in flat:
        assert not any(r is f for f in feed)
        assert type(r.base).__name__ == "_MemInfo" and r.base.parent is None
        datas.append(r.base.data)
    assert len(set(datas)) == len(datas)


def _layouts(x):
    """x in each layout the executor keys apart: its own C-ordered buffer, a view of a larger one, Fortran order,
    read-only; (name, array)."""
    big = np.zeros((x.shape[0] * 2,) + x.shape[1:], x.dtype)
    big[: x.shape[0]] = x
    ro = x.copy()
    ro.setflags(write=False)
    return [("own", x.copy()), ("view", big[: x.shape[0]]), ("fortran", np.asfortranarray(x)), ("read-only", ro),
            ("own again", x.copy())]


def _twins(loss, wrt, *args):
    """The step, and its twin with the glue off (the generic path every call, the program serving both), each
    called until the program serves."""
    step, twin = autodiff.value_and_grad(loss, wrt=wrt), autodiff.value_and_grad(loss, wrt=wrt)
    twin._adopt_glue = lambda *a: None
    _served(step, *args)
    _served(twin, *args)
    return step, twin


def _as_twin(step, twin, *args):
    """step(*args) and twin(*args): the same values, and the same peak bytes (the executor's count for the layout)."""
    got = step(*args)
    peak = step.stats.peak_bytes
    want = twin(*args)
    assert peak == twin.stats.peak_bytes
    for g, w in zip(arrays(got), arrays(want), strict=True):
        np.testing.assert_array_equal(g, w)
    return got


def test_every_layout_is_caught_with_the_generic_paths_values_and_peak(generic_calls):
    w1, b1 = tracer.tensor(_r(4, 6)), tracer.tensor(_r(6))
    w2 = tracer.tensor(_r(6, 3))

    def loss(x, y):
        return (tracer.relu(x @ w1 + b1) @ w2 * y).sum()
    x, y = _r(5, 4), _r(5, 3)
    step, twin = _twins(loss, [w1, b1, w2], x, y)
    assert step.last.step.direct is not None  # the program serves for good: the glue's calls go straight to it
    assert ".strides ==" in step.glues[0].source and "if fresh:" in step.glues[0].source
    for _name, xl in _layouts(x):
        for _ in range(3):  # a layout's first call counts its peak bytes on the interpreter, later ones reuse it
            _same(_as_twin(step, twin, xl, y), _reference(loss, [w1, b1, w2], xl, y))
    assert generic_calls.count(step) == 1


def test_one_array_fed_twice_takes_the_executors_layout_walk(generic_calls):
    w = tracer.tensor(_r(4, 4))

    def loss(x, y):
        return (tracer.tanh(x @ w) * y).sum()
    x = _r(4, 4)
    step, twin = _twins(loss, [w], x, x.copy())
    for _ in range(3):
        shared = _as_twin(step, twin, x, x)
        apart = _as_twin(step, twin, x, x.copy())
        _same(apart, shared)
    assert generic_calls.count(step) == 1


def test_results_are_tensors_as_tensor_wrap_makes_them(generic_calls):
    w = tracer.tensor(_r(3, 2))
    step = autodiff.value_and_grad(lambda x: (x @ w).sum(), wrt=[w])
    x = _r(4, 3)
    for _ in range(3):
        value, (g,) = step(x)
    assert "new(Tensor)" in step.glues[0].source
    for t in (value, g):
        made = tracer.Tensor.wrap(t.numpy())
        assert type(t) is tracer.Tensor
        assert t._data is made._data
        for slot in tracer.Tensor.__slots__:
            if slot not in ("_data", "__weakref__"):
                assert getattr(t, slot) == getattr(made, slot), slot
    assert generic_calls.count(step) == 1


def test_no_layout_test_where_no_program_may_serve(generic_calls, monkeypatch):
    monkeypatch.setattr(numba_program, "ENABLED", False)  # as the plain NumPy path: the executor's call as before
    w = tracer.tensor(_r(3, 2))
    step = autodiff.value_and_grad(lambda x: (x @ w).sum(), wrt=[w])
    x = _r(4, 3)
    for _ in range(3):
        _, (g,) = step(x)
    assert "if fresh:" not in step.glues[0].source and ".strides ==" not in step.glues[0].source
    np.testing.assert_allclose(g.numpy(), np.broadcast_to(x.sum(axis=0)[:, None], (3, 2)), rtol=1e-6)
    assert generic_calls.count(step) == 1
