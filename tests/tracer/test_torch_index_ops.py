"""Issue 22's shape, index, sort, scan and product ops against torch: one line of code runs on torch tensors and
on tracegrad ones, eagerly and traced (compiled), values, dtypes and indices, and float64 gradients through
autodiff.value_and_grad. Rows with ties compare forward values only where torch leaves the index open."""
import numpy as np
import pytest

import autodiff
import ir
import tracer
from nn import functional as F

R = np.random.default_rng(22)


def a(*shape):
    return np.asarray(R.permutation(np.linspace(-1, 1, int(np.prod(shape)))).reshape(shape) + R.uniform(-1e-3, 1e-3, shape))


def ints(*values):
    return np.array(values[0] if len(values) == 1 and isinstance(values[0], list) else values, "int64")


x34, x234 = a(3, 4), a(2, 3, 4)
ties = np.array([[2.0, 1.0, 2.0, 1.0, 3.0], [5.0, 5.0, 4.0, 4.0, 1.0]])
idx = ints([[0, 2], [1, 1], [3, 0]])
holes = np.where(x34 > 0.5, np.nan, 1.0)  # NaN at some entries, for nansum / nanmean


def T(m, v):
    """A constant tensor for either library (index arguments and fixed data)."""
    return m.tensor(v)


# name, fn(lib, *xs), inputs, differentiable
ROWS = [
    # ---- gather / scatter / index
    ("gather", lambda m, x: x.gather(1, T(m, idx)), [x34], True),
    ("gather_dim0", lambda m, x: m.gather(x, 0, T(m, ints([[2, 0, 1, 1]]))), [x34], True),
    ("scatter_src", lambda m, x, s: x.scatter(1, T(m, ints([[0, 2], [1, 3], [3, 0]])), s), [x34, a(3, 2)], True),
    ("scatter_value", lambda m, x: x.scatter(0, T(m, ints([[2, 0, 1, 1]])), 0.5), [x34], True),
    ("scatter_larger_src", lambda m, x, s: x.scatter(1, T(m, ints([[0], [2], [3]])), s), [x34, a(3, 3)], False),
    ("scatter_add_repeats", lambda m, x, s: x.scatter_add(1, T(m, idx), s), [x34, a(3, 2)], True),
    ("scatter_reduce_sum", lambda m, x, s: x.scatter_reduce(1, T(m, idx), s, "sum"), [x34, a(3, 2)], True),
    ("scatter_reduce_sum_noself", lambda m, x, s: x.scatter_reduce(1, T(m, idx), s, "sum", include_self=False),
     [x34, a(3, 2)], True),
    ("scatter_reduce_prod", lambda m, x, s: x.scatter_reduce(1, T(m, idx), s, "prod"), [x34, a(3, 2)], True),
    ("scatter_reduce_prod_zeros", lambda m, x, s: x.scatter_reduce(1, T(m, idx), s * T(m, np.array(
        [[0.0, 1.0], [0.0, 0.0], [1.0, 1.0]])), "prod"), [x34, a(3, 2)], True),
    ("scatter_reduce_prod_noself", lambda m, x, s: x.scatter_reduce(1, T(m, idx), s, "prod", include_self=False),
     [x34, a(3, 2)], True),
    ("scatter_reduce_mean", lambda m, x, s: x.scatter_reduce(1, T(m, idx), s, "mean"), [x34, a(3, 2)], True),
    ("scatter_reduce_mean_noself", lambda m, x, s: x.scatter_reduce(1, T(m, idx), s, "mean", include_self=False),
     [x34, a(3, 2)], True),
    ("scatter_reduce_amax", lambda m, x, s: x.scatter_reduce(1, T(m, idx), s, "amax"), [x34, a(3, 2)], True),
    ("scatter_reduce_amin_noself", lambda m, x, s: x.scatter_reduce(1, T(m, idx), s, "amin", include_self=False),
     [x34, a(3, 2)], True),
    ("scatter_reduce_int", lambda m: T(m, ints([1, 2, 3])).scatter_reduce(0, T(m, ints([0, 0, 2])),
                                                                          T(m, ints([4, 5, 6])), "mean"), [], False),
    ("index_select", lambda m, x: x.index_select(1, T(m, ints([3, 0, 3]))), [x34], True),
    ("index_select_neg_dim", lambda m, x: m.index_select(x, -1, T(m, ints([1]))), [x234], True),
    ("index_add", lambda m, x, s: x.index_add(0, T(m, ints([2, 0, 2])), s, alpha=2.0), [x34, a(3, 4)], True),
    ("index_add_dim1", lambda m, x, s: m.index_add(x, 1, T(m, ints([1, 1])), s), [x234, a(2, 2, 4)], True),
    ("index_copy", lambda m, x, s: x.index_copy(1, T(m, ints([3, 0])), s), [x34, a(3, 2)], True),
    ("index_fill", lambda m, x: x.index_fill(1, T(m, ints([0, 2])), -2.0), [x34], True),
    ("masked_scatter", lambda m, x, s: x.masked_scatter(T(m, x34 > 0.2), s), [x34, a(12)], True),
    ("masked_scatter_broadcast", lambda m, x, s: x.masked_scatter(T(m, np.array([True, False, True, False])), s),
     [x34, a(2, 4)], True),
    ("take_along_dim", lambda m, x: m.take_along_dim(x, T(m, idx), 1), [x34], True),
    ("take_along_dim_broadcast", lambda m, x: m.take_along_dim(x, T(m, ints([[[1], [0], [3]]])), 2), [x234], True),
    ("take_along_dim_flat", lambda m, x: m.take_along_dim(x, T(m, ints([11, 0, 5]))), [x34], True),
    # ---- flips
    ("flip", lambda m, x: x.flip(0, 2), [x234], True),
    ("flip_tuple", lambda m, x: m.flip(x, (-1,)), [x234], True),
    ("fliplr_flipud", lambda m, x: m.fliplr(x) + m.flipud(x), [x34], True),
    ("roll", lambda m, x: x.roll(1, 1), [x34], True),
    ("roll_multi", lambda m, x: m.roll(x, (2, -1), (0, 2)), [x234], True),
    ("roll_flat", lambda m, x: x.roll(5), [x34], True),
    ("rot90", lambda m, x: m.rot90(x), [x34], True),
    ("rot90_k", lambda m, x: x.rot90(2) + x.rot90(-1, (1, 0)).rot90(1, (1, 0)) + x.rot90(4), [x34], True),
    ("rot90_3", lambda m, x: x.rot90(3, (0, 2)), [x234], True),
    # ---- sort family
    ("sort", lambda m, x: x.sort(), [x34], True),
    ("sort_desc_dim0", lambda m, x: m.sort(x, dim=0, descending=True), [x34], True),
    ("sort_stable_ties", lambda m: T(m, ties).sort(stable=True), [], False),
    ("sort_desc_stable_ties", lambda m: T(m, ties).sort(dim=1, descending=True, stable=True), [], False),
    ("sort_nan", lambda m: T(m, np.array([2.0, np.nan, 1.0, -np.inf])).sort(descending=True), [], False),
    ("argsort", lambda m, x: x.argsort(dim=0), [x34], False),
    ("argsort_desc_stable", lambda m: m.argsort(T(m, ties), descending=True, stable=True), [], False),
    ("topk", lambda m, x: x.topk(2), [x34], True),
    ("topk_smallest_dim0", lambda m, x: m.topk(x, 2, dim=0, largest=False), [x34], True),
    ("topk_tie_values", lambda m: T(m, ties).topk(3).values, [], False),
    ("kthvalue", lambda m, x: x.kthvalue(2, 1), [x34], True),
    ("kthvalue_keepdim", lambda m, x: m.kthvalue(x, 3, dim=0, keepdim=True), [x34], True),
    ("median_all", lambda m, x: x.median(), [x34], True),
    ("median_dim", lambda m, x: x.median(dim=1), [x34], True),
    ("median_even_keepdim", lambda m, x: m.median(x, 2, keepdim=True), [x234], True),
    ("median_tie_values", lambda m: T(m, ties).median(1).values, [], False),
    ("median_nan", lambda m: T(m, np.array([[2.0, np.nan, 1.0], [3.0, 1.0, 2.0]])).median(1), [], False),
    ("mode_ties", lambda m: T(m, ties).mode(1), [], False),
    ("mode_dim0_keepdim", lambda m: m.mode(T(m, ties.T.copy()), 0, keepdim=True), [], False),
    ("mode_grad", lambda m, x: (x * 0 + T(m, ties)).mode(1).values * x[:, :1], [a(2, 5)], True),
    ("quantile", lambda m, x: x.quantile(0.3), [x34], True),
    ("quantile_dim_list", lambda m, x: m.quantile(x, T(m, np.array([0.0, 0.25, 0.9, 1.0])), dim=1), [x34], True),
    ("quantile_keepdim", lambda m, x: x.quantile(0.5, dim=0, keepdim=True), [x234], True),
    ("quantile_interpolations", lambda m, x: m.stack([x.quantile(0.4, dim=1, interpolation=i) for i in
                                                      ("lower", "higher", "midpoint", "nearest")]), [x34], True),
    ("quantile_nan", lambda m: T(m, np.array([[2.0, np.nan, 1.0], [3.0, 1.0, 2.0]])).quantile(0.5, dim=1), [], False),
    ("nanmean_nansum", lambda m, x: m.stack([(x * T(m, holes)).nansum(1), (x * T(m, holes)).nanmean(1)]), [x34],
     True),
    ("nanmean_all_nan", lambda m: T(m, np.array([[np.nan, np.nan], [1.0, np.nan]])).nanmean(1), [], False),
    ("std_mean", lambda m, x: m.std_mean(x, 1), [x34], True),
    ("var_mean_correction", lambda m, x: m.var_mean(x, (0, 2), correction=0, keepdim=True), [x234], True),
    ("aminmax", lambda m, x: m.aminmax(x, dim=1), [x34], True),
    ("aminmax_all", lambda m, x: x.aminmax(), [x34], True),
    ("count_nonzero", lambda m, x: m.count_nonzero(x * T(m, (x34 > 0).astype(float)), dim=0), [x34], False),
    # ---- scans and prod
    ("cummax", lambda m, x: x.cummax(1), [x34], True),
    ("cummin_dim0", lambda m, x: m.cummin(x, 0), [x34], True),
    ("cummax_ties", lambda m: T(m, ties).cummax(1), [], False),
    ("cummin_nan", lambda m: T(m, np.array([3.0, np.nan, 1.0, 0.0])).cummin(0), [], False),
    ("cumprod", lambda m, x: x.cumprod(1), [x34], True),
    ("cumprod_zeros", lambda m, x: (x * T(m, np.array([1.0, 0.0, 1.0, 0.0]))).cumprod(-1), [x34], True),
    ("cumprod_int", lambda m: T(m, ints(1, 2, 3, 4)).cumprod(0), [], False),
    ("logcumsumexp", lambda m, x: (x * 30).logcumsumexp(1), [x34], True),
    ("logcumsumexp_spread", lambda m, x: (x + T(m, np.array([-1000.0, 0.0, 3.0, -50.0]))).logcumsumexp(1),
     [x34], True),
    ("prod", lambda m, x: x.prod(1), [x34], True),
    ("prod_all", lambda m, x: (x + 1).prod(), [a(2, 3)], True),
    ("prod_one_zero", lambda m, x: (x * T(m, np.array([1.0, 0.0, 1.0, 1.0]))).prod(1, keepdim=True), [x34], True),
    ("prod_two_zeros", lambda m, x: (x * T(m, np.array([1.0, 0.0, 1.0, 0.0]))).prod(1), [x34], True),
    ("prod_int", lambda m: T(m, ints([[1, 2], [3, 4]])).prod(0), [], False),
    # ---- diagonals
    ("diagonal", lambda m, x: x.diagonal(), [x34], True),
    ("diagonal_offsets", lambda m, x: m.cat([x.diagonal(1), x.diagonal(-1), x.diagonal(3), x.diagonal(5)]),
     [x34], True),
    ("diagonal_dims", lambda m, x: m.diagonal(x, 1, 2, 0), [x234], True),
    ("diag_1d", lambda m, x: m.diag(x) + 0, [a(3)], True),
    ("diag_1d_offset", lambda m, x: m.diag(x, -2), [a(3)], True),
    ("diag_2d", lambda m, x: m.diag(x, 1), [x34], True),
    ("diag_embed", lambda m, x: m.diag_embed(x), [x34], True),
    ("diag_embed_dims", lambda m, x: m.diag_embed(x, 1, 0, 2), [x34], True),
    ("trace", lambda m, x: x.trace(), [x34], True),
    ("tril_triu_indices", lambda m: m.cat([m.tril_indices(3, 4), m.triu_indices(4, 3, -1), m.tril_indices(3, 3, 1)],
                                          1), [], False),
    # ---- narrow, select, splits
    ("narrow", lambda m, x: x.narrow(1, 1, 2), [x34], True),
    ("narrow_neg_start", lambda m, x: m.narrow(x, -1, -3, 2), [x234], True),
    ("select", lambda m, x: x.select(1, -1), [x234], True),
    ("unbind", lambda m, x: x.unbind(1), [x234], True),
    ("unbind_default", lambda m, x: m.unbind(x), [x34], True),
    ("tensor_split_sections", lambda m, x: x.tensor_split(3, dim=1), [a(2, 7)], True),
    ("tensor_split_indices", lambda m, x: m.tensor_split(x, [1, 5, 9], dim=1), [a(2, 7)], True),
    ("tensor_split_decreasing", lambda m, x: m.tensor_split(x, [3, 1], dim=0), [a(5, 2)], True),
    ("hsplit_vsplit", lambda m, x: m.hsplit(x, 2) + m.vsplit(x, [1]), [x34], True),
    ("hsplit_1d", lambda m, x: m.hsplit(x, [2]), [a(5)], True),
    ("dsplit", lambda m, x: m.dsplit(x, 2), [x234], True),
    ("movedim", lambda m, x: x.movedim(0, -1), [x234], True),
    ("movedim_tuple", lambda m, x: m.movedim(x, (0, 1), (2, 0)), [x234], True),
    ("moveaxis_swap", lambda m, x: m.moveaxis(x, 2, 0) + x.swapaxes(0, 2).swapdims(1, 2), [x234], True),
    ("unflatten", lambda m, x: x.unflatten(1, (3, -1)), [a(2, 6)], True),
    ("broadcast_tensors", lambda m, x, y: m.broadcast_tensors(x, y), [a(3, 1), a(4)], True),
    ("meshgrid_ij", lambda m, x, y: m.meshgrid(x, y, indexing="ij"), [a(3), a(4)], True),
    ("meshgrid_xy", lambda m, x, y, z: m.meshgrid([x, y, z], indexing="xy"), [a(3), a(4), a(2)], True),
    ("atleast", lambda m, x, y: m.atleast_1d(x) + m.atleast_2d(y).sum() + m.atleast_3d(x).sum(), [a(), a(3)], True),
    ("atleast_many", lambda m, x, y: m.atleast_3d(x, y), [a(2, 3), a(4)], True),
    ("repeat_interleave", lambda m, x: x.repeat_interleave(2), [x34], True),
    ("repeat_interleave_dim", lambda m, x: m.repeat_interleave(x, 3, dim=1), [x34], True),
    ("repeat_interleave_tensor", lambda m, x: x.repeat_interleave(T(m, ints(2, 0, 1)), dim=0), [x34], True),
    ("repeat_interleave_counts", lambda m: m.repeat_interleave(T(m, ints(1, 3, 2))), [], False),
    ("unfold", lambda m, x: x.unfold(1, 2, 1), [x34], True),
    ("unfold_step", lambda m, x: x.unfold(-1, 2, 3), [a(2, 7)], True),
    # ---- products
    ("einsum_matmul", lambda m, x, y: m.einsum("ij,jk->ik", x, y), [x34, a(4, 2)], True),
    ("einsum_batched_implicit", lambda m, x, y: m.einsum("bij,bjk", x, y), [x234, a(2, 4, 3)], True),
    ("einsum_ellipsis", lambda m, x, y: m.einsum("...ij,...jk->...ik", x, y), [x234, a(4, 2)], True),
    ("einsum_trace_diag", lambda m, x: m.einsum("ii", x) + m.einsum("ii->i", x).sum(), [a(3, 3)], True),
    ("einsum_outer_sum", lambda m, x, y: m.einsum("i,j->", x, y), [a(3), a(4)], True),
    ("einsum_three", lambda m, x, y, z: m.einsum("ab,bc,cd->da", [x, y, z]), [x34, a(4, 2), a(2, 5)], True),
    ("einsum_transpose", lambda m, x: m.einsum("ijk->kji", x), [x234], True),
    ("einsum_broadcast", lambda m, x, y: m.einsum("bij,bj->bi", x, y), [x234, a(1, 4)], True),
    ("einsum_spaces_upper", lambda m, x, y: m.einsum("Ab, bC -> AC", x, y), [x34, a(4, 2)], True),
    ("outer", lambda m, x, y: m.outer(x, y) + x.ger(y), [a(3), a(4)], True),
    ("dot_mv", lambda m, x, y, v: m.dot(v, v) + x.mv(v).sum() + m.mv(y, v).sum(), [x34, a(2, 4), a(4)], True),
    ("mm_bmm", lambda m, x, y, b1, b2: m.mm(x, y).sum() + m.bmm(b1, b2).sum(),
     [x34, a(4, 2), x234, a(2, 4, 2)], True),
    ("addmm", lambda m, c, x, y: m.addmm(c, x, y, beta=0.5, alpha=2.0), [a(3, 2), x34, a(4, 2)], True),
    ("addmm_broadcast", lambda m, c, x, y: c.addmm(x, y), [a(2), x34, a(4, 2)], True),
    ("addmm_beta0_nan", lambda m, x, y: m.addmm(T(m, np.full((3, 2), np.nan)), x, y, beta=0), [x34, a(4, 2)], True),
    ("baddbmm", lambda m, c, x, y: m.baddbmm(c, x, y, beta=2.0, alpha=-1.0), [a(2, 3, 2), x234, a(2, 4, 2)], True),
    ("tensordot", lambda m, x, y: m.tensordot(x, y, dims=2), [x234, a(3, 4, 5)], True),
    ("tensordot_lists", lambda m, x, y: m.tensordot(x, y, dims=([0, 2], [2, 0])), [x234, a(4, 5, 2)], True),
    ("tensordot_0", lambda m, x, y: m.tensordot(x, y, dims=0), [a(2), a(3)], True),
    ("kron", lambda m, x, y: m.kron(x, y), [a(2, 3), a(3, 2)], True),
    ("kron_ranks", lambda m, x, y: x.kron(y), [a(2), a(2, 3)], True),
    ("cross", lambda m, x, y: m.cross(x, y, dim=1), [a(4, 3), a(4, 3)], True),
    ("cross_default_dim", lambda m, x, y: x.cross(y), [a(3, 4), a(3, 4)], True),
    ("linalg_cross", lambda m, x, y: m.linalg.cross(x, y), [a(2, 3), a(1, 3)], True),
    ("cdist", lambda m, x, y: m.cdist(x, y), [a(3, 4), a(5, 4)], True),
    ("cdist_p1_batched", lambda m, x, y: m.cdist(x, y, p=1.0), [a(2, 3, 4), a(2, 2, 4)], True),
    ("cdist_p3", lambda m, x, y: m.cdist(x, y, p=3.0), [a(3, 2), a(2, 2)], True),
    ("cdist_zero_distance", lambda m, x: m.cdist(x, x), [a(3, 2)], True),
    ("normalize", lambda m, x: _normalize(m)(x), [x34], True),
    ("normalize_p1_dim", lambda m, x: _normalize(m)(x, p=1.0, dim=-1), [x234], True),
    ("normalize_zero_row", lambda m, x: _normalize(m)(x * T(m, np.array([[1.0], [0.0], [1.0]]))), [x34], True),
    ("vector_norm", lambda m, x: m.linalg.vector_norm(x) + m.linalg.vector_norm(x, 1, dim=1).sum(), [x34], True),
    ("vector_norm_inf_keepdim", lambda m, x: m.linalg.vector_norm(x, float("inf"), dim=(0, 2), keepdim=True),
     [x234], True),
    ("matrix_norm", lambda m, x: m.stack([m.linalg.matrix_norm(x, o) for o in ("fro", 1, -1, float("inf"),
                                                                                -float("inf"))]), [x34], True),
    ("matrix_norm_batched_keepdim", lambda m, x: m.linalg.matrix_norm(x, 1, keepdim=True), [x234], True),
    ("linalg_norm", lambda m, x: m.linalg.norm(x) + m.linalg.norm(x, dim=1).sum() + m.linalg.norm(x, 1), [x34], True),
    ("linalg_norm_dims", lambda m, x: m.linalg.norm(x, float("inf"), dim=(2, 1)), [x234], True),
]


