"""Each PyTorch-spelled method and constructor against torch: the same line of code runs on a torch tensor
and on a tracegrad one, eagerly and traced (value_and_grad compiles it), values and gradients in float64.

A row is `fn(lib, *tensors)`, where `lib` is the torch module or tracer, so one lambda is both programs.
"""
import numpy as np
import pytest

import autodiff
import ir
import tracer

R = np.random.default_rng(0)


def a(*shape):
    return R.uniform(-1, 1, shape)


x234 = a(2, 3, 4)

# name, fn(lib, *xs), inputs, differentiable
ROWS = [
    ("size", lambda m, x: x * x.size(1) + x.size()[2], [x234], True),
    ("numel_dim", lambda m, x: x * (x.numel() + x.dim()), [x234], True),
    ("view", lambda m, x: x.view(4, -1), [x234], True),
    ("view_tuple", lambda m, x: x.view((6, 4)), [x234], True),
    ("reshape_varargs", lambda m, x: x.reshape(3, 8), [x234], True),
    ("flatten", lambda m, x: x.flatten(), [x234], True),
    ("flatten_1", lambda m, x: x.flatten(1), [x234], True),
    ("flatten_0_1", lambda m, x: x.flatten(0, 1), [x234], True),
    ("unflatten", lambda m, x: x.unflatten(2, (2, 2)), [x234], True),
    ("unflatten_neg", lambda m, x: x.unflatten(-1, (-1, 2)), [x234], True),
    ("unsqueeze", lambda m, x: x.unsqueeze(1), [x234], True),
    ("unsqueeze_neg", lambda m, x: x.unsqueeze(-1), [x234], True),
    ("squeeze_dim", lambda m, x: x.unsqueeze(0).squeeze(0), [x234], True),
    ("squeeze_all", lambda m, x: x.reshape(1, 2, 1, 12).squeeze(), [x234], True),
    ("permute", lambda m, x: x.permute(2, 0, 1), [x234], True),
    ("permute_tuple", lambda m, x: x.permute((1, 2, 0)), [x234], True),
    ("transpose", lambda m, x: x.transpose(0, 2), [x234], True),
    ("mT", lambda m, x: x.mT, [x234], True),
    ("expand", lambda m, x: x.expand(2, 3, 4), [a(3, 1)], True),
    ("expand_keep", lambda m, x: x.expand(5, -1, 4), [a(3, 1)], True),
    ("repeat", lambda m, x: x.repeat(2, 3), [a(2, 2)], True),
    ("repeat_more_dims", lambda m, x: x.repeat(2, 1, 2), [a(3, 2)], True),
    ("chunk", lambda m, x: x.chunk(2, 1), [a(2, 5)], True),
    ("chunk_dim", lambda m, x: x.chunk(3, dim=-1), [a(2, 7)], True),
    ("clamp", lambda m, x: x.clamp(-0.3, 0.4), [x234], True),
    ("clamp_min", lambda m, x: x.clamp(min=0.1), [x234], True),
    ("clamp_max", lambda m, x: x.clamp(max=0.1), [x234], True),
    ("clip", lambda m, x: x.clip(-0.2, 0.2), [x234], True),
    ("clamp_tensor_bounds", lambda m, x, lo: x.clamp(lo, lo + 0.5), [x234, a(4)], True),
    ("masked_fill", lambda m, x: x.masked_fill(x > 0.2, 3.0), [x234], True),
    ("argmin", lambda m, x: x.argmin(), [x234], False),
    ("argmin_dim", lambda m, x: x.argmin(dim=1), [x234], False),
    ("argmin_keepdim", lambda m, x: x.argmin(dim=2, keepdim=True), [x234], False),
    ("argmax_dim", lambda m, x: x.argmax(dim=1), [x234], False),
    ("cumsum", lambda m, x: x.cumsum(1), [x234], True),
    ("cumsum_dim", lambda m, x: x.cumsum(dim=-1), [x234], True),
    ("logsumexp", lambda m, x: (x * 50).logsumexp(1), [x234], True),
    ("logsumexp_keepdim", lambda m, x: x.logsumexp(dim=(0, 2), keepdim=True), [x234], True),
    ("std_unbiased", lambda m, x: x.std(dim=1, correction=1), [x234], True),
    ("std_population", lambda m, x: x.std(correction=0), [x234], True),
    ("var_keepdim", lambda m, x: x.var(dim=2, keepdim=True, correction=1), [x234], True),
    ("norm", lambda m, x: x.norm(), [x234], True),
    ("norm_dim", lambda m, x: x.norm(dim=1), [x234], True),
    ("norm_1", lambda m, x: x.norm(p=1, dim=2, keepdim=True), [x234], True),
    ("norm_3", lambda m, x: x.norm(p=3), [x234], True),
    ("detach", lambda m, x: x * x.detach(), [x234], True),
    ("float_double", lambda m, x: x.float().double() * 2, [x234], False),
    ("to_dtype", lambda m, x: x.to(m.float32), [x234], False),
    ("to_cpu", lambda m, x: x.to("cpu") * 2, [x234], True),
    ("contiguous", lambda m, x: x.transpose(0, 1).contiguous() + 1, [x234], True),
    ("sum_dim", lambda m, x: x.sum(dim=1), [x234], True),
    ("sum_dim_keepdim", lambda m, x: x.sum(dim=(0, 2), keepdim=True), [x234], True),
    ("mean_dim", lambda m, x: x.mean(dim=-1, keepdim=True), [x234], True),
    ("max_all", lambda m, x: x.max(), [x234], True),
    ("softmax_dim", lambda m, x: m.softmax(x, dim=1), [x234], True),
    ("log_softmax_dim", lambda m, x: m.log_softmax(x, dim=-1), [x234], True),
    ("cat", lambda m, x, y: m.cat([x, y], dim=1), [a(2, 3), a(2, 2)], True),
    ("cat_default", lambda m, x, y: m.cat((x, y)), [a(2, 3), a(1, 3)], True),
    ("stack_dim", lambda m, x, y: m.stack([x, y], dim=2), [a(2, 3), a(2, 3)], True),
    ("t", lambda m, x: x[0].t(), [x234], True),
    ("mm", lambda m, x, y: x.mm(y), [a(2, 3), a(3, 4)], True),
    ("bmm", lambda m, x, y: x.bmm(y), [a(2, 2, 3), a(2, 3, 4)], True),
    ("arith_aliases", lambda m, x, y: x.add(y, alpha=2).sub(y).mul(x).div(y.abs() + 1).neg().square(),
     [a(3, 4), a(3, 4)], True),
    ("div_floor", lambda m, x: (x * 5).div(2, rounding_mode="floor"), [x234], False),
    ("comparisons", lambda m, x: m.stack([x.eq(x), x.ne(0.5), x.lt(0.1), x.le(0.1), x.gt(0), x.ge(0)]), [x234],
     False),
    ("any_all", lambda m, x: m.stack([(x > 0.5).any(), (x > -2).all(), x.any(), x.all()]), [x234], False),
    ("any_dim", lambda m, x: (x > 0.5).any(dim=1, keepdim=True), [x234], False),
    ("all_dim", lambda m, x: (x > -0.5).all(dim=2), [x234], False),
    ("amax_amin", lambda m, x: x.amax(dim=1, keepdim=True) + x.amin(dim=(0, 2), keepdim=True), [x234], True),
    ("type_as_new", lambda m, x, y: x.type_as(y) + x.new_zeros(3, 4) + x.new_ones((3, 4)) + x.new_full((3, 4), 2.0)
     + x.new_tensor([1.0, 2.0, 3.0, 4.0]), [a(3, 4), a(1)], True),
    ("setitem_slice", lambda m, x, v: _set(x, (slice(None), slice(1, 3)), v), [x234, a(2, 2, 4)], True),
    ("setitem_int_scalar", lambda m, x: _set(x, (0, 1), 5.0), [x234], True),
    ("setitem_index_list", lambda m, x, v: _set(x, (slice(None), [2, 0]), v), [x234, a(2, 2, 4)], True),
    ("setitem_mask", lambda m, x: _set(x, x > 0.5, 0.0), [x234], True),
    ("setitem_ellipsis", lambda m, x, v: _set(x, (Ellipsis, 1), v), [x234, a(2, 3)], True),
    ("zeros_like_plus", lambda m, x: m.zeros_like(x) + m.ones_like(x) * x + m.full_like(x, 2.0), [x234], True),
    ("zeros_varargs", lambda m, x: x + m.zeros(2, 3, 4, dtype=m.float64) + m.ones((3, 4), dtype=m.float64), [x234],
     True),
    ("empty_like_shape", lambda m, x: x * m.empty_like(x).shape[0], [x234], True),
    ("arange", lambda m, x: x * m.arange(4, dtype=m.float64), [x234], True),
    ("arange_step", lambda m, x: x * m.arange(0.5, 2.5, 0.5, dtype=m.float64), [x234], True),
    ("linspace", lambda m, x: x + m.linspace(-1, 1, 4, dtype=m.float64), [x234], True),
    ("eye", lambda m, x: x[0, :, :3] @ m.eye(3, dtype=m.float64) + m.eye(3, 4, dtype=m.float64)[:, 1:], [x234],
     True),
]


