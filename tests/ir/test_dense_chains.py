"""ir.runtime.dense_chains: a dense layer's bias + relu (or + residual) and relu's backward as one `fused` binding
each, against the bindings they replace run by the generic kernels (Executor.specialize_kernels = False: no rewrite) and by the
specialized ones without the rewrite (dense_chains.ENABLED = False), bit for bit: NaN, inf and -0.0 included,
odd shapes, broadcast biases, float64, non-contiguous arguments, NumPy's path and numba's."""
from __future__ import annotations

import numpy as np
import pytest

import ir
import tracer
from autodiff import Gradient
from ir.runtime import dense_chains, numba_hook


@pytest.fixture(params=["numpy", "numba"])
def path(request, monkeypatch):
    """Each test twice: the numba loops (tests run numba-sync) and NumPy's in-place path."""
    if request.param == "numba":
        pytest.importorskip("numba")
    else:
        monkeypatch.setattr(dense_chains, "_numba", lambda *a: None)
    return request.param


def _bits(a):
    a = np.asarray(a)
    return a.view(np.int32 if a.dtype == np.float32 else np.int64) if a.dtype.kind == "f" else a


def _same(got, want):
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            _same(g, w)
        return
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype
    assert np.array_equal(_bits(got), _bits(want)), np.argwhere(_bits(got) != _bits(want))[:5]


def _run(mod, name, args, mode):
    """(ops of the compiled function, its result on the second call: the generated function, planned storage)."""
    ex = ir.Executor(mod)
    ex.specialize_kernels = mode != "generic"
    old = dense_chains.ENABLED
    dense_chains.ENABLED = mode != "unfused"
    try:
        compiled = ex[name]
    finally:
        dense_chains.ENABLED = old
    with np.errstate(all="ignore"):
        compiled(*args)
        result = compiled(*args)
    return [b.value.op for b in compiled.fn.bindings if hasattr(b.value, "op")], result


