"""gather_elements / scatter_elements and the torch index ops built on them or on take / index_update."""
import numpy as np

import tracer as T
from tests.cases import OpCase, rand
from tracer.tensor import apply

g_idx = np.array([[0, 2, -1], [1, 1, 0]], "int64")  # a negative and a repeated index
s_idx = np.array([[0, 2], [3, 1], [1, 0]], "int64")  # per row distinct: one write per target
dup = np.array([[0, 0], [2, 2], [1, 3]], "int64")  # repeats within a row


def _np_gather(a, i, axis):
    return np.take_along_axis(a, np.where(i < 0, i + a.shape[axis], i), axis)


def _np_scatter(a, i, u, axis, how):
    out = a.copy()
    for pos in np.ndindex(i.shape):
        tgt = list(pos)
        tgt[axis] = i[pos] % a.shape[axis]
        tgt = tuple(tgt)
        out[tgt] = {"update": lambda o, v: v, "add": np.add, "mul": np.multiply, "max": np.maximum,
                    "min": np.minimum}[how](out[tgt], u[pos])
    return out


def _scatter(how, idx=s_idx, axis=1):
    return OpCase(f"scatter_elements_{how}", lambda x, i, u: apply("scatter_elements", [x, i, u], axis=axis,
                                                                    reduction=how),
                  lambda a, i, u: _np_scatter(a, i, u, axis, how), [rand(3, 4), idx, rand(3, 2, seed=1)],
                  ("scatter_elements",))


CASES = [
    # the IR op counts a negative index from the end (Relax's meaning); torch's gather refuses it (check_index)
    OpCase("gather_elements_axis1", lambda x, i: apply("gather_elements", [x, i], axis=1),
           lambda a, i: _np_gather(a, i, 1),
           [rand(2, 4), g_idx], ("gather_elements",)),
    OpCase("gather_elements_axis0_neg", lambda x, i: x.gather(-2, i), lambda a, i: _np_gather(a, i, 0),
           [rand(2, 4), np.array([[1, 0, 1, 1]])], ("gather_elements",)),
    OpCase("gather_elements_0d", lambda x: x.gather(0, np.array(0)), lambda a: a.copy(), [rand()],
           ("gather_elements",)),
    OpCase("gather_elements_empty", lambda x, i: x.gather(1, i), lambda a, i: np.zeros((2, 0), a.dtype),
           [rand(2, 3), np.zeros((2, 0), "int64")], ("gather_elements",), grad=False),
    _scatter("update"), _scatter("add"), _scatter("mul"), _scatter("max"), _scatter("min"),
    OpCase("scatter_elements_add_repeats", lambda x, i, u: x.scatter_add(1, i, u),
           lambda a, i, u: _np_scatter(a, i, u, 1, "add"), [rand(3, 4), dup, rand(3, 2, seed=1)],
           ("scatter_elements",)),
    OpCase("scatter_elements_mul_repeats_zero", lambda x, i, u, z: x.scatter_reduce(1, i, u * z, "prod"),
           lambda a, i, u, z: _np_scatter(a, i, u * z, 1, "mul"),
           [rand(3, 4), dup, rand(3, 2, seed=1), np.array([0.0, 1.0], "float32")], ("scatter_elements",)),
    OpCase("scatter_elements_int", lambda x, i, u: x.scatter_reduce(0, i, u, "prod"),
           lambda a, i, u: _np_scatter(a, i, u, 0, "mul"),
           [np.array([1, 2, 3], "int64"), np.array([0, 0, 2]), np.array([4, 5, 6])], ("scatter_elements",),
           grad=False),
    OpCase("scatter_reduce_mean_noself", lambda x, i, u: x.scatter_reduce(1, i, u, "mean", include_self=False),
           lambda a, i, u: _np_mean(a, i, u), [rand(3, 4), dup, rand(3, 2, seed=1)], ("scatter_elements", "divide")),
    OpCase("index_add_alpha", lambda x, i, s: x.index_add(0, i, s, alpha=-2.0),
           lambda a, i, s: _index_add(a, i, -2 * s), [rand(3, 4), np.array([2, 0, 2]), rand(3, 4, seed=1)],
           ("grad.take_backward", "add")),
    OpCase("index_copy_neg_dim", lambda x, i, s: x.index_copy(-1, i, s),
           lambda a, i, s: _index_copy(a, i, s), [rand(2, 4), np.array([3, 0]), rand(2, 2, seed=1)],
           ("index_update",)),
    OpCase("index_fill", lambda x, i: x.index_fill(1, i, 5.0),
           lambda a, i: _index_copy(a, i, np.full((2, 1), 5.0, a.dtype)), [rand(2, 3), np.array([1])],
           ("index_update",)),
    OpCase("masked_scatter", lambda x, m, s: x.masked_scatter(m, s), lambda a, m, s: _masked(a, m, s),
           [rand(3, 4), rand(3, 4, seed=3) > 0.0, rand(14, seed=1)], ("check_index", "take", "where")),
    OpCase("take_along_dim_broadcast", lambda x, i: T.take_along_dim(x, i, dim=2),
           lambda a, i: np.take_along_axis(a, np.broadcast_to(i, (2, 3, 1)), 2),
           [rand(2, 3, 4), np.array([[[1], [0], [3]]])], ("gather_elements", "broadcast_to")),
]

def _masked(a, mask, s):
    out = a.copy()
    out[mask] = s[:mask.sum()]
    return out


def _np_mean(a, i, u):
    total, count, out = a.copy(), np.zeros_like(a), a.copy()
    hit = np.zeros(a.shape, bool)
    for pos in np.ndindex(i.shape):
        tgt = (pos[0], i[pos])
        if not hit[tgt]:
            total[tgt], hit[tgt] = 0, True
        total[tgt] += u[pos]
        count[tgt] += 1
    out[hit] = total[hit] / count[hit]
    return out


def _index_add(a, i, s):
    out = a.copy()
    np.add.at(out, i, s)
    return out


def _index_copy(a, i, s):
    out = a.copy()
    out[:, i] = s
    return out