def _set(x, key, value):
    x = x.clone()
    x[key] = value
    return x


@pytest.fixture(scope="module")
def torch():
    torch = pytest.importorskip("torch")
    return torch


def _tg_lib():
    """tracer with torch's dtype names as attributes, so one row spells `m.float64` for both."""
    class Lib:
        def __getattr__(self, name):
            return name if name in ("float32", "float64", "int64", "int32", "float16") else getattr(tracer, name)
    return Lib()


TG = _tg_lib()


def _flat(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


@pytest.mark.parametrize("row", ROWS, ids=[r[0] for r in ROWS])
def test_eager_and_traced_match_torch(row, torch):
    name, fn, inputs, differentiable = row
    t_in = [torch.tensor(v, requires_grad=differentiable) for v in inputs]
    t_out = _flat(fn(torch, *t_in))
    expected = [o.detach().numpy() for o in t_out]

    eager = _flat(fn(TG, *[tracer.tensor(v) for v in inputs]))
    assert len(eager) == len(expected)
    for got, want in zip(eager, expected, strict=True):
        assert got.shape == want.shape and str(got.dtype) == str(want.dtype), (got, want.shape, want.dtype)
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-10, atol=1e-12)

    traced = tracer.trace(lambda *xs: tuple(_flat(fn(TG, *xs))), *inputs)
    ran = ir.Executor(traced)["main"](*inputs)
    for got, want in zip(_flat(ran), expected, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)

    if not differentiable:
        return
    weights = [R.uniform(0.5, 1.5, w.shape) for w in expected]
    loss_t = sum((o * torch.tensor(w)).sum() for o, w in zip(t_out, weights, strict=True))
    loss_t.backward()
    want_grads = [None if t.grad is None else t.grad.numpy() for t in t_in]

    def loss(*xs):
        outs = _flat(fn(TG, *xs))
        return sum((o * tracer.tensor(w)).sum() for o, w in zip(outs, weights, strict=True))

    xs = [tracer.tensor(v) for v in inputs]
    value, grads = autodiff.value_and_grad(loss, wrt=xs)(*xs)
    np.testing.assert_allclose(value.item(), loss_t.item(), rtol=1e-10)
    for g, want in zip(grads, want_grads, strict=True):
        if want is None:  # torch: the input is not in the graph (type_as reads only its dtype)
            assert g is None or not np.any(g.numpy()), g
            continue
        np.testing.assert_allclose(g.numpy(), want, rtol=1e-9, atol=1e-12)


RANDOM = [
    ("randn", lambda m, g: m.randn(3, 4, generator=g)),
    ("rand", lambda m, g: m.rand((2, 5), generator=g)),
    ("randint", lambda m, g: m.randint(2, 9, (4, 4), generator=g)),
    ("randint_high", lambda m, g: m.randint(5, (3,), generator=g)),
    ("rand_like", lambda m, g: m.rand_like(m.zeros(2, 2, dtype=m.float64), generator=g)),
]


@pytest.mark.parametrize("row", RANDOM, ids=[r[0] for r in RANDOM])
def test_random_constructors_match_torch_in_shape_and_dtype(row, torch):
    """Not the values (another generator), but the shape, the dtype and the seeded reproducibility."""
    name, fn = row
    want = fn(torch, torch.Generator().manual_seed(0))
    first = fn(TG, tracer.Generator(0))
    again = fn(TG, tracer.Generator(0))
    assert first.shape == tuple(want.shape) and first.dtype == str(want.dtype).removeprefix("torch.")
    np.testing.assert_array_equal(first.numpy(), again.numpy())
