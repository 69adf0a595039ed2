"""torch's flips, diagonals, splits, moves, repeat_interleave, unfold (tracer/index_ops.py, tracer/view_ops.py)
and the products of tracer/products.py, einsum's primitive among them. Each is a composition; the rows check
the composition's forward against NumPy and its gradient against finite differences."""
import numpy as np

import tracer as T
from tests.cases import OpCase, rand


def _diag_embed(a, offset):
    n = a.shape[-1] + abs(offset)
    out = np.zeros(a.shape[:-1] + (n, n), a.dtype)
    for i in range(a.shape[-1]):
        r, c = (i, i + offset) if offset >= 0 else (i - offset, i)
        out[..., r, c] = a[..., i]
    return out


def _unfold(a, d, size, step):
    n = (a.shape[d] - size) // step + 1
    return np.stack([np.take(a, range(i * step, i * step + size), axis=d) for i in range(n)], d).swapaxes(d + 1, -1) \
        if a.ndim > 1 else np.stack([a[i * step:i * step + size] for i in range(n)])


def _np_normalize(a, dim):
    return a / np.maximum(np.linalg.norm(a, axis=dim, keepdims=True), 1e-12)


CASES = [
    OpCase("flip_dims", lambda x: x.flip(0, -1), lambda a: a[::-1, :, ::-1], [rand(2, 3, 4)], ("strided_slice",)),
    OpCase("flip_empty_dim", lambda x: T.flip(x, 1), lambda a: a[:, ::-1], [rand(2, 0)], (), grad=False),
    OpCase("roll_dims", lambda x: T.roll(x, (1, -2), (0, 1)), lambda a: np.roll(a, (1, -2), (0, 1)), [rand(3, 4)],
           ("concat", "strided_slice")),
    OpCase("roll_flat", lambda x: x.roll(-3), lambda a: np.roll(a, -3), [rand(2, 3)], ("concat", "reshape")),
    OpCase("rot90", lambda x: T.rot90(x, 1, (1, 2)), lambda a: np.rot90(a, 1, (1, 2)), [rand(2, 3, 4)],
           ("permute_dims", "strided_slice")),
    OpCase("diagonal_offset_dims", lambda x: x.diagonal(-1, 2, 0), lambda a: np.diagonal(a, -1, 2, 0),
           [rand(3, 2, 4)], ("reshape", "strided_slice")),
    OpCase("diagonal_empty", lambda x: x.diagonal(5), lambda a: np.diagonal(a, 5), [rand(3, 4)], ("strided_slice",),
           grad=False),
    OpCase("diag_embed_offset", lambda x: T.diag_embed(x, -1), lambda a: _diag_embed(a, -1), [rand(2, 3)],
           ("grad.strided_slice_backward", "reshape")),
    OpCase("diag_2d_trace", lambda x: T.diag(x, 1) + x.trace(), lambda a: np.diag(a, 1) + np.trace(a),
           [rand(3, 4)], ("strided_slice", "sum")),
    OpCase("unbind", lambda x: T.unbind(x, -1), lambda a: tuple(np.moveaxis(a, -1, 0)), [rand(2, 3)],
           ("split", "squeeze")),
    OpCase("narrow_select", lambda x: x.narrow(1, 1, 2).select(0, -1), lambda a: a[-1, 1:3], [rand(2, 4)],
           ("strided_slice",)),
    OpCase("tensor_split", lambda x: T.tensor_split(x, 3, dim=1), lambda a: tuple(np.array_split(a, 3, 1)),
           [rand(2, 7)], ("split",)),
    OpCase("movedim", lambda x: T.movedim(x, (0, 2), (2, 0)), lambda a: np.moveaxis(a, (0, 2), (2, 0)),
           [rand(2, 3, 4)], ("permute_dims",)),
    OpCase("meshgrid_xy", lambda x, y: T.meshgrid(x, y, indexing="xy"), lambda a, b: tuple(np.meshgrid(a, b)),
           [rand(3), rand(2, seed=1)], ("broadcast_to",)),
    OpCase("repeat_interleave_dim", lambda x: x.repeat_interleave(2, dim=0), lambda a: np.repeat(a, 2, 0),
           [rand(2, 3)], ("broadcast_to", "reshape")),
    OpCase("repeat_interleave_counts", lambda x: x.repeat_interleave(np.array([1, 0, 3]), dim=1),
           lambda a: np.repeat(a, [1, 0, 3], 1), [rand(2, 3)], ("take",)),
    OpCase("unfold", lambda x: x.unfold(1, 3, 2), lambda a: _unfold(a, 1, 3, 2), [rand(2, 7)],
           ("take",)),
    OpCase("einsum_matmul", lambda x, y: T.einsum("ij,jk->ik", x, y), lambda a, b: a @ b,
           [rand(3, 4), rand(4, 2, seed=1)], ("einsum",), rtol=1e-5),
    OpCase("einsum_summed_letter", lambda x, y: T.einsum("bij,bj->i", x, y), lambda a, b: np.einsum("bij,bj->i", a, b),
           [rand(2, 3, 4), rand(2, 4, seed=1)], ("einsum",)),
    OpCase("einsum_only_one_has", lambda x, y: T.einsum("ij,k->jk", x, y), lambda a, b: np.einsum("ij,k->jk", a, b),
           [rand(3, 2), rand(4, seed=1)], ("einsum",)),
    OpCase("einsum_ellipsis_broadcast", lambda x, y: T.einsum("...ij,...j", x, y),
           lambda a, b: np.einsum("...ij,...j", a, b), [rand(2, 3, 4), rand(1, 4, seed=1)],
           ("einsum", "broadcast_to")),
    OpCase("einsum_diagonal", lambda x: T.einsum("iij->j", x), lambda a: np.einsum("iij->j", a), [rand(3, 3, 2)],
           ("einsum", "strided_slice")),
    OpCase("einsum_int", lambda x, y: T.einsum("i,i->", x, y), lambda a, b: np.einsum("i,i->", a, b),
           [rand(4, dtype="int64", low=-5, high=5), rand(4, dtype="int64", low=-5, high=5, seed=1)], ("einsum",),
           grad=False),
    OpCase("tensordot", lambda x, y: T.tensordot(x, y, ([0], [1])), lambda a, b: np.tensordot(a, b, ([0], [1])),
           [rand(3, 2), rand(4, 3, seed=1)], ("matmul",)),
    OpCase("kron", T.kron, np.kron, [rand(2, 2), rand(3, 1, seed=1)], ("multiply",)),
    OpCase("cross", lambda x, y: T.cross(x, y, dim=0), lambda a, b: np.cross(a, b, axis=0),
           [rand(3, 2), rand(3, 2, seed=1)], ("concat",)),
    OpCase("addmm_baddbmm", lambda c, x, y: T.addmm(c, x, y, beta=0.5) + T.baddbmm(c, x[None], y[None], alpha=2.0)[0],
           lambda c, a, b: 0.5 * c + a @ b + c + 2 * (a @ b), [rand(3, 2), rand(3, 4, seed=1), rand(4, 2, seed=2)],
           ("matmul",), rtol=1e-5),
    OpCase("outer_dot_mv", lambda x, y: T.outer(x, y).sum(1) + T.dot(x, x) + T.mv(T.outer(x, y), y),
           lambda a, b: np.outer(a, b).sum(1) + a @ a + np.outer(a, b) @ b, [rand(3), rand(2, seed=1)],
           ("matmul",), rtol=1e-5),
    OpCase("cdist", lambda x, y: T.cdist(x, y), lambda a, b: np.linalg.norm(a[:, None] - b[None], axis=-1),
           [rand(3, 2), rand(4, 2, seed=1)], ("sqrt",)),
    OpCase("normalize", lambda x: T.normalize(x, dim=-1), lambda a: _np_normalize(a, -1), [rand(3, 4)],
           ("divide",)),
    OpCase("matrix_norm_inf", lambda x: T.linalg.matrix_norm(x, float("inf")),
           lambda a: np.linalg.norm(a, np.inf, axis=(-2, -1)), [rand(2, 3, 4)], ("max", "sum")),
]