def _normalize(m):
    """F.normalize of either library."""
    return F.normalize if m is TG else m.nn.functional.normalize


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


class _Lib:
    def __getattr__(self, name):
        return getattr(tracer, name)


TG = _Lib()


def _flat(out):
    if isinstance(out, (tuple, list)):
        return [v for o in out for v in _flat(o)]
    return [out]


def _compare(got, want, what):
    got = np.asarray(got.numpy() if hasattr(got, "numpy") else got)
    assert got.shape == want.shape, (what, got.shape, want.shape)
    assert str(got.dtype) == str(want.dtype), (what, got.dtype, want.dtype)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12, err_msg=what)


@pytest.mark.parametrize("row", ROWS, ids=[r[0] for r in ROWS])
def test_eager_and_compiled_match_torch(row, torch):
    name, fn, inputs, differentiable = row
    t_in = [torch.tensor(v, requires_grad=differentiable) for v in inputs]
    t_out = _flat(fn(torch, *t_in))
    expected = [o.detach().numpy() for o in t_out]

    compiled = ir.Executor(tracer.trace(lambda *xs: tuple(_flat(fn(TG, *xs))), *inputs))["main"](*inputs)
    for what, outs in (("eager", _flat(fn(TG, *[tracer.tensor(v) for v in inputs]))), ("compiled", _flat(compiled))):
        assert len(outs) == len(expected), what
        for got, want in zip(outs, expected, strict=True):
            _compare(got, want, what)

    if not differentiable:
        return
    weights = [R.uniform(0.5, 1.5, w.shape) for w in expected]
    floats = [i for i, o in enumerate(t_out) if o.dtype.is_floating_point]
    loss_t = sum((t_out[i] * torch.tensor(weights[i])).sum() for i in floats)
    loss_t.backward()
    want_grads = [None if t.grad is None else t.grad.numpy() for t in t_in]

    def loss(*xs):
        outs = _flat(fn(TG, *xs))
        return sum((outs[i] * tracer.tensor(weights[i])).sum() for i in floats)

    xs = [tracer.tensor(v) for v in inputs]
    value, grads = autodiff.value_and_grad(loss, wrt=xs)(*xs)
    np.testing.assert_allclose(value.item(), loss_t.item(), rtol=1e-9)
    for g, want in zip(grads, want_grads, strict=True):
        if want is None:
            assert g is None or not np.any(g.numpy()), g
            continue
        np.testing.assert_allclose(g.numpy(), want, rtol=1e-8, atol=1e-10)


