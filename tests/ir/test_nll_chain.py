"""log_softmax + nll_loss and its adjoint as numba row kernels (ir/runtime/numba_nll.py): the rewrite, and the
kernels' values against the chain op by op (float32: NaN where it is NaN) and in float64 (1e-6 relative)."""
import numpy as np
import pytest

pytest.importorskip("numba")

import autodiff  # noqa: E402
import nn  # noqa: E402
import tracer  # noqa: E402
from ir.nodes import Call, Tuple, Var  # noqa: E402
from ir.ops.fused import Const, Leaf, evaluate_unfused  # noqa: E402
from ir.runtime import numba_hook, numba_nll  # noqa: E402
from ir.types import TensorType  # noqa: E402

N, C = 70, 1000  # above numba_emit.MAX_SIZE


@pytest.fixture(autouse=True)
def _numba_ready():
    if not numba_hook.ENABLED:
        pytest.skip("numba's kernels are off (TRACEGRAD_KERNELS=numpy)")
    assert numba_hook.ready() or numba_hook.wait(120)
    yield
    numba_nll.ENABLED = True


def _call(kind, n, c, reduction="mean", ignore=-100, g=1.0, tdtype="int64"):
    z, t = Var("z", TensorType((n, c), "float32")), Var("t", TensorType((n,), tdtype))
    if kind == "forward":
        out = TensorType((n,) if reduction == "none" else (), "float32")
        return Call("fused", (Tuple((z, t)),), {"expr": numba_nll.forward_expr(1, reduction, ignore)}, out)
    fields, gnode = (z, t), Const(g, "float32")
    if g is None:
        fields, gnode = (z, t, Var("g", TensorType((n,) if reduction == "none" else (), "float32"))), Leaf(2)
    expr = numba_nll.backward_expr(1, reduction, ignore, gnode, (1,))
    return Call("fused", (Tuple(fields),), {"expr": expr}, TensorType((n, c), "float32"))


def _dz64(z, t, g, reduction, ignore):
    """The chain's dz in float64 as c * (1 - p) at the target from the other classes' share (the chain itself in
    float64 loses the digits of 1 - p where p is near 1)."""
    z = z.astype("f8")
    with np.errstate(all="ignore"):
        e = np.exp(z - z.max(1, keepdims=True))
        valid = t != ignore
        coef = -np.broadcast_to(np.asarray(g, "f8"), t.shape) * valid
        if reduction == "mean":
            coef = coef / max(valid.sum(), 1)
        rows, safe = np.arange(len(t)), np.where(valid, t, 0)
        s = e.sum(1)
        others = s - e[rows, safe]
        e_others = e.copy()
        e_others[rows, safe] = 0
        others = np.where(valid, e_others.sum(1), others)
        total = np.where(coef == 0, 0.0, coef)  # the one-hot row's sum (NumPy's starts from +0.0)
        dz = 0 * coef[:, None] - e / s[:, None] * total[:, None]
        dz[rows[valid], safe[valid]] = (coef * others / s)[valid]
    return dz


def _check(call, xs, dz64=None):
    """The kernel's values: NaN where the chain's float32 value is, else within 1e-6 of its float64 value."""
    run = numba_nll.kernel(call)
    assert run is not None
    with np.errstate(all="ignore"):
        got = np.asarray(run(xs))
        ref32 = np.asarray(evaluate_unfused(np, call.attrs["expr"], xs))
        ref64 = np.asarray(evaluate_unfused(np, call.attrs["expr"], [x.astype("f8") if x.dtype.kind == "f" else x
                                                                     for x in xs]))
    if got.ndim == 2:  # dz: against the float64 value that keeps 1 - p's digits
        tree = call.attrs["expr"]
        reduction = "mean" if "'mean'" in tree else "sum" if "'sum'" in tree else "none"
        ignore = int(tree.split("ignore_index=")[1].split(")")[0])
        g = xs[2] if len(xs) == 3 else float(tree.split("const(")[1].split(",")[0])
        ref64 = _dz64(xs[0], xs[1], g, reduction, ignore)
    assert got.shape == ref32.shape and got.dtype == np.float32
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref32))
    ok = ~np.isnan(ref32)
    np.testing.assert_allclose(got[ok], ref64[ok], rtol=1e-6, atol=1e-35)
    return got, ref32


