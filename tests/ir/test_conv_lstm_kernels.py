"""The faster mnist / word_language_model kernels (issue 23) against their reference forms: dropout's mask by
integer comparison in chunks, max-pool backward for tiling windows, and the LSTM cell.

Each test compares with the definition the op documents (dropout: dropout_uniform(seed) >= rate; pooling: the
reference kernel of ir/ops/pool.py), so a kernel that drifts from it fails here, bit for bit where the op
promises bits.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from ir.ops import nn as nn_ops
from ir.ops import pool as pool_ops
from ir.runtime import conv_kernels


def _dropout_by_definition(x, seed, rate):
    """The op's contract: x * (u >= rate) * (1 / (1 - rate)), u = dropout_uniform(seed, x.shape) (float64)."""
    u = nn_ops.dropout_uniform(np, np.int64(seed), x.shape)
    with np.errstate(all="ignore"):
        return x * (u >= rate) * (1.0 / (1.0 - rate))


def _uniform_by_definition(seed, n):
    """splitmix64(key + (i + 1) * golden) / 2**53 on its top 53 bits, key = splitmix64(seed), from scratch."""
    m = 2**64
    def mix(z):
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) % m
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) % m
        return z ^ (z >> 31)
    key = mix(seed % m)
    return np.array([(mix((key + (i + 1) * 0x9E3779B97F4A7C15) % m) >> 11) / 2.0**53 for i in range(n)])


@pytest.mark.parametrize("seed", [0, 1, 12345, 2**62 + 7, -5])
def test_dropout_uniform_is_splitmix(seed):
    assert np.array_equal(nn_ops.dropout_uniform(np, np.int64(seed), (3, 7)).reshape(-1),
                          _uniform_by_definition(seed, 21))


@pytest.mark.parametrize("shape", [(64, 64, 3, 3), (5, 7), (), (0, 4), (1 << 14,), ((1 << 14) + 1,), (2, 40000)])
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
@pytest.mark.parametrize("rate", [0.25, 0.5, 1e-9, 0.999999, 1 - 2**-53])
def test_dropout_mask_equals_the_uniform_draw(shape, dtype, rate):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(dtype)
    if x.size > 3:  # inf, nan and the largest float: x * keep before the scale, as the definition
        x.flat[:3] = np.inf, np.nan, np.finfo(dtype).max
    for seed in (3, 2**40 + 1):
        with np.errstate(all="ignore"):
            got = nn_ops._dropout(np, x, np.int64(seed), rate)
        want = _dropout_by_definition(x, seed, rate)
        assert got.dtype == want.dtype and got.shape == want.shape
        assert np.array_equal(got, want, equal_nan=True)


def test_dropout_threshold_at_the_boundary():
    # u == rate keeps (u >= rate): the integer threshold is ceil(rate * 2**53) << 11, exactly
    for k in (1, 2**20 + 3, 2**52, 2**53 - 1):
        rate = k / 2.0**53
        t = nn_ops._threshold(rate)
        assert (t >> 11) == k and ((t - 1) >> 11) / 2.0**53 < rate <= (t >> 11) / 2.0**53
    assert nn_ops._threshold(0.3) >> 11 == math.ceil(0.3 * 2.0**53)


def test_dropout_non_contiguous_and_rate_zero():
    x = np.random.default_rng(1).standard_normal((40, 50)).astype("float32").T
    assert np.array_equal(nn_ops._dropout(np, x, np.int64(9), 0.3), _dropout_by_definition(x, 9, 0.3))
    assert nn_ops._dropout(np, x, np.int64(9), 0.0) is x


def test_dropout_keeps_about_one_minus_rate():
    x = np.ones(200000, "float32")
    kept = (nn_ops._dropout(np, x, np.int64(11), 0.25) != 0).mean()
    assert abs(kept - 0.75) < 0.005


# ---------------------------------------------------------------- max-pool backward for tiling windows


def _pool_inputs(shape, kind, rng):
    x = rng.standard_normal(shape).astype("float32")
    if kind == "ties":
        x = np.round(x).astype("float32")
    elif kind == "nan":
        x[rng.random(shape) < 0.1] = np.nan
    elif kind == "inf":
        x[:] = -np.inf
        x[..., 0, 0] = np.inf
    return x