def _check(mod, name, args, fused: int, exact_generic: bool = True):
    ops, got = _run(mod, name, args, "fused")
    generic_ops, want = _run(mod, name, args, "generic")
    unfused_ops, plain = _run(mod, name, args, "unfused")
    # the rewrite comes with numba's loops only (the NumPy path keeps the specialized bindings)
    assert ops.count("fused") == (fused if numba_hook.ENABLED else 0) + generic_ops.count("fused")
    assert unfused_ops.count("fused") == generic_ops.count("fused")
    _same(got, plain)
    if exact_generic:
        _same(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    return ops


def _special(a, rng):
    """a with NaN, -NaN, +-inf, -0.0 and +0.0 at random places."""
    flat = a.reshape(-1)
    for v in (np.nan, -np.nan, np.inf, -np.inf, -0.0, 0.0):
        flat[rng.integers(0, flat.size, 7)] = v
    return a


# ---------------------------------------------------------------- a whole MLP step


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("special", [False, True])
def test_mlp_adjoint_is_bit_equal(dtype, special, path):
    rng = np.random.default_rng(0)
    sizes, batch = (129, 1031, 1029, 7), 67  # odd, each hidden layer above numba_emit.MAX_SIZE elements
    params = []
    for a, b in zip(sizes[:-1], sizes[1:], strict=True):
        params += [(rng.standard_normal((a, b)) / np.sqrt(a)).astype(dtype), rng.standard_normal(b).astype(dtype)]
    x = rng.standard_normal((batch, sizes[0])).astype(dtype)
    one_hot = np.eye(sizes[-1], dtype=dtype)[rng.integers(0, sizes[-1], batch)]
    if special:
        x[3] = 0.0  # a zero row: its pre-activation is the bias, exactly
        params[1][::5] = -0.0
        params[0][:, 7] = -np.abs(params[0][:, 7])  # 0 * negative weights: -0.0 sums in column 7
        x[5, 2], x[9, 0], params[3][4], params[1][11] = np.nan, np.inf, -np.inf, np.nan

    def loss(x, one_hot, *ws):
        h = x
        for i in range(0, len(ws), 2):
            h = h @ ws[i] + ws[i + 1]
            if i + 2 < len(ws):
                h = tracer.relu(h)
        return -(one_hot * tracer.log_softmax(h)).sum(axis=1).mean()

    specs = [tracer.spec(a.shape, dtype) for a in (x, one_hot, *params)]
    mod = Gradient("main", require_grads=None)(tracer.trace(loss, *specs))
    ops = _check(mod, "main_adjoint", (x, one_hot, *params), fused=4)
    if numba_hook.ENABLED:
        assert "nn.relu" not in ops and "where" not in ops and "less_equal" not in ops


# ---------------------------------------------------------------- the forward form


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("x_shape,bias_shape", [((300, 257), (301,)), ((2, 150, 257), (1, 301)),
                                                ((3, 80, 33), (1, 1, 301)), ((300, 257), (1, 301))])
@pytest.mark.parametrize("bias_first", [False, True])
def test_linear_relu(dtype, x_shape, bias_shape, bias_first, path):
    rng = np.random.default_rng(1)
    x = _special(rng.standard_normal(x_shape).astype(dtype), rng)
    w = rng.standard_normal((x_shape[-1], 301)).astype(dtype)
    b = _special(rng.standard_normal(bias_shape).astype(dtype), rng)
    x[..., 0, :] = 0.0  # pre-activation = the bias there: its -0.0 and +0.0 reach the relu as they are
    x[..., 1, :] = np.nan  # a NaN product + the bias's -NaN: the first operand's payload
    b.reshape(-1)[:5] = -np.nan

    def f(x, w, b):
        return tracer.relu(b + x @ w) if bias_first else tracer.relu(x @ w + b)
    mod = tracer.trace(f, *(tracer.spec(a.shape, dtype) for a in (x, w, b)))
    # a 3-D float64 x: ir.runtime.specialize's linear layer (one 2-D GEMM, which this kernel runs too) already
    # rounds differently from the generic kernel's stack of products (OpenBLAS's dgemm blocking), not this rewrite
    exact = len(x_shape) == 2 or dtype == "float32"
    _check(mod, "main", (x, w, b), fused=1, exact_generic=exact)
    # non-contiguous arguments: a transposed x, a strided bias
    xt = np.ascontiguousarray(np.swapaxes(x, -1, -2)).swapaxes(-1, -2)
    wide = np.zeros((*bias_shape[:-1], 2 * bias_shape[-1]), dtype)
    wide[..., ::2] = b
    _check(mod, "main", (xt, w, wide[..., ::2]), fused=1, exact_generic=exact)


def _twice(h, f):
    return f(h), h


def test_linear_relu_left_alone():
    rng = np.random.default_rng(2)
    x, w = rng.standard_normal((300, 257)).astype("float32"), rng.standard_normal((257, 301)).astype("float32")
    cases = [
        (lambda x, w, b: tracer.relu(x @ w + b), (300, 301)),  # a full-size addend: no bias row
        (lambda x, w, b: _twice(x @ w + b, lambda h: tracer.relu(h)), (301,)),  # the sum returned too
        (lambda x, w, b: _twice(x @ w, lambda m: tracer.relu(m + b)), (301,)),  # the product returned too
        (lambda x, w, b: tracer.relu(x[:40] @ w[:, :40] + b[:40]), (301,)),  # small: a numba program's business
    ]
    for fn, bias_shape in cases:
        b = rng.standard_normal(bias_shape).astype("float32")
        mod = tracer.trace(fn, *(tracer.spec(a.shape, "float32") for a in (x, w, b)))
        assert _check(mod, "main", (x, w, b), fused=0).count("nn.relu") >= 1


# ---------------------------------------------------------------- the residual form (dense_chains.RESIDUAL)


@pytest.fixture
def residual(monkeypatch):
    monkeypatch.setattr(dense_chains, "RESIDUAL", True)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("x_shape,bias_shape", [((300, 257), (301,)), ((2, 150, 257), (1, 301)),
                                                ((3, 80, 33), (1, 1, 301))])
@pytest.mark.parametrize("order", [(False, False), (False, True), (True, False), (True, True)])
def test_linear_residual(dtype, x_shape, bias_shape, order, path, residual):
    rng = np.random.default_rng(10)
    bias_first, r_first = order
    out_shape = (*x_shape[:-1], 301)
    x = _special(rng.standard_normal(x_shape).astype(dtype), rng)
    w = rng.standard_normal((x_shape[-1], 301)).astype(dtype)
    b = _special(rng.standard_normal(bias_shape).astype(dtype), rng)
    r = _special(rng.standard_normal(out_shape).astype(dtype), rng)
    x[..., 0, :] = 0.0  # the product 0 there: the sums see the bias's and the residual's -0.0, NaN and inf as they are
    r[..., 0, :5] = np.nan  # NaN + -NaN: the first operand's payload
    b.reshape(-1)[:5] = -np.nan
    r[..., 0, 5:10] = -0.0

    def f(x, w, r, b):
        h = b + x @ w if bias_first else x @ w + b
        return r + h if r_first else h + r
    mod = tracer.trace(f, *(tracer.spec(a.shape, dtype) for a in (x, w, r, b)))
    exact = len(x_shape) == 2 or dtype == "float32"  # as test_linear_relu says
    _check(mod, "main", (x, w, r, b), fused=1, exact_generic=exact)
    rt = np.asfortranarray(r)  # a non-contiguous residual: NumPy's sums even with numba
    xt = np.ascontiguousarray(np.swapaxes(x, -1, -2)).swapaxes(-1, -2)
    _check(mod, "main", (xt, w, rt, b), fused=1, exact_generic=exact)


def test_linear_residual_left_alone(residual):
    rng = np.random.default_rng(11)
    x, w = rng.standard_normal((300, 257)).astype("float32"), rng.standard_normal((257, 301)).astype("float32")
    r, b = rng.standard_normal((300, 301)).astype("float32"), rng.standard_normal(301).astype("float32")
    cases = [
        lambda x, w, r, b: _twice(x @ w + b, lambda h: r + h),  # the sum returned too
        lambda x, w, r, b: _twice(x @ w, lambda m: r + (m + b)),  # the product returned too
        lambda x, w, r, b: r[:1] + (x @ w + b),  # a broadcast residual
        lambda x, w, r, b: (x @ w + r) + r,  # no bias row
    ]
    for fn in cases:
        mod = tracer.trace(fn, *(tracer.spec(a.shape, "float32") for a in (x, w, r, b)))
        assert _check(mod, "main", (x, w, r, b), fused=0).count("add") >= 2


def test_residual_is_off_by_default():
    rng = np.random.default_rng(16)
    args = tuple(rng.standard_normal(s).astype("float32") for s in ((300, 257), (257, 301), (300, 301), (301,)))
    mod = tracer.trace(lambda x, w, r, b: r + (x @ w + b), *(tracer.spec(a.shape, "float32") for a in args))
    assert "fused" not in _run(mod, "main", args, "fused")[0]


def test_gpt_block_adjoint_is_bit_equal(path, residual):
    """A pre-LN block's projections plus residual (the GPT's): the adjoint fused and unfused, bit for bit."""
    rng = np.random.default_rng(12)
    d, batch = 64, (8, 131)  # each residual above numba_emit.MAX_SIZE elements
    x = rng.standard_normal((*batch, d)).astype("float32")
    params = [rng.standard_normal((d, 4 * d)).astype("float32") / 8, rng.standard_normal(4 * d).astype("float32"),
              rng.standard_normal((4 * d, d)).astype("float32") / 16, rng.standard_normal(d).astype("float32")]

    def loss(x, w1, b1, w2, b2):
        h = x
        for _ in range(2):
            h = h + (tracer.relu(h @ w1 + b1) @ w2 + b2)
        return (h * h).sum()
    mod = Gradient("main", require_grads=None)(tracer.trace(loss, *(tracer.spec(a.shape, "float32")
                                                                    for a in (x, *params))))
    ops = _check(mod, "main_adjoint", (x, *params), fused=6)  # relu, its VJP, residual: 2 each
    if numba_hook.ENABLED:
        assert "matmul" in ops


def test_gelu_block_adjoint_keeps_the_pre_activation(path, residual):
    """The GPT's MLP: the GELU's VJP and the recomputed GELU read the sum, so gelu(add(matmul)) stays; the
    residual fuses, and the adjoint is bit-equal to the unfused one."""
    rng = np.random.default_rng(15)
    x = rng.standard_normal((8, 131, 64)).astype("float32")
    params = [rng.standard_normal((64, 256)).astype("float32") / 8, rng.standard_normal(256).astype("float32"),
              rng.standard_normal((256, 64)).astype("float32") / 16, rng.standard_normal(64).astype("float32")]

    def loss(x, w1, b1, w2, b2):
        return ((x + (tracer.gelu(x @ w1 + b1, approximate="tanh") @ w2 + b2)) ** 2).sum()
    mod = Gradient("main", require_grads=None)(tracer.trace(loss, *(tracer.spec(a.shape, "float32")
                                                                    for a in (x, *params))))
    ops, got = _run(mod, "main_adjoint", (x, *params), "fused")
    unfused_ops, plain = _run(mod, "main_adjoint", (x, *params), "unfused")
    _same(got, plain)
    assert "nn.gelu" in ops and ops.count("matmul") == unfused_ops.count("matmul") - numba_hook.ENABLED


# ---------------------------------------------------------------- the backward form


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(67, 1031), (3, 41, 601), (70001,)])
def test_relu_grad(dtype, shape, path):
    rng = np.random.default_rng(3)
    a = _special(rng.standard_normal(shape).astype(dtype), rng)
    g = _special(rng.standard_normal(shape).astype(dtype), rng)

    def f(a, g):
        return tracer.where(tracer.less_equal(a, 0.0), 0.0, g)
    mod = tracer.trace(f, tracer.spec(shape, dtype), tracer.spec(shape, dtype))
    _check(mod, "main", (a, g), fused=1)
    # a non-contiguous gradient and mask operand (NumPy's path even with numba)
    gt = np.ascontiguousarray(g[::-1])[::-1]
    at = np.zeros((2, *shape), dtype)[1]
    at[...] = a
    _check(mod, "main", (at[::-1][::-1], gt), fused=1)