ERRORS = [
    ("gather_rank", lambda m, x: x.gather(1, T(m, ints([0, 1]))), RuntimeError),
    ("topk_k", lambda m, x: x.topk(9), RuntimeError),
    ("narrow_past_end", lambda m, x: x.narrow(1, 3, 2), RuntimeError),
    ("select_range", lambda m, x: x.select(0, 5), IndexError),
    ("masked_scatter_short_source", lambda m, x: x.masked_scatter(T(m, x34 > -2), T(m, a(3))), RuntimeError),
    ("einsum_letters", lambda m, x: m.einsum("ij,jk->ik", x, x), RuntimeError),
]


@pytest.mark.parametrize("row", ERRORS, ids=[r[0] for r in ERRORS])
def test_errors_where_torch_raises(row, torch):
    """torch raises on these; tracegrad raises too, naming the op (the type may be tracegrad's own)."""
    name, fn, exc = row
    with pytest.raises(exc):
        fn(torch, torch.tensor(x34))
    with pytest.raises((RuntimeError, IndexError, ValueError, TypeError)):
        fn(TG, tracer.tensor(x34))


@pytest.mark.parametrize("ord", ["nuc", 2, -2])
def test_matrix_norms_of_singular_values_match_numpy(ord):  # against torch: tests/tracer/test_svd.py
    np.testing.assert_allclose(tracer.linalg.matrix_norm(tracer.tensor(x34), ord).numpy(),
                               np.linalg.norm(x34, ord), rtol=1e-5)