@pytest.mark.parametrize("shape,window", [((4, 3, 24, 24), (2, 2)), ((2, 3, 7, 9), (2, 2)), ((2, 3, 9, 9), (3, 3)),
                                          ((1, 2, 4, 6), (2, 3)), ((2, 2, 5, 5), (1, 1)), ((0, 2, 4, 4), (2, 2))])
@pytest.mark.parametrize("kind", ["random", "ties", "nan", "inf"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_tiled_max_pool_backward_equals_reference(shape, window, kind, dtype):
    rng = np.random.default_rng(0)
    x = _pool_inputs(shape, kind, rng).astype(dtype)
    out_hw = ((shape[2] - window[0]) // window[0] + 1, (shape[3] - window[1]) // window[1] + 1)
    g = rng.standard_normal(shape[:2] + out_hw).astype(dtype)
    g.flat[1:2] = -0.0  # a -0.0 gradient: 0.0 in the reference (added into zeros)
    if kind == "nan" and g.size:
        g.flat[0] = np.nan  # a NaN gradient reaches every tap of its window (g * 0 in the reference's scatter)
    args = (window, window, (0, 0, 0, 0), (1, 1), False)
    want = pool_ops._max_pool2d_backward(np, g, x, *args)
    got = conv_kernels.max_pool2d_backward(np, g, x, *args)
    assert got.dtype == want.dtype and np.array_equal(got, want, equal_nan=True)
    assert np.array_equal(np.signbit(got), np.signbit(want))  # no -0.0 where the reference's sum gives 0.0


def test_overlapping_and_padded_pools_keep_the_general_path():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 3, 9, 9)).astype("float32")
    for window, strides, padding in [((3, 3), (2, 2), (0, 0, 0, 0)), ((2, 2), (2, 2), (1, 1, 1, 1))]:
        ho = (9 + padding[0] + padding[2] - window[0]) // strides[0] + 1
        g = rng.standard_normal((2, 3, ho, ho)).astype("float32")
        args = (window, strides, padding, (1, 1), False)
        assert np.array_equal(conv_kernels.max_pool2d_backward(np, g, x, *args),
                              pool_ops._max_pool2d_backward(np, g, x, *args))


# ---------------------------------------------------------------- the LSTM cell's numba loops (float32)


def _cell_inputs(b, hidden, seed=0, special=False):
    rng = np.random.default_rng(seed)
    gates = (rng.standard_normal((b, 4 * hidden)) * 3).astype("float32")
    c, dh, dc = (rng.standard_normal((b, hidden)).astype("float32") for _ in range(3))
    if special:  # saturated gates, inf and NaN: NaN stays NaN, +-inf saturate as in the NumPy kernels
        gates[0, :4] = np.inf, -np.inf, 60.0, -60.0
        gates[1, 0] = np.nan
        c[2, 0] = np.inf
    return gates, c, dh, dc


def _numba_rnn():
    pytest.importorskip("numba")
    from ir.runtime import numba_hook, numba_rnn
    if not numba_hook.ENABLED or not (numba_hook.ready() or numba_hook.wait(120)):  # ready() starts the load
        pytest.skip("numba kernels switched off (TRACEGRAD_KERNELS=numpy)")
    return numba_rnn


@pytest.mark.parametrize("shape", [(20, 200), (16, 256), (3, 1500)])
def test_numba_lstm_cell_matches_float64(shape):
    nr = _numba_rnn()
    gates, c, dh, dc = _cell_inputs(*shape)
    assert gates.size >= nr.MIN_SIZE
    from ir.ops import rnn_cell
    h, c_new = nr.lstm_cell(np, gates, c)
    h64, c64 = rnn_cell._lstm_cell(np, gates.astype("float64"), c.astype("float64"))
    assert h.dtype == c_new.dtype == np.float32
    np.testing.assert_allclose(h, h64, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(c_new, c64, rtol=1e-6, atol=1e-6)
    d, dc_prev = nr.lstm_cell_backward(np, gates, c, dh, dc)
    d64, dc64 = rnn_cell._lstm_cell_backward(np, *(a.astype("float64") for a in (gates, c, dh, dc)))
    np.testing.assert_allclose(d, d64, rtol=1e-6, atol=2e-6)
    np.testing.assert_allclose(dc_prev, dc64, rtol=1e-6, atol=2e-6)


def test_numba_lstm_cell_special_values_as_numpy():
    nr = _numba_rnn()
    from ir.ops import rnn_cell
    gates, c, dh, dc = _cell_inputs(20, 200, special=True)
    with np.errstate(all="ignore"):
        for got, want in ((nr.lstm_cell(np, gates, c), rnn_cell._lstm_cell(np, gates, c)),
                          (nr.lstm_cell_backward(np, gates, c, dh, dc),
                           rnn_cell._lstm_cell_backward(np, gates, c, dh, dc))):
            for g_, w_ in zip(got, want, strict=True):
                assert np.array_equal(np.isnan(g_), np.isnan(w_))
                np.testing.assert_allclose(g_, w_, rtol=1e-6, atol=2e-6)


def test_numba_lstm_cell_leaves_small_float64_and_strided_to_numpy():
    nr = _numba_rnn()
    from ir.ops import rnn_cell
    gates, c, dh, dc = _cell_inputs(2, 8)  # below MIN_SIZE
    assert np.array_equal(nr.lstm_cell(np, gates, c)[0], rnn_cell._lstm_cell(np, gates, c)[0])
    gates, c, dh, dc = _cell_inputs(20, 200)
    g64, c64 = gates.astype("float64"), c.astype("float64")
    assert np.array_equal(nr.lstm_cell(np, g64, c64)[1], rnn_cell._lstm_cell(np, g64, c64)[1])
    wide = np.concatenate([gates, gates], axis=1)[:, ::2]  # strided: the NumPy kernel, its exact values
    assert np.array_equal(nr.lstm_cell(np, wide, c)[0], rnn_cell._lstm_cell(np, wide, c)[0])


def test_compiled_lstm_step_uses_the_installed_cell():
    _numba_rnn()
    from ir.ops.registry import get_op
    from ir.runtime import numba_rnn
    assert get_op("nn.lstm_cell").kernel is numba_rnn.lstm_cell
    assert get_op("grad.lstm_cell_backward").kernel is numba_rnn.lstm_cell_backward


# ---------------------------------------------------------------- relu's backward after max-pool's, as one op


def _relu_data(shape, kind, rng):
    x = np.maximum(rng.standard_normal(shape), 0).astype("float32")  # a relu's output: many exact zeros
    if kind == "nan":
        x[rng.random(shape) < 0.1] = np.nan
    elif kind == "zeros":
        x[:] = 0
    return x


@pytest.mark.parametrize("shape,window", [((4, 3, 24, 24), (2, 2)), ((2, 3, 7, 9), (2, 2)), ((2, 2, 9, 9), (3, 3))])
@pytest.mark.parametrize("kind", ["relu", "nan", "zeros"])
@pytest.mark.parametrize("g_kind", ["finite", "nonfinite"])
def test_relu_max_pool2d_backward_equals_the_where(shape, window, kind, g_kind):
    rng = np.random.default_rng(3)
    x = _relu_data(shape, kind, rng)
    out_hw = (shape[2] // window[0], shape[3] // window[1])
    g = rng.standard_normal(shape[:2] + out_hw).astype("float32")
    g.flat[1] = -0.0
    if g_kind == "nonfinite":  # NaN/inf gradients: g * 0 is NaN at the window's other taps, the where's 0 kept
        g.flat[0], g.flat[2] = np.nan, -np.inf
    args = (window, window, (0, 0, 0, 0), (1, 1), False)
    with np.errstate(invalid="ignore"):
        want = np.where(x <= 0, np.float32(0), pool_ops._max_pool2d_backward(np, g, x, *args))
        ref = pool_ops._relu_max_pool2d_backward(np, g, x, *args)
        got = conv_kernels.relu_max_pool2d_backward(np, g, x, *args)
    for a in (ref, got):
        assert a.dtype == want.dtype and np.array_equal(a, want, equal_nan=True)
        assert np.array_equal(np.signbit(a), np.signbit(want))


def test_relu_max_pool2d_backward_overlapping_windows():
    rng = np.random.default_rng(4)
    x = _relu_data((2, 3, 9, 9), "relu", rng)
    g = rng.standard_normal((2, 3, 4, 4)).astype("float32")
    args = ((3, 3), (2, 2), (0, 0, 0, 0), (1, 1), False)
    want = np.where(x <= 0, np.float32(0), pool_ops._max_pool2d_backward(np, g, x, *args))
    assert np.array_equal(conv_kernels.relu_max_pool2d_backward(np, g, x, *args), want)


def _adjoint(fn, *xs):
    import ir
    import tracer
    from autodiff import Gradient
    mod = tracer.trace(fn, *(tracer.spec(x.shape, str(x.dtype)) for x in xs))
    return ir, Gradient("main", require_grads=list(mod["main"].params))(mod)


def _run_adjoint(ir, mod, x, rewritten, *more):
    ex = ir.Executor(mod)
    ex.specialize_kernels = rewritten  # off: the generic kernels and no rewrite
    compiled = ex["main_adjoint"]
    compiled(x, *more)
    return [b.value.op for b in compiled.fn.bindings if hasattr(b.value, "op")], compiled(x, *more)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_rewrite_fuses_relu_then_pool_backward(dtype):
    import tracer
    from nn import functional as F

    def loss(x):
        return (F.max_pool2d(tracer.relu(x), 2) * tracer.tensor(np.arange(1.0, 37.0).astype(dtype).reshape(6, 6))).sum()
    x = np.random.default_rng(5).standard_normal((2, 3, 12, 12)).astype(dtype)
    ir, mod = _adjoint(loss, x)
    ops, got = _run_adjoint(ir, mod, x, True)
    plain_ops, want = _run_adjoint(ir, mod, x, False)
    assert "grad.relu_max_pool2d_backward" in ops and "where" not in ops and "grad.max_pool2d_backward" not in ops
    assert "grad.relu_max_pool2d_backward" not in plain_ops and "where" in plain_ops
    (gx_got,), (gx_want,) = got[1], want[1]
    assert np.array_equal(gx_got, gx_want) and np.array_equal(np.signbit(gx_got), np.signbit(gx_want))
    assert np.count_nonzero(gx_got) and np.all(gx_got[x <= 0] == 0)


def _pool_and_sum(r):
    from nn import functional as F
    return F.max_pool2d(r, 2).sum() + r.sum()


def test_rewrite_leaves_other_patterns():
    import tracer
    from ir.runtime import pool_relu
    from nn import functional as F
    x = np.random.default_rng(6).standard_normal((2, 3, 8, 8)).astype("float32")
    for fn in (lambda x: F.max_pool2d(tracer.exp(x), 2).sum(),  # no relu
               lambda x: F.max_pool2d(tracer.relu(x) + 1.0, 2).sum(),  # the pool reads another array than the mask
               lambda x: _pool_and_sum(tracer.relu(x))):  # relu's one output read twice: its gradient is a sum
        _, mod = _adjoint(fn, x)
        before = [b.value.op for b in mod["main_adjoint"].bindings if hasattr(b.value, "op")]
        after = [b.value.op for b in pool_relu.rewrite(mod["main_adjoint"]).bindings if hasattr(b.value, "op")]
        assert "grad.max_pool2d_backward" in before and after == before


@pytest.mark.parametrize("stride,pad,groups", [(1, 0, 1), (2, 1, 1), (1, 1, 2)])
@pytest.mark.parametrize("g_kind", ["finite", "nonfinite"])
def test_relu_conv2d_input_backward_equals_the_where(stride, pad, groups, g_kind):
    from ir.ops import conv as conv_ops
    rng = np.random.default_rng(7)
    r = _relu_data((2, 4, 9, 9), "nan", rng)
    w = rng.standard_normal((6, 4 // groups, 3, 3)).astype("float32")
    ho = (9 + 2 * pad - 3) // stride + 1
    g = rng.standard_normal((2, 6, ho, ho)).astype("float32")
    if g_kind == "nonfinite":
        g.flat[0], g.flat[5] = np.nan, np.inf
    attrs = ((stride, stride), (pad,) * 4, (1, 1), groups, r.shape)
    with np.errstate(invalid="ignore"):
        dx = conv_kernels.conv2d_input_backward(np, g, w, *attrs)
        want = np.where(r <= 0, np.float32(0), dx)
        got = conv_kernels.relu_conv2d_input_backward(np, g, w, r, *attrs)
        ref = conv_ops._relu_conv2d_input_backward(np, g, w, r, *attrs)
    assert got.dtype == want.dtype and np.array_equal(got, want, equal_nan=True)
    assert np.array_equal(np.signbit(got), np.signbit(want))
    np.testing.assert_allclose(ref, want, rtol=1e-5, atol=1e-5)  # the generic kernel: another summation order


def test_rewrite_fuses_the_conv_after_a_relu():
    import tracer
    from nn import functional as F
    rng = np.random.default_rng(8)
    w = rng.standard_normal((4, 3, 3, 3)).astype("float32")

    def loss(x, w):
        return (F.conv2d(tracer.relu(x), w) ** 2).sum()
    x = rng.standard_normal((2, 3, 8, 8)).astype("float32")
    ir, mod = _adjoint(loss, x, w)
    ops, got = _run_adjoint(ir, mod, x, True, w)
    plain_ops, want = _run_adjoint(ir, mod, x, False, w)
    assert "grad.relu_conv2d_input_backward" in ops and "where" not in ops
    assert "grad.relu_conv2d_input_backward" not in plain_ops
    (gx_got, _), (gx_want, _) = got[1], want[1]
    np.testing.assert_allclose(gx_got, gx_want, rtol=1e-5, atol=1e-5)  # plain: the generic conv kernels
    assert np.all(gx_got[x <= 0] == 0) and np.count_nonzero(gx_got)


# ---------------------------------------------------------------- an RNN's W_hh^T copied once (weight_layout)


def _compiled_step(step):
    import gc

    from ir.runtime.executor import CompiledFunction
    return [o for o in gc.get_referrers(step) if isinstance(o, CompiledFunction)]


def test_transpose_copy_kernel():
    from ir.ops import rnn_cell
    w = np.random.default_rng(9).standard_normal((5, 7)).astype("float32")
    t = rnn_cell._transpose_copy(np, w)
    assert t.flags.c_contiguous and np.array_equal(t, w.T) and not np.shares_memory(t, w)


def _ops_of(vg):
    return [b.value.op for b in vg.last.step.fn.bindings if hasattr(b.value, "op")]


def test_rewrite_copies_the_recurrent_weight_once(monkeypatch):
    import autodiff
    import nn
    import tracer
    from ir.runtime import weight_layout
    monkeypatch.setattr(weight_layout, "MIN_SIZE", 1)  # a small LSTM: its (32, 8) W_hh copied all the same
    lstm = nn.LSTM(4, 8, 2)
    x = tracer.tensor(np.random.default_rng(10).standard_normal((6, 3, 4)).astype("float32"))
    params = list(lstm.parameters())
    copied = autodiff.value_and_grad(lambda x: (lstm(x)[0] ** 2).sum(), wrt=params)
    got = [copied(x) for _ in range(2)][-1]  # the second call runs the generated function
    monkeypatch.setattr(weight_layout, "rewrite", lambda fn: fn)
    plain = autodiff.value_and_grad(lambda x: (lstm(x)[0] * lstm(x)[0]).sum(), wrt=params)
    want = [plain(x) for _ in range(2)][-1]
    assert _ops_of(copied).count("layout.transpose_copy") == 2  # W_hh^T of each layer, read by the 6 steps
    assert "layout.transpose_copy" not in _ops_of(plain)
    np.testing.assert_allclose(float(got[0]), float(want[0]), rtol=1e-6)
    for a, b in zip(got[1], want[1], strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)


def test_rewrite_leaves_a_weight_read_once_or_otherwise(monkeypatch):
    import tracer
    from ir.runtime import weight_layout
    x, w = np.ones((3, 4), "float32"), np.ones((6, 4), "float32")
    monkeypatch.setattr(weight_layout, "MIN_SIZE", 1)  # so only the reads decide
    for fn in (lambda x, w: tracer.matmul(x, tracer.permute_dims(w, [1, 0])).sum(),  # read once
               lambda x, w: _twice_and_summed(x, tracer.permute_dims(w, [1, 0]))):  # also read by a sum
        _, mod = _adjoint(fn, x, w)
        for name in ("main", "main_adjoint"):
            ops = [b.value.op for b in weight_layout.rewrite(mod[name]).bindings if hasattr(b.value, "op")]
            assert "layout.transpose_copy" not in ops


def test_rewrite_leaves_small_weights(monkeypatch):
    import tracer
    from ir.runtime import weight_layout

    def loss(x, w):
        wt = tracer.permute_dims(w, [1, 0])
        return (tracer.matmul(x, wt) + tracer.matmul(x * 2.0, wt)).sum()
    x, w = np.ones((3, 4), "float32"), np.ones((6, 4), "float32")
    _, mod = _adjoint(loss, x, w)

    def ops():
        return [b.value.op for b in weight_layout.rewrite(mod["main"]).bindings if hasattr(b.value, "op")]
    assert "layout.transpose_copy" not in ops()  # 24 elements: below MIN_SIZE
    monkeypatch.setattr(weight_layout, "MIN_SIZE", 24)
    assert "layout.transpose_copy" in ops()  # the same function once the size counts


def _twice_and_summed(x, wt):
    import tracer
    return (tracer.matmul(x, wt) + tracer.matmul(x * 2.0, wt)).sum() + wt.sum()


# ---------------------------------------------------------------- conv input gradient on the input's row width


@pytest.mark.parametrize("shape,o,kernel,padding", [((4, 32, 26, 26), 64, (3, 3), (0, 0, 0, 0)),
                                                    ((2, 3, 7, 6), 4, (3, 3), (1, 1, 1, 1)),
                                                    ((3, 2, 5, 8), 5, (2, 2), (1, 0, 2, 1)),
                                                    ((2, 4, 6, 6), 3, (2, 3), (0, 0, 0, 0)),
                                                    ((1, 1, 4, 4), 2, (1, 1), (0, 0, 0, 0))])
@pytest.mark.parametrize("special", ["none", "nan_g", "inf_w"])
def test_conv_input_backward_wide_rows(shape, o, kernel, padding, special):
    from ir.ops import conv as conv_ops
    rng = np.random.default_rng(11)
    n, c, h, w = shape
    ho, wo = h + padding[0] + padding[2] - kernel[0] + 1, w + padding[1] + padding[3] - kernel[1] + 1
    weight = rng.standard_normal((o, c) + kernel).astype("float32")
    g = rng.standard_normal((n, o, ho, wo)).astype("float32")
    if special == "nan_g":
        g[0, 0, 0, -1] = np.nan  # the last column: its neighbours in the widened row must stay finite
    elif special == "inf_w":
        weight[0, 0, 0, 0] = np.inf  # inf * 0 in widened columns would be NaN: the general path runs
    args = ((1, 1), padding, (1, 1), 1, shape)
    with np.errstate(invalid="ignore"):
        got = conv_kernels.conv2d_input_backward(np, g, weight, *args)
        want = conv_ops._conv2d_input_backward(np, g.astype("float64"), weight.astype("float64"), *args)
    assert got.shape == shape and got.dtype == np.float32
    assert np.array_equal(np.isnan(got), np.isnan(want)) and np.array_equal(np.isinf(got), np.isinf(want))
    ok = np.isfinite(want)
    np.testing.assert_allclose(got[ok], want[ok], rtol=1e-5, atol=1e-4)  # float32 sums of up to 576 products


# ---------------------------------------------------------------- im2col / col2im as numba loops


@pytest.mark.parametrize("shape,o,kernel,strides,padding,dilation", [
    ((4, 32, 26, 26), 64, (3, 3), (1, 1), (0, 0, 0, 0), (1, 1)),
    ((3, 1, 28, 28), 8, (3, 3), (1, 1), (0, 0, 0, 0), (1, 1)),
    ((2, 3, 9, 8), 4, (3, 2), (2, 1), (1, 0, 2, 1), (1, 1)),
    ((2, 2, 11, 11), 3, (3, 3), (2, 2), (1, 1, 1, 1), (2, 2)),
])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_numba_columns_give_numpys_bits(monkeypatch, shape, o, kernel, strides, padding, dilation, dtype):
    pytest.importorskip("numba")
    from ir.runtime import numba_conv, numba_hook
    if not numba_conv.usable(dtype) and not numba_hook.wait(120):
        pytest.skip("numba kernels switched off (TRACEGRAD_KERNELS=numpy)")
    rng = np.random.default_rng(12)
    x = rng.standard_normal(shape).astype(dtype)
    w = rng.standard_normal((o, shape[1]) + kernel).astype(dtype)
    attrs = (strides, padding, dilation, 1)

    def run():
        y = conv_kernels.conv2d(np, x, w, *attrs)
        g = np.cos(y).astype(dtype)
        return (y, conv_kernels.conv2d_weight_backward(np, g, x, *attrs, w.shape),
                conv_kernels.conv2d_input_backward(np, g, w, *attrs, x.shape))
    assert numba_conv.usable(dtype)
    fast = run()
    monkeypatch.setattr(numba_conv, "usable", lambda dtype: False)
    plain = run()
    for a, b in zip(fast, plain, strict=True):
        assert a.dtype == b.dtype and np.array_equal(a, b)


# ---------------------------------------------------------------- dropout as one numba loop


@pytest.mark.parametrize("shape", [(64, 64, 12, 12), (20000,), (35, 20, 200)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_numba_dropout_gives_the_ops_bits(shape, dtype):
    pytest.importorskip("numba")
    from ir.runtime import numba_dropout, numba_hook
    if not numba_hook.ENABLED or not (numba_hook.ready() or numba_hook.wait(120)):
        pytest.skip("numba kernels switched off (TRACEGRAD_KERNELS=numpy)")
    assert np.prod(shape) >= numba_dropout.MIN_SIZE
    x = np.random.default_rng(13).standard_normal(shape).astype(dtype)
    x.flat[:4] = np.inf, np.nan, -2.0, np.finfo(dtype).max
    for seed in (3, 2**40 + 1, -7):
        for rate in (0.25, 0.5, 1e-9, 0.999999):
            with np.errstate(all="ignore"):
                got = numba_dropout.dropout(np, x, np.int64(seed), rate)
                want = _dropout_by_definition(x, seed, rate)
            assert got.dtype == want.dtype and got.shape == want.shape
            assert np.array_equal(got, want, equal_nan=True) and np.array_equal(np.signbit(got), np.signbit(want))


# ---------------------------------------------------------------- a conv layer's bias and relu in its kernel


@pytest.mark.parametrize("strides,padding", [((1, 1), (0, 0, 0, 0)), ((2, 1), (1, 0, 2, 1))])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_conv2d_bias_relu_equals_its_bindings(strides, padding, dtype):
    rng = np.random.default_rng(14)
    x = rng.standard_normal((5, 3, 9, 8)).astype(dtype)
    x[0, 0, 0, :3] = np.nan, np.inf, -np.inf
    w = rng.standard_normal((4, 3, 3, 3)).astype(dtype)
    b = rng.standard_normal((1, 4, 1, 1)).astype(dtype)
    b[0, 1] = -0.0
    attrs = (strides, padding, (1, 1), 1)
    with np.errstate(invalid="ignore"):
        want = np.maximum(conv_kernels.conv2d(np, x, w, *attrs) + b, np.zeros((), dtype))
        got = conv_kernels.conv2d_bias_relu(np, x, w, b, *attrs)
    assert got.dtype == want.dtype and np.array_equal(got, want, equal_nan=True)
    assert np.array_equal(np.signbit(got), np.signbit(want))


def test_rewrite_fuses_a_conv_layer_with_its_bias_and_relu():
    import tracer
    from nn import functional as F
    rng = np.random.default_rng(15)
    w, b = rng.standard_normal((4, 3, 3, 3)).astype("float32"), rng.standard_normal(4).astype("float32")

    def loss(x, w, b):
        return (F.max_pool2d(tracer.relu(F.conv2d(x, w, b)), 2) ** 2).sum()
    x = rng.standard_normal((2, 3, 10, 10)).astype("float32")
    ir, mod = _adjoint(loss, x, w, b)
    ops, got = _run_adjoint(ir, mod, x, True, w, b)
    plain_ops, want = _run_adjoint(ir, mod, x, False, w, b)
    assert "nn.conv2d_bias_relu" in ops and "nn.relu" not in ops and "nn.conv2d" not in ops
    assert "nn.conv2d_bias_relu" not in plain_ops
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5)
    for a, c in zip(got[1], want[1], strict=True):
        np.testing.assert_allclose(a, c, rtol=1e-4, atol=1e-4)  # plain: the generic conv kernels' summation order