def test_relu_grad_left_alone():
    rng = np.random.default_rng(4)
    a, g = rng.standard_normal((300, 301)).astype("float32"), rng.standard_normal((300, 301)).astype("float32")
    cases = [
        lambda a, g: tracer.where(tracer.less_equal(a, 0.0), 1.0, g),  # another fill
        lambda a, g: tracer.where(tracer.less_equal(a, 0.0), -0.0, g),  # -0.0: the select writes +0.0
        lambda a, g: _twice(tracer.less_equal(a, 0.0), lambda m: tracer.where(m, 0.0, g)),  # the mask returned too
        lambda a, g: tracer.where(tracer.less_equal(a[:1], 0.0), 0.0, g),  # a broadcast mask
    ]
    for fn in cases:
        mod = tracer.trace(fn, tracer.spec(a.shape, "float32"), tracer.spec(g.shape, "float32"))
        assert "where" in _check(mod, "main", (a, g), fused=0)


def test_threshold_is_kept():
    """A comparison with another constant than 0 becomes the same fused form with its constant."""
    rng = np.random.default_rng(5)
    a, g = rng.standard_normal((300, 301)).astype("float32"), rng.standard_normal((300, 301)).astype("float32")
    mod = tracer.trace(lambda a, g: tracer.where(tracer.less_equal(a, 0.25), 0.0, g),
                       tracer.spec(a.shape, "float32"), tracer.spec(g.shape, "float32"))
    _check(mod, "main", (a, g), fused=1)


