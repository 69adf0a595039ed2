"""Planned storage for the conv family (ir.runtime.conv_specialize) and the numba 2x2 max-pool backward
(ir.runtime.numba_conv): the same values as the generic kernels, into `out`, with no large output of an mnist-like
step left to allocate."""
from __future__ import annotations

import numpy as np
import pytest

import autodiff
import nn.functional as F
import tracer
from ir.ops import pool as pool_ops
from ir.runtime import conv_kernels, conv_specialize, numba_conv, numba_hook
from ir.runtime.executor import CompiledFunction

_POOL_ARGS = ((2, 2), (2, 2), (0, 0, 0, 0), (1, 1), False)


def _relu_data(shape, kind, dtype, rng):
    x = np.maximum(rng.standard_normal(shape), 0).astype(dtype)
    if kind == "nan":
        x[rng.random(shape) < 0.1] = np.nan
    elif kind == "ties":
        x = rng.integers(-2, 3, shape).astype(dtype)
        x[x == 0] = -0.0
    elif kind == "inf":
        x[rng.random(shape) < 0.2] = np.inf
        x[rng.random(shape) < 0.2] = -np.inf
    return x


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("kind", ["relu", "nan", "ties", "inf"])
@pytest.mark.parametrize("relu", [False, True])
def test_numba_pool_backward_equals_reference(dtype, kind, relu):
    pytest.importorskip("numba")
    rng = np.random.default_rng(7)
    x = _relu_data((3, 5, 8, 6), kind, dtype, rng)
    g = rng.standard_normal((3, 5, 4, 3)).astype(dtype)
    g.flat[:4] = np.nan, -np.inf, -0.0, np.inf
    ref = pool_ops._relu_max_pool2d_backward if relu else pool_ops._max_pool2d_backward
    with np.errstate(invalid="ignore"):
        want = ref(np, g, x, *_POOL_ARGS)
        dx = np.full(x.shape, 123.0, dtype)
        assert numba_hook.ready() and numba_conv.pool_backward(dx, g, x, (2, 2), relu)
    assert np.array_equal(dx, want, equal_nan=True) and np.array_equal(np.signbit(dx), np.signbit(want))


def test_numba_pool_backward_refuses_what_it_does_not_cover():
    x = np.zeros((1, 1, 6, 6), "float32")
    g = np.zeros((1, 1, 3, 3), "float32")
    dx = np.empty_like(x)
    assert not numba_conv.pool_backward(dx, g, x, (3, 3), False)  # another window
    assert not numba_conv.pool_backward(dx, np.zeros((1, 1, 3, 6), "float32")[..., ::2], x, (2, 2), False)
    assert not numba_conv.pool_backward(dx[..., :5], g, x[..., :5], (2, 2), False)  # odd width
    assert not numba_conv.pool_backward(dx.astype("float64"), g, x, (2, 2), False)  # mixed dtypes


