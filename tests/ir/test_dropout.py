"""nn.dropout's counter-based mask: element i (flat, C order) is kept when
splitmix64(splitmix64(seed) + (i + 1) * golden) / 2**64 >= rate. The mask is a function of
(seed, flat index, rate) only: not of the device, not of any global random state."""
import numpy as np
import pytest

import ir
import tracer
from ir.ops.nn import dropout_uniform
from tests.cases.nn import dropout_ref


def _drop(x, p, seed):
    return tracer.dropout(tracer.tensor(x), p, seed=seed).numpy()


def test_same_seed_same_mask_eager_and_executor():
    x = np.ones((64, 33), "float32")
    a, b = _drop(x, 0.4, 123), _drop(x, 0.4, 123)
    np.testing.assert_array_equal(a, b)
    mod = tracer.trace(lambda t: tracer.dropout(t, 0.4, seed=123), x)
    np.testing.assert_array_equal(ir.Executor(mod)["main"](x), a)


def test_different_seeds_differ_and_are_uncorrelated():
    x = np.ones(20000, "float32")
    a, b = _drop(x, 0.5, 1) != 0, _drop(x, 0.5, 2) != 0
    agree = np.mean(a == b)
    assert 0.47 < agree < 0.53  # independent masks agree half the time at p = 0.5


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_density_and_scale(p):
    x = np.full((400, 500), 3.0, "float32")
    y = _drop(x, p, 2024)
    kept = y != 0
    assert abs(kept.mean() - (1 - p)) < 0.01  # 200000 draws: the standard error is under 0.0012
    np.testing.assert_allclose(y[kept], np.float32(3.0 / (1 - p)), rtol=1e-6)


def test_uniforms_are_uniform_in_unit_interval():
    u = dropout_uniform(np, np.asarray(99, "int64"), (100000,))
    assert u.dtype == np.float64 and u.min() >= 0.0 and u.max() < 1.0
    counts = np.bincount((u * 10).astype(int), minlength=10)
    assert np.all(np.abs(counts - 10000) < 500)  # 5 standard deviations


def test_mask_depends_on_flat_index_only():
    x = np.arange(1, 25, dtype="float32")
    flat = _drop(x, 0.5, 7)
    np.testing.assert_array_equal(_drop(x.reshape(4, 6), 0.5, 7).reshape(-1), flat)
    np.testing.assert_array_equal(_drop(x.reshape(2, 3, 4), 0.5, 7).reshape(-1), flat)
    np.testing.assert_array_equal(_drop(x[:10], 0.5, 7), flat[:10])  # a prefix keeps its mask


@pytest.mark.parametrize("seed", [0, -1, 2**62 + 12345])
def test_matches_python_integer_reference(seed):
    x = np.linspace(-1, 1, 30, dtype="float32").reshape(5, 6)
    np.testing.assert_allclose(_drop(x, 0.25, seed), dropout_ref(x, 0.25, seed), rtol=1e-6)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_keeps_dtype(dtype):
    assert _drop(np.ones(8, dtype), 0.5, 3).dtype == dtype


def test_rate_zero_and_eval_are_identity():
    x = tracer.tensor(np.arange(6, dtype="float32"))
    assert tracer.dropout(x, 0.0) is x
    assert tracer.dropout(x, 0.7, training=False) is x
    seed = ir.const(5, "int64")
    out = ir.get_op("nn.dropout").kernel(np, x.numpy(), seed.data, rate=0.0)
    np.testing.assert_array_equal(out, x.numpy())


@pytest.mark.parametrize("p", [1.01, -0.1, 1.5, True, "0.5"])  # p == 1 drops all, as torch
def test_bad_p_is_a_value_error_naming_dropout_and_p(p):
    with pytest.raises(ValueError, match="dropout: p"):
        tracer.dropout(tracer.ones((3,)), p)


@pytest.mark.parametrize("rate", [1.0, -0.5])
def test_op_rejects_rate_outside_unit_interval(rate):
    x, seed = ir.Var("x", ir.TensorType((3,))), ir.Var("seed", ir.TensorType((), "int64"))
    with pytest.raises(ir.IRError, match=r"nn.dropout: rate must be in \[0, 1\)"):
        ir.make_call("nn.dropout", [x, seed], {"rate": rate})


@pytest.mark.parametrize("seed_type", [ir.TensorType((1,), "int64"), ir.TensorType((), "float32")])
def test_op_rejects_bad_seed(seed_type):
    x = ir.Var("x", ir.TensorType((3,)))
    with pytest.raises(ir.IRError, match="argument seed must be a 0-d int64 tensor"):
        ir.make_call("nn.dropout", [x, ir.Var("seed", seed_type)], {"rate": 0.5})


def test_seed_none_draws_fresh_masks_eagerly():
    x = tracer.ones((1000,))
    a, b = tracer.dropout(x, 0.5).numpy(), tracer.dropout(x, 0.5).numpy()
    assert not np.array_equal(a, b)


def test_seed_none_in_a_trace_becomes_a_parameter():
    mod = tracer.trace(lambda t: tracer.dropout(t, 0.5), tracer.spec((4,)))
    params = mod["main"].params
    assert [p.type for p in params] == [ir.TensorType((4,)), ir.TensorType((), "int64")]
    fixed = tracer.trace(lambda t: tracer.dropout(t, 0.5, seed=3), tracer.spec((4,)))
    assert len(fixed["main"].params) == 1 and "R.const(3, \"int64\")" in str(fixed)


def test_cupy_draws_the_numpy_mask():
    cupy = pytest.importorskip("cupy")
    try:
        cupy.cuda.runtime.getDeviceCount()
    except Exception:
        pytest.skip("no usable GPU")
    seed = np.asarray(-42, "int64")
    u_cpu = dropout_uniform(np, seed, (3, 1000))
    u_gpu = dropout_uniform(cupy, cupy.asarray(seed), (3, 1000))
    np.testing.assert_array_equal(cupy.asnumpy(u_gpu), u_cpu)