def _data(n=N, c=C, seed=0, scale=3.0, tdtype="int64"):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, c)).astype("float32") * np.float32(scale), rng.integers(0, c, n).astype(tdtype)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("tdtype", ["int64", "int32"])
def test_kernels_against_the_chain(reduction, tdtype):
    z, t = _data(tdtype=tdtype)
    t[3] = t[9] = -100
    _check(_call("forward", N, C, reduction, tdtype=tdtype), (z, t))
    _check(_call("backward", N, C, reduction, g=2.5, tdtype=tdtype), (z, t))
    g = np.float32(0.75) if reduction != "none" else np.linspace(-2, 2, N).astype("float32")
    _check(_call("backward", N, C, reduction, g=None, tdtype=tdtype), (z, t, np.asarray(g, np.float32)))


def test_confident_rows_keep_their_small_target_gradient():
    # p near 1 at the target: c * (1 - p) from the other classes' share, not c - p * c
    z, t = _data(scale=1.0)
    z[np.arange(N), t] = np.linspace(5, 40, N).astype("float32")
    got, ref32 = _check(_call("backward", N, C), (z, t))
    assert np.all(got[np.arange(N), t] < 0)  # -(1/N) * (1 - p): small, never rounded to 0 as the chain's
    assert np.any(ref32[np.arange(N), t] == 0)


def test_nan_inf_and_ignored_rows():
    z, t = _data(seed=1)
    z[0, 5] = np.nan  # a NaN row: NaN everywhere
    z[1, 7] = np.inf  # +inf: NaN (inf - inf)
    z[2, :] = -np.inf  # all -inf: NaN
    z[3, :500] = -np.inf  # masked logits, target among the kept ones
    t[3] = 700
    z[4, t[4]] = -np.inf  # the target masked: an infinite loss, a finite gradient
    z[5, 9] = np.nan
    t[5] = -100  # an ignored NaN row: NaN in the gradient as the chain's, no NaN in the loss
    t[6] = 3
    t[6] = -100
    for reduction in ("mean", "sum", "none"):
        _check(_call("forward", N, C, reduction), (z, t))
        _check(_call("backward", N, C, reduction), (z, t))
    for call in (_call("backward", N, C), _call("backward", N, C, "sum", g=0.0), _call("backward", N, C, g=-0.0)):
        got, ref32 = _check(call, (z, t))
        finite = np.isfinite(ref32)
        assert np.array_equal(np.signbit(got[finite & (ref32 == 0)]), np.signbit(ref32[finite & (ref32 == 0)]))
    for g in (np.inf, np.nan, 0.0, -0.0):
        _check(_call("backward", N, C, "sum", g=None), (z, t, np.asarray(g, np.float32)))


def test_all_ignored_and_ignore_index_in_range():
    z, t = _data(seed=2)
    loss, _ = _check(_call("forward", N, C), (z, np.full(N, -100)))
    assert np.isnan(loss)
    _check(_call("backward", N, C), (z, np.full(N, -100)))
    t[::3] = 0
    _check(_call("forward", N, C, ignore=0), (z, t))
    _check(_call("backward", N, C, "sum", ignore=0), (z, t))


def test_out_of_range_target_raises_nll_loss_error():
    z, t = _data()
    t[4] = C
    for kind in ("forward", "backward"):
        with pytest.raises(IndexError, match="out of range"):
            numba_nll.kernel(_call(kind, N, C))((z, t))


def _step(reduction="mean", n=N, c=C):
    crit = nn.NLLLoss(reduction=reduction)

    def loss(x, w, t):
        out = crit(tracer.log_softmax(x @ w, axis=1), t)
        return out if reduction != "none" else (out * 0.5).sum()
    return autodiff.value_and_grad(loss, argnums=(0, 1))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_compiled_step_rewritten_and_equal_to_the_plain_chain(reduction):
    rng = np.random.default_rng(3)
    x, w = rng.normal(size=(N, 16)).astype("float32"), rng.normal(size=(16, C)).astype("float32")
    t = rng.integers(0, C, N)
    t[1] = -100
    args = (tracer.tensor(x), tracer.tensor(w), tracer.tensor(t))
    results = {}
    for enabled in (False, True):
        numba_nll.ENABLED = enabled
        vg = _step(reduction)
        value, grads = vg(*args)
        ops = [b.value.op for b in vg.last.executor["main_adjoint"].fn.bindings if isinstance(b.value, Call)]
        results[enabled] = (np.asarray(value), [np.asarray(g) for g in grads], ops)
    assert "nn.log_softmax" in results[False][2] and "grad.nll_loss_backward" in results[False][2]
    ops = results[True][2]
    assert ops.count("fused") == 2 and "nn.log_softmax" not in ops and "exp" not in ops
    np.testing.assert_allclose(results[True][0], results[False][0], rtol=2e-6)
    for a, b in zip(results[True][1], results[False][1], strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6 * np.abs(b).max())