def test_kernel_ignores_other_fused_exprs():
    from ir.nodes import Call, Tuple, Var
    from ir.types import TensorType

    t = TensorType((300, 301), "float32")
    xs = Tuple((Var("a", t), Var("b", t)))
    for expr in ("add(x0, x1)", "add(x3, add(matmul(x0, x1), x0))", "add(add(matmul(x0, x1), x2), x1)", "where(less_equal(x1, const(0.0, 'float32')), const(0.0, 'float32'), x0)",
                 "where(less_equal(x0, const(0.0, 'float32')), const(1.0, 'float32'), x1)",
                 "nn.relu(add(matmul(x1, x0), x0))"):
        assert dense_chains.kernel(Call("fused", (xs,), {"expr": expr}, t)) is None


# ---------------------------------------------------------------- specialize's planned where and relu


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
@pytest.mark.parametrize("shapes", [((256, 1024), (), (256, 1024)), ((256, 1024), (256, 1024), ()),
                                    ((1, 1024), (256, 1024), (256, 1024)), ((67, 1), (131,), (67, 131))])
@pytest.mark.parametrize("scratch", [False, True])
def test_planned_where_is_the_kernels_select(dtype, shapes, scratch):
    from ir.ops.elementwise import _where
    from ir.runtime.specialize import _where_
    from ir.types import TensorType

    rng = np.random.default_rng(6)
    cs, xs, ys = shapes
    shape = np.broadcast_shapes(*shapes)
    c = rng.random(cs) < 0.5
    x, y = (np.asarray(rng.standard_normal(s) * 10).astype(dtype) for s in (xs, ys))
    for a in (x, y):
        if dtype.startswith("float") and a.size > 1:
            _special(a, rng)
    run = _where_("where", [TensorType(cs, "bool"), TensorType(xs, dtype), TensorType(ys, dtype)],
                  TensorType(shape, dtype))
    out = np.full(shape, 7, dtype)
    kw = {"scratch": (np.full(shape, 3, _bits(out).dtype),)} if scratch else {}
    got = run(c, x, y, out=out, **kw)
    assert got is out
    _same(got, _where(np, c, x, y))
    _same(run(c, x, y), _where(np, c, x, y))
    y_f = np.asfortranarray(y)  # a non-contiguous operand: the same values
    _same(run(c, x, y_f, out=np.empty_like(out)), _where(np, c, x, y))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_planned_relu_into_out(dtype):
    from ir.runtime.specialize import _relu
    from ir.types import TensorType

    x = _special(np.random.default_rng(7).standard_normal((300, 301)).astype(dtype), np.random.default_rng(8))
    run = _relu("nn.relu", [TensorType(x.shape, dtype)], TensorType(x.shape, dtype))
    out = np.empty_like(x)
    assert run(x, out=out) is out and run.takes_out
    want = np.maximum(x, np.dtype(dtype).type(0))
    _same(out, want)
    _same(run(x), want)
    _same(run(x.T.copy().T), want)


