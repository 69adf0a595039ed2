"""Item assignment `x[key] = v`: eager in place, traced as slice_update / index_update (and where for masks)."""
import numpy as np

from tests.cases import OpCase, rand
from tracer.tensor import apply

x3 = rand(3, 4, 5)


def _set(key, value_is_input=True):
    """A row for `x[key] = v`; v is the second input, or the scalar 2.5."""
    def fn(x, *v):
        x = x.clone()  # not the argument itself: a traced function that writes its argument also returns it
        x[key] = v[0] if value_is_input else 2.5
        return x

    def ref(a, *v):
        a = a.copy()
        a[key] = v[0] if value_is_input else 2.5
        return a
    return fn, ref


def _row(name, key, value_shape, ops, x=x3):
    fn, ref = _set(key, value_shape is not None)
    inputs = [x] + ([rand(*value_shape, seed=5)] if value_shape is not None else [])
    return OpCase(name, fn, ref, inputs, ops)


CASES = [
    _row("setitem_int", 1, (4, 5), ("slice_update",)),
    _row("setitem_slice", (slice(0, 2),), (2, 4, 5), ("slice_update",)),
    _row("setitem_slice_broadcast_value", (slice(None), slice(1, 3)), (5,), ("slice_update", "broadcast_to")),
    _row("setitem_scalar", (slice(None), 2), None, ("slice_update",)),
    _row("setitem_neg_step", (slice(None, None, -2), slice(3, 0, -1)), (2, 3, 5), ("slice_update",)),
    _row("setitem_ellipsis_none", (Ellipsis, None, 1), (3, 4, 1), ("slice_update",)),
    _row("setitem_whole", (Ellipsis,), (5,), ("broadcast_to",)),
    _row("setitem_list", ([2, 0],), (2, 4, 5), ("index_update",)),
    _row("setitem_list_axis1_sliced", (slice(1, 3), [3, -4]), (2, 2, 5), ("index_update", "slice_update")),
    _row("setitem_int_and_list_apart", (0, slice(None), [1, 3]), (2, 4), ("index_update", "permute_dims")),
    _row("setitem_int_and_list_adjacent", (slice(None), 1, [0, 4]), (3, 2), ("index_update", "slice_update")),
    _row("setitem_2d_index", (slice(None), np.array([[1, 2]], "int64")), (3, 1, 2, 5),
         ("index_update",)),
    OpCase("setitem_mask", lambda x: _mask_fill(x), lambda a: np.where(a > 0, np.float32(0), a), [rand(3, 4)],
           ("where",)),
    OpCase("setitem_then_read", lambda x, v: _set_then_read(x, v), lambda a, v: _np_set_then_read(a, v),
           [rand(4, 3), rand(3, seed=2)], ("slice_update", "multiply")),
    OpCase("slice_update_op", lambda x, v: apply("slice_update", [x, v], axes=[1], begin=[3], end=[0], strides=[-2]),
           lambda a, v: _np_slice_update(a, v), [rand(2, 4), rand(2, 2, seed=3)], ("slice_update",)),
    OpCase("index_update_op", lambda x, i, v: apply("index_update", [x, i, v], axis=0),
           lambda a, i, v: _np_index_update(a, i, v), [rand(4, 2), np.array([3, -4], "int64"), rand(2, 2, seed=3)],
           ("index_update",)),
    OpCase("setitem_int_tensor", lambda x: _set_int(x), lambda a: np.where(np.arange(4) == 1, 7, a).astype(a.dtype),
           [rand(4, dtype="int64", low=-5, high=5)], ("slice_update",), grad=False),
]


def _mask_fill(x):
    x = x.clone()
    x[x > 0] = 0.0
    return x


def _set_int(x):
    x = x.clone()
    x[1] = 7.9  # cast to x's dtype on the way in, as torch (7)
    return x


def _set_then_read(x, v):
    y = x * 2.0
    y[2] = v
    return y * y[2]


def _np_set_then_read(a, v):
    y = a * np.float32(2)
    y[2] = v
    return y * y[2]


def _np_slice_update(a, v):
    a = a.copy()
    a[:, 3:0:-2] = v
    return a


def _np_index_update(a, i, v):
    a = a.copy()
    a[i] = v
    return a
