"""Tensor indexing: NumPy's answer for every supported key, eager and traced, and clear errors."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ir
import tracer

X = np.arange(60, dtype="float32").reshape(3, 4, 5)


def _traced(x, key):
    mod = tracer.trace(lambda t: t[key], x)
    ir.verify(mod)
    return ir.Executor(mod)["main"](x)


def _check(key, x=X):
    expected = x[key]
    for got in (tracer.tensor(x)[key].numpy(), _traced(x, key)):
        assert got.shape == expected.shape, (key, got.shape, expected.shape)
        np.testing.assert_array_equal(got, expected)


_bound = st.one_of(st.none(), st.integers(-7, 7))
_item = st.one_of(
    st.just(None),
    st.integers(-3, 2),  # in range for every axis of X
    st.builds(slice, _bound, _bound, st.one_of(st.none(), st.integers(-3, 3).filter(bool))),
)


@st.composite
def keys(draw):
    items = draw(st.lists(_item, max_size=4))
    used = sum(k is not None for k in items)
    if used > 3:
        items = [k for k in items if k is None] + [k for k in items if k is not None][:3]
    if draw(st.booleans()):
        items.insert(draw(st.integers(0, len(items))), Ellipsis)
    if draw(st.booleans()) and sum(k is not None and k is not Ellipsis for k in items) < 3:
        index = draw(st.lists(st.integers(-3, 2), min_size=0, max_size=3))
        items.insert(draw(st.integers(0, len(items))), index)
    return tuple(items)


@settings(max_examples=300, deadline=None)
@given(keys())
def test_random_keys_match_numpy(key):
    _check(key)


@pytest.mark.parametrize("key", [
    0, -1, (1, -2), (slice(None, None, -1),), (Ellipsis, slice(-2, None, -2)), (None, Ellipsis, None),
    (0, None, [1, 2]), (0, slice(None), [1, 2]), (slice(None), 0, [1, 2]), ([[0, 1], [2, -1]],),
    (Ellipsis, 0, [1, 2]), (0, Ellipsis, [1, 2]), (slice(None, None, 2), [0, 0], Ellipsis, 0), (slice(5, 1),), (slice(10, None, -2), None),
])
def test_keys_match_numpy(key):
    _check(key)


def test_negative_step_is_normalized_in_the_ir():
    mod = tracer.trace(lambda t: t[::-1, 3:0:-2], X)
    (call,) = [b.value for b in mod["main"].bindings]
    assert call.op == "strided_slice"
    assert call.attrs == {"axes": (0, 1), "begin": (2, 3), "end": (-1, 0), "strides": (-1, -2)}


def test_traced_int_tensor_index():
    idx = np.array([2, 0], "int64")
    mod = tracer.trace(lambda t, i: t[:, i], X, idx)
    np.testing.assert_array_equal(ir.Executor(mod)["main"](X, idx), X[:, idx])


def test_whole_tensor_key_adds_no_op():
    t = tracer.tensor(X)
    assert t[...] is t and t[:, :] is t


def test_out_of_range_int_names_axis_index_and_size():
    with pytest.raises(IndexError, match="index 4 is out of bounds for axis 1 with size 4"):
        tracer.tensor(X)[0, 4]
    with pytest.raises(IndexError, match="index -4 is out of bounds for axis 0 with size 3"):
        tracer.trace(lambda t: t[-4], X)


def test_too_many_indices():
    with pytest.raises(IndexError, match=r"too many indices for a tensor of shape \(3, 4, 5\): 4"):
        tracer.tensor(X)[0, 0, 0, 0]
    with pytest.raises(IndexError, match="too many indices"):
        tracer.tensor(np.float32(1.0))[0]


def test_two_ellipses():
    with pytest.raises(IndexError, match="single ellipsis"):
        tracer.tensor(X)[..., 0, ...]


@pytest.mark.parametrize("mask", [
    np.array([True, False, True]), [True, False, True], True, tracer.tensor(np.array([True, False, True])),
])
def test_boolean_masks_are_refused(mask):
    with pytest.raises(IndexError, match="boolean mask indexing is not supported.*tracer.where"):
        tracer.tensor(X)[mask]


def test_several_advanced_indices_are_refused():
    with pytest.raises(IndexError, match="only one integer tensor/list index.*got 2"):
        tracer.tensor(X)[[0, 1], :, [1, 2]]


def test_float_index_is_refused():
    with pytest.raises(IndexError, match="must be int32 or int64, got float32"):
        tracer.tensor(X)[tracer.tensor([0.0, 1.0])]
    with pytest.raises(IndexError, match="must hold integers, got float64"):
        tracer.tensor(X)[[0.5]]


def test_invalid_index_type():
    with pytest.raises(TypeError, match="invalid index 'a' of type str"):
        tracer.tensor(X)["a"]


def test_empty_list_index():
    _check(([],))
