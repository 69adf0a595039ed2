import numpy as np

from tests.cases import OpCase, rand

x3 = rand(3, 4, 5)
rows = np.array([[0, 2], [-1, 1]], "int64")


def _index(name, key, ops, shape_input=x3, grad=True):
    return OpCase(name, lambda x: x[key], lambda a: a[key], [shape_input], ops, grad=grad)


CASES = [
    _index("index_int", 1, ("strided_slice", "squeeze")),
    _index("index_neg_int", (-1, 2), ("strided_slice", "squeeze")),
    _index("index_all_ints_0d", (2, 3, 4), ("strided_slice", "squeeze")),
    _index("index_slice_step", (slice(None), slice(1, None, 2)), ("strided_slice",)),
    _index("index_neg_step", (slice(None, None, -1), slice(3, 0, -2)), ("strided_slice",)),
    _index("index_neg_step_to_start", (Ellipsis, slice(-2, None, -2)), ("strided_slice",)),
    _index("index_empty_slice", (slice(3, 1),), ("strided_slice",)),
    _index("index_clamped_slice", (slice(-10, 10), slice(1, 100)), ("strided_slice",)),
    _index("index_none", (None, 0, None), ("strided_slice", "squeeze", "expand_dims")),
    _index("index_ellipsis_last", (Ellipsis, 1), ("strided_slice", "squeeze")),
    _index("index_ellipsis_middle_none", (0, Ellipsis, None, slice(1, 3)),
           ("strided_slice", "squeeze", "expand_dims")),
    _index("index_list", ([2, 0, 2],), ("take",)),
    _index("index_list_axis1", (slice(None), [1, -1]), ("take",)),
    _index("index_int_and_list_adjacent", (slice(None), 0, [1, 2]), ("strided_slice", "squeeze", "take")),
    _index("index_int_and_list_apart", (0, slice(1, 3), [1, 2]),
           ("strided_slice", "squeeze", "take", "permute_dims")),
    _index("index_list_none_apart", (0, None, [1, 2]), ("strided_slice", "squeeze", "take", "expand_dims")),
    _index("index_whole", (Ellipsis,), (), grad=False),
    _index("index_0d_ellipsis", (Ellipsis, None), ("expand_dims",), shape_input=rand()),
    OpCase("index_tensor_2d", lambda x, i: x[i], lambda a, i: a[i], [rand(4, 3), rows], ("take",)),
    OpCase("index_tensor_with_slices", lambda x, i: x[1:, i, ::-1], lambda a, i: a[1:, i, ::-1], [x3, rows],
           ("strided_slice", "take")),
]