def test_left_alone_small_float64_and_shared_log_softmax():
    rng = np.random.default_rng(4)
    t = tracer.tensor(rng.integers(0, 10, 32))
    vg = autodiff.value_and_grad(lambda z, t: nn.NLLLoss()(tracer.log_softmax(z, axis=1), t), argnums=0)
    vg(tracer.tensor(rng.normal(size=(32, 10)).astype("float32")), t)  # small: the whole-function program's
    assert "fused" not in [getattr(b.value, "op", None) for b in vg.last.executor["main_adjoint"].fn.bindings]
    z64 = tracer.tensor(rng.normal(size=(N, C)))
    tt = tracer.tensor(rng.integers(0, C, N))
    vg = autodiff.value_and_grad(lambda z, t: nn.NLLLoss()(tracer.log_softmax(z, axis=1), t), argnums=0)
    vg(z64, tt)
    assert "fused" not in [getattr(b.value, "op", None) for b in vg.last.executor["main_adjoint"].fn.bindings]

    def both(z, t):
        ls = tracer.log_softmax(z, axis=1)
        return nn.NLLLoss()(ls, t) + ls.mean()  # the log_softmax read elsewhere: the chain stays
    vg = autodiff.value_and_grad(both, argnums=0)
    z32 = tracer.tensor(rng.normal(size=(N, C)).astype("float32"))
    vg(z32, tt)
    assert "grad.nll_loss_backward" in [getattr(b.value, "op", None)
                                        for b in vg.last.executor["main_adjoint"].fn.bindings]


def test_plan_refuses_other_exprs():
    z, t = Var("z", TensorType((N, C), "float32")), Var("t", TensorType((N,), "int64"))
    other = Call("fused", (Tuple((z, t)),), {"expr": "nn.nll_loss(nn.softmax(x0, axis=1), x1)"}, TensorType((), "float32"))
    assert numba_nll.kernel(other) is None
    small = _call("forward", 8, 10)
    assert numba_nll.kernel(small) is None


def test_prange_forms_give_the_serial_bits():
    # the parallel kernels (chosen by numba_threads.use_parallel on large arrays) do each row as the serial ones
    module = numba_nll._module()
    z, t = _data(n=300, c=257, seed=5)
    z[7, 3], z[8, :] = np.nan, -np.inf
    t[::5] = -100
    count = module.count_targets(t, -100, 257)
    for blocks in (1, 3, 16):
        losses = []
        for name in ("nll_rows_serial", "nll_rows_parallel"):
            loss = np.empty(300)
            getattr(module, name)(z, t, -100, loss, np.empty((blocks, 257), np.float32))
            losses.append(loss)
        assert losses[0].tobytes() == losses[1].tobytes()
    g = np.linspace(-1, 1, 300).astype("float32")
    outs = []
    for name in ("nll_backward_serial", "nll_backward_parallel"):
        out = np.empty((300, 257), np.float32)
        with np.errstate(all="ignore"):
            getattr(module, name)(z, t, -100, g, True, count, out)
        outs.append(out)
    assert outs[0].tobytes() == outs[1].tobytes()


@pytest.mark.parametrize("n", [1, 5, 8, 13, 1000])
def test_row_max_lanes(n):
    row_max = numba_nll._module().row_max
    rng = np.random.default_rng(n)
    a = rng.normal(size=n).astype("float32")
    assert row_max(a) == a.max()
    a[-1] = np.inf
    assert row_max(a) == np.inf
    b = np.full(n, -np.inf, np.float32)
    assert row_max(b) == -np.inf
    if n > 1:
        c = a.copy()
        c[n // 2 + 1 if n > 2 else 1] = np.nan  # passed over, as one select chain does
        assert row_max(c) == np.nanmax(c)
    a[0] = np.nan  # the first element NaN: NaN
    assert np.isnan(row_max(a))
