import numpy as np

import tracer as T
from tests.cases import OpCase, rand
from tracer.tensor import apply

idx = np.array([[0, 2], [-1, 0]], "int64")  # 2-D, a negative and a repeated index


def _np_take_backward(g, indices, shape, axis):
    out = np.zeros(shape, g.dtype)
    np.add.at(out, (slice(None),) * axis + (indices,), g)
    return out


def _placed(g):
    out = np.zeros((5, 3), g.dtype)
    out[::-2] = g
    return out


def _collapse(a):
    return a.sum(axis=(0, 2), keepdims=True).sum(axis=0)


def _split(*args):
    return lambda a: tuple(np.split(a, *args))


CASES = [
    OpCase("reshape", lambda x: T.reshape(x, (4, 6)), lambda a: a.reshape(4, 6), [rand(2, 3, 4)], ("reshape",)),
    OpCase("reshape_neg1", lambda x: T.reshape(x, (-1, 2)), lambda a: a.reshape(-1, 2), [rand(2, 3, 4)],
           ("reshape",)),
    OpCase("reshape_method_varargs", lambda x: x.reshape(3, -1), lambda a: a.reshape(3, -1), [rand(2, 3, 2)],
           ("reshape",)),
    OpCase("reshape_from_0d", lambda x: x.reshape((1, 1)), lambda a: a.reshape(1, 1), [rand()], ("reshape",)),
    OpCase("reshape_to_0d", lambda x: x.reshape(()), lambda a: a.reshape(()), [rand(1, 1)], ("reshape",)),
    OpCase("permute_dims", lambda x: T.permute_dims(x, (2, 0, 1)), lambda a: a.transpose(2, 0, 1), [rand(2, 3, 4)],
           ("permute_dims",)),
    OpCase("permute_dims_reverse", T.permute_dims, np.transpose, [rand(2, 3, 4)], ("permute_dims",)),
    OpCase("permute_dims_neg", lambda x: x.permute_dims((-1, 0, 1)), lambda a: a.transpose(2, 0, 1),
           [rand(2, 3, 4)], ("permute_dims",)),
    OpCase("transpose_default", T.transpose, lambda a: a.swapaxes(-2, -1), [rand(2, 3, 4)], ("permute_dims",)),
    OpCase("transpose_dims", lambda x: x.transpose(0, 2), lambda a: a.swapaxes(0, 2), [rand(2, 3, 4)],
           ("permute_dims",)),
    OpCase("T_2d", lambda x: x.T, lambda a: a.T, [rand(3, 4)], ("permute_dims",)),
    OpCase("T_1d", lambda x: x.T * 2.0, lambda a: a.T * np.float32(2), [rand(3)], ("multiply",)),
    OpCase("broadcast_to", lambda x: T.broadcast_to(x, (2, 3, 4)), lambda a: np.broadcast_to(a, (2, 3, 4)),
           [rand(3, 1)], ("broadcast_to",)),
    OpCase("broadcast_to_0d", lambda x: x.broadcast_to((2, 2)), lambda a: np.broadcast_to(a, (2, 2)), [rand()],
           ("broadcast_to",)),
    OpCase("collapse_sum_to", lambda x: apply("collapse_sum_to", [x], shape=(3, 1)), _collapse, [rand(2, 3, 4)],
           ("collapse_sum_to",)),
    OpCase("collapse_sum_to_int", lambda x: apply("collapse_sum_to", [x], shape=(3, 1)),
           lambda a: _collapse(a).astype("int32"), [rand(2, 3, 4, dtype="int32", low=-5, high=5)],
           ("collapse_sum_to",), grad=False),
    OpCase("expand_dims", lambda x: T.expand_dims(x, 0), lambda a: np.expand_dims(a, 0), [rand(3, 4)],
           ("expand_dims",)),
    OpCase("expand_dims_tuple_neg", lambda x: x.expand_dims((-1, 1)), lambda a: np.expand_dims(a, (-1, 1)),
           [rand(3, 4)], ("expand_dims",)),
    OpCase("expand_dims_0d", lambda x: T.expand_dims(x, 0), lambda a: np.expand_dims(a, 0), [rand()],
           ("expand_dims",)),
    OpCase("squeeze_all", T.squeeze, np.squeeze, [rand(1, 3, 1, 2)], ("squeeze",)),
    OpCase("squeeze_axis", lambda x: x.squeeze(2), lambda a: a.squeeze(2), [rand(1, 3, 1, 2)], ("squeeze",)),
    OpCase("squeeze_tuple_neg", lambda x: T.squeeze(x, (0, -2)), lambda a: a.squeeze((0, -2)), [rand(1, 3, 1, 2)],
           ("squeeze",)),
    OpCase("concat", lambda a, b, c: T.concat([a, b, c], axis=1), lambda a, b, c: np.concatenate([a, b, c], 1),
           [rand(2, 3), rand(2, 1, seed=1), rand(2, 4, seed=2)], ("concat",)),
    OpCase("concat_neg_axis", lambda a, b: T.concat((a, b), axis=-1), lambda a, b: np.concatenate((a, b), -1),
           [rand(2, 2, 3), rand(2, 2, 1, seed=1)], ("concat",)),
    OpCase("concat_one", lambda a: T.concat([a]), lambda a: np.concatenate([a]), [rand(3, 2)], ("concat",)),
    OpCase("stack", lambda a, b: T.stack([a, b]), lambda a, b: np.stack([a, b]), [rand(2, 3), rand(2, 3, seed=1)],
           ("stack",)),
    OpCase("stack_neg_axis", lambda a, b, c: T.stack([a, b, c], axis=-1), lambda a, b, c: np.stack([a, b, c], -1),
           [rand(2, 3), rand(2, 3, seed=1), rand(2, 3, seed=2)], ("stack",)),
    OpCase("stack_0d", lambda a, b: T.stack([a, b]), lambda a, b: np.stack([a, b]), [rand(), rand(seed=1)],
           ("stack",)),
    OpCase("split_sections", lambda x: T.split(x, 3, axis=1), _split(3, 1), [rand(2, 6)], ("split",)),
    OpCase("split_indices", lambda x: T.split(x, [1, 3]), _split([1, 3]), [rand(5, 2)], ("split",)),
    OpCase("split_neg_index_neg_axis", lambda x: T.split(x, [-1], axis=-1), _split([-1], -1), [rand(2, 4)],
           ("split",)),
    OpCase("split_one_used", lambda x: T.split(x, 2)[1] * 3.0, lambda a: np.split(a, 2)[1] * np.float32(3),
           [rand(4, 2)], ("split", "multiply")),
    OpCase("take", lambda x, i: T.take(x, i), lambda a, i: np.take(a, i, axis=0), [rand(4, 3), idx],
           ("take",)),
    OpCase("take_2d_indices_axis1", lambda x, i: T.take(x, i, axis=1), lambda a, i: np.take(a, i, axis=1),
           [rand(2, 3, 2), idx], ("take",)),
    OpCase("take_list_neg_axis", lambda x: T.take(x, [1, 1, -2], axis=-1), lambda a: np.take(a, [1, 1, -2], -1),
           [rand(2, 3)], ("take",)),
    OpCase("take_0d_index", lambda x, i: T.take(x, i, axis=1), lambda a, i: np.take(a, i, axis=1),
           [rand(2, 3), np.array(2, "int32")], ("take",)),
    OpCase("take_backward", lambda g, i: apply("grad.take_backward", [g, i], shape=(4, 3), axis=0),
           lambda g, i: _np_take_backward(g, i, (4, 3), 0), [rand(2, 2, 3), idx], ("grad.take_backward",)),
    OpCase("strided_slice_backward",
           lambda g: apply("grad.strided_slice_backward", [g], shape=(5, 3), axes=[0], begin=[4], end=[-1],
                           strides=[-2]),
           _placed,
           [rand(3, 3)], ("grad.strided_slice_backward",)),
    OpCase("tril", T.tril, np.tril, [rand(4, 4)], ("tril",)),
    OpCase("tril_k1_rect", lambda x: x.tril(1), lambda a: np.tril(a, 1), [rand(3, 5)], ("tril",)),
    OpCase("triu", T.triu, np.triu, [rand(4, 4)], ("triu",)),
    OpCase("triu_kneg_batched", lambda x: T.triu(x, k=-1), lambda a: np.triu(a, -1), [rand(2, 4, 3)], ("triu",)),
]

far = np.array([[5, -7], [2, 13]], "int64")  # outside 0..3 both ways: what Relax's wrap and clip modes are for

CASES += [
    OpCase("take_mode_wrap", lambda x, i: apply("take", [x, i], axis=0, mode="wrap"),
           lambda a, i: np.take(a, i, axis=0, mode="wrap"), [rand(4, 3), far], ("take",)),
    OpCase("take_mode_clip_axis1", lambda x, i: apply("take", [x, i], axis=1, mode="clip"),
           lambda a, i: np.take(a, i, axis=1, mode="clip"), [rand(2, 4), far], ("take",)),
    OpCase("take_backward_mode_wrap", lambda g, i: apply("grad.take_backward", [g, i], shape=(4, 3), axis=0,
                                                         mode="wrap"),
           lambda g, i: _np_take_backward(g, i % 4, (4, 3), 0), [rand(2, 2, 3), far], ("grad.take_backward",)),
    OpCase("check_index_then_take", lambda x, i: T.take(x, apply("check_index", [i], lower=0, upper=4)),
           lambda a, i: np.take(a, i, axis=0), [rand(4, 3), np.array([[0, 3], [1, 1]], "int32")],
           ("check_index", "take")),
]