def test_while_numba_loads_the_bindings_stay(monkeypatch):
    """numba's tiered start: the rewrite prepares the loops and leaves the function for the executor's re-make."""
    prepared = []
    monkeypatch.setattr(numba_hook, "ENABLED", True)
    monkeypatch.setattr(numba_hook, "ready", lambda: False)
    monkeypatch.setattr(numba_hook, "prepare", lambda key, loader: prepared.append(key))
    mod = tracer.trace(lambda a, g: tracer.where(tracer.less_equal(a, 0.0), 0.0, g),
                       tracer.spec((300, 301), "float32"), tracer.spec((300, 301), "float32"))
    fn = mod["main"]
    assert dense_chains.rewrite(fn) is fn and prepared and prepared[0][:2] == ("dense", "relu_grad")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_numpy_kernels_equal_the_reference(dtype, monkeypatch):
    """The kernels' NumPy path (no numba: reached for non-contiguous operands or a fused binding of these forms)
    against the fused op's reference kernel (the chain op by op)."""
    from ir.nodes import Call, Tuple, Var
    from ir.ops.fused import evaluate_unfused
    from ir.types import TensorType

    monkeypatch.setattr(dense_chains, "_numba", lambda *a: None)
    rng = np.random.default_rng(9)
    x, w = rng.standard_normal((300, 257)).astype(dtype), rng.standard_normal((257, 301)).astype(dtype)
    b, g = _special(rng.standard_normal(301).astype(dtype), rng), _special(rng.standard_normal((300, 301)).astype(dtype), rng)
    z = f"const(0.0, '{dtype}')"
    for expr, xs in ((f"where(less_equal(x0, {z}), {z}, x1)", (_special(x @ w, rng), g)),
                     ("nn.relu(add(matmul(x0, x1), x2))", (x, w, b)), ("nn.relu(add(x2, matmul(x0, x1)))", (x, w, b)),
                     ("add(x3, add(matmul(x0, x1), x2))", (x, w, b, g)), ("add(add(x2, matmul(x0, x1)), x3)", (x, w, b, g))):
        call = Call("fused", (Tuple(tuple(Var(f"v{k}", TensorType(a.shape, dtype)) for k, a in enumerate(xs))),),
                    {"expr": expr}, TensorType((300, 301), dtype))
        run = dense_chains.kernel(call)
        with np.errstate(all="ignore"):
            _same(run(xs), evaluate_unfused(np, expr, xs))
            _same(run(xs, out=np.empty((300, 301), dtype)), evaluate_unfused(np, expr, xs))