@pytest.mark.parametrize("relu", [False, True])
@pytest.mark.parametrize("numba", [True, False])
@pytest.mark.parametrize("hw", [(10, 10), (11, 9)])
def test_pool_backward_into_out_equals_without(relu, numba, hw, monkeypatch):
    if not numba:  # NumPy's tap by tap path, as before numba loads or without it
        monkeypatch.setattr(numba_conv, "pool_backward", lambda *a: False)
    rng = np.random.default_rng(1)
    x = _relu_data((2, 3) + hw, "relu", "float32", rng)
    g = rng.standard_normal((2, 3, hw[0] // 2, hw[1] // 2)).astype("float32")
    fn = conv_kernels.relu_max_pool2d_backward if relu else conv_kernels.max_pool2d_backward
    want = fn(np, g, x, *_POOL_ARGS)
    for kind in ("nan", "nan_at_a_window"):
        if kind == "nan_at_a_window":
            x.flat[5] = np.nan
            want = fn(np, g, x, *_POOL_ARGS)
        out = np.full(x.shape, np.nan, "float32")
        work = [np.full(shape, True if dtype == "bool" else np.nan, dtype)
                for shape, dtype in conv_kernels.pool_work(g.shape, "float32")]  # planned arrays hold old values
        got = fn(np, g, x, *_POOL_ARGS, out=out, work=work)
        assert np.array_equal(got, want, equal_nan=True)
        assert np.array_equal(fn(np, g, x, *_POOL_ARGS, out=out, work=work), want, equal_nan=True)


def test_conv_kernels_into_out_equal_without():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((5, 3, 9, 8)).astype("float32")
    w = rng.standard_normal((4, 3, 3, 3)).astype("float32")
    b = rng.standard_normal((1, 4, 1, 1)).astype("float32")
    conv = dict(strides=(1, 1), padding=(0, 0, 0, 0), dilation=(1, 1), groups=1)
    y = conv_kernels.conv2d(np, x, w, **conv)
    cols = np.full(conv_kernels.conv_columns(x.shape, w.shape, y.shape, 4), np.nan, "float32")
    out = np.full(y.shape, np.nan, "float32")
    assert np.array_equal(conv_kernels.conv2d_bias_relu(np, x, w, b, **conv, out=out, cols=cols),
                          conv_kernels.conv2d_bias_relu(np, x, w, b, **conv))
    g = rng.standard_normal(y.shape).astype("float32")
    dw = np.full(w.shape, np.nan, "float32")
    assert np.array_equal(conv_kernels.conv2d_weight_backward(np, g, x, **conv, weight_shape=w.shape, out=dw,
                                                              cols=cols),
                          conv_kernels.conv2d_weight_backward(np, g, x, **conv, weight_shape=w.shape))
    for padding in ((0, 0, 0, 0), (1, 1, 1, 1)):
        p = {**conv, "padding": padding}
        gp = rng.standard_normal(conv_kernels.conv2d(np, x, w, **p).shape).astype("float32")
        dx = np.full(x.shape, np.nan, "float32")
        got = conv_kernels.relu_conv2d_input_backward(np, gp, w, x, **p, input_shape=x.shape, out=dx)
        assert np.array_equal(got, conv_kernels.relu_conv2d_input_backward(np, gp, w, x, **p, input_shape=x.shape))


def _mnist_like(x, w1, b1, w2, b2, seed):
    h = tracer.relu(F.conv2d(x, w1, b1))
    h = F.max_pool2d(tracer.relu(F.conv2d(h, w2, b2)), 2)
    return (F.dropout(h, 0.25, training=True, seed=seed) ** 2).sum()


def _step_arrays(rng):
    return [rng.standard_normal(s).astype("float32") for s in ((16, 1, 28, 28), (8, 1, 3, 3), (8,), (16, 8, 3, 3),
                                                                  (16,))]


def test_mnist_like_step_plans_every_large_output_and_keeps_its_values():
    import gc
    rng = np.random.default_rng(3)
    arrays = _step_arrays(rng)
    params = [tracer.tensor(a) for a in arrays[1:]]
    older = [o for o in gc.get_objects() if type(o) is CompiledFunction]  # other tests' (generic, unplanned) ones
    vg = autodiff.value_and_grad(lambda x, *ps: _mnist_like(x, *ps, seed=5), wrt=params)
    for _ in range(3):  # the interpreter's first call, then the generated function with its planned arrays
        vg(tracer.tensor(arrays[0]), *params)
    c, = [o for o in gc.get_objects() if type(o) is CompiledFunction and "nn.conv2d_bias_relu" in o.instr_ops
          and not any(o is k for k in older)]
    planned_ops = {c.instr_ops[i] for i in c.storage}
    assert {"nn.conv2d_bias_relu", "nn.max_pool2d", "grad.relu_max_pool2d_backward",
            "grad.relu_conv2d_input_backward"} <= planned_ops
    fn, name, xp, stats, check, reuse, _, _ = c._remake
    generic = CompiledFunction(fn, name, xp, stats, check, reuse, False, False)  # generic kernels, no plan
    with np.errstate(all="ignore"):
        for _ in range(2):
            got, want = _flat(c(*arrays)), _flat(generic(*arrays))
            assert len(got) == 5
            for a, b in zip(got, want, strict=True):
                assert np.array_equal(np.asarray(a), np.asarray(b), equal_nan=True)


def _flat(r):
    return [a for x in r for a in _flat(x)] if isinstance(r, tuple) else [r]


def test_builders_leave_what_they_do_not_cover():
    from ir.types import TensorType
    f32 = TensorType((2, 3, 8, 8), "float32")
    f16 = TensorType((2, 3, 8, 8), "float16")
    w = TensorType((4, 3, 3, 3), "float32")
    out = TensorType((2, 4, 6, 6), "float32")
    attrs = dict(strides=(1, 1), padding=(0, 0, 0, 0), dilation=(1, 1))
    assert conv_specialize.BUILDERS["nn.conv2d"]("nn.conv2d", [f32, w], out, **attrs, groups=1) is not None
    assert conv_specialize.BUILDERS["nn.conv2d"]("nn.conv2d", [f32, w], out, **attrs, groups=3) is None
    assert conv_specialize.BUILDERS["nn.conv2d"]("nn.conv2d", [f16, w], out, **attrs, groups=1) is None
    assert conv_specialize.BUILDERS["nn.dropout"]("nn.dropout", [f32, TensorType((), "int64")], f32, rate=0.0) is None


@pytest.mark.parametrize("numba", [True, False])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_dropout_into_out_equals_without(numba, dtype, monkeypatch):
    from ir.runtime import numba_dropout
    if not numba:  # the op's NumPy kernel, chunk by chunk (numba not loaded, or TRACEGRAD_KERNELS=numpy)
        monkeypatch.setattr(numba_dropout.numba_hook, "ready", lambda: False)
    x = np.random.default_rng(4).standard_normal((3, 50000)).astype(dtype)
    x.flat[:3] = np.nan, np.inf, -0.0
    seed = np.int64(11)
    with np.errstate(invalid="ignore"):
        want = numba_dropout.dropout(np, x, seed, 0.25)
        out = np.full(x.shape, 7.0, dtype)
        got = numba_dropout.dropout(np, x, seed, 0.25, out=out)
    assert got is out and np.array_equal(got, want, equal_nan=True)
    assert np.array_equal(np.signbit(got), np.signbit(want))
