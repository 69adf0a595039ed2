"""loss.backward()'s gradients each get a buffer of their own (autodiff.backward._owned), also when a numba
kernel returned them: numba gives every array it returns a MemInfo of its own as its base, views of one
allocation too, so the owner must be named by the allocation (autodiff.step_args._buffer_key)."""
import numpy as np
import pytest

from autodiff.backward import _owned


def test_numpy_views_of_one_buffer_and_of_a_fed_array_are_copied():
    a = np.arange(6.0)
    fed = np.ones(3)
    out = _owned((a[:3], a[3:], fed[:], np.broadcast_to(np.ones(1), (3,))), [fed])
    assert out[0].base is a  # the first view keeps the buffer
    assert not np.shares_memory(out[1], a) and not np.shares_memory(out[2], fed)
    assert out[3].flags.writeable
    np.testing.assert_array_equal(np.concatenate(out[:2]), a)


def test_numba_results_sharing_one_allocation_are_copied():
    numba = pytest.importorskip("numba")

    @numba.njit
    def overlapping(n):
        x = np.arange(2 * n) * 1.0
        return x[:n + 1], x[n - 1:]

    first, second = overlapping(3)
    assert type(first.base) is not np.ndarray  # numba's MemInfo, one per returned array
    out = _owned((first, second), [])
    out[1][:] = -1.0  # the user writes .grad in place
    np.testing.assert_array_equal(out[0], [0.0, 1.0, 2.0, 3.0])
    assert not np.shares_memory(out[0], out[1])
    fed_view = overlapping(3)
    again = _owned((fed_view[0],), [fed_view[1]])
    assert again[0] is not fed_view[0]  # (a view of) an allocation fed in is copied
