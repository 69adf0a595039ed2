"""The executor: results, freeing after last use, peak bytes, op counts, argument checks, devices."""
import numpy as np
import pytest

import ir
import tracer
from ir import Builder, TensorType, Var

MIB = 1 << 20


def chain(n):
    def f(x):
        for i in range(n):
            x = tracer.tanh(x) if i % 2 else x * 1.5
        return x
    return f


def test_chain_of_20_ops_on_1mib_peaks_under_4mib():
    x = np.ones(MIB // 4, "float32")  # 1 MiB
    mod = tracer.trace(chain(20), x)
    ex = ir.Executor(mod)
    out = ex["main"](x)
    np.testing.assert_allclose(out, chain(20)(tracer.tensor(x)).numpy(), rtol=1e-6)
    assert MIB * 2 <= ex.stats.peak_bytes < 4 * MIB  # argument + one live value at a time (+ the constant)
    assert ex.stats.op_counts == {"multiply": 10, "tanh": 10}


def test_without_freeing_the_same_chain_would_hold_everything():
    # Returning every intermediate keeps them all alive: the peak counts all 20 results.
    x = np.ones(MIB // 4, "float32")

    def keep_all(x):
        outs = [x]
        for _ in range(20):
            outs.append(tracer.tanh(outs[-1]))
        return tuple(outs[1:])
    ex = ir.Executor(tracer.trace(keep_all, x))
    ex["main"](x)
    assert ex.stats.peak_bytes >= 20 * MIB


def test_identity_ops_and_views_are_not_counted_twice():
    x = np.ones(MIB // 4, "float32")
    mod = tracer.trace(lambda a: tracer.stop_gradient(tracer.reshape(a, (512, 512))) * 2.0, x)
    ex = ir.Executor(mod)
    ex["main"](x)
    assert ex.stats.peak_bytes < 2.5 * MIB


def test_argument_checks_name_the_parameter():
    ex = ir.Executor(tracer.trace(lambda x, y: x + y, tracer.spec((2, 3)), tracer.spec((3,))))
    with pytest.raises(ValueError, match="argument y expects shape \\(3,\\) and dtype float32, got shape \\(4,\\)"):
        ex["main"](np.ones((2, 3), "float32"), np.ones(4, "float32"))
    with pytest.raises(ValueError, match="dtype float32, got shape \\(3,\\) and dtype float64"):
        ex["main"](np.ones((2, 3), "float32"), np.ones(3))
    with pytest.raises(TypeError, match="takes 2 argument"):
        ex["main"](np.ones((2, 3), "float32"))


def test_unknown_function_and_device():
    mod = tracer.trace(lambda x: x * 2.0, tracer.spec((2,)))
    with pytest.raises(KeyError, match="no function named 'other'"):
        ir.Executor(mod)["other"]
    with pytest.raises(ValueError, match='device must be "cpu", "cuda" or "cuda:0"'):
        ir.Executor(mod, device="tpu")


def test_cuda_without_cupy_is_a_clear_error():
    try:
        import cupy  # noqa: F401
        pytest.skip("CuPy is installed; tests/test_cuda.py covers the GPU path")
    except ImportError:
        pass
    with pytest.raises(RuntimeError, match="needs CuPy"):
        ir.Executor(tracer.trace(lambda x: x * 2.0, tracer.spec((2,))), device="cuda")


def test_tuple_values_and_alias_bindings():
    x = Var("x", TensorType((4,)))
    b = Builder()
    t = b.tuple([x, b.call("exp", x)])
    first = b.get_item(t, 1)
    alias = b.emit(first, name="alias")
    fn = b.function([x], ir.Tuple([alias, t]))
    out = ir.Executor(ir.IRModule({"main": fn}))["main"](np.zeros(4, "float32"))
    np.testing.assert_array_equal(out[0], np.ones(4))
    assert isinstance(out[1], tuple) and len(out[1]) == 2


def test_check_types_catches_a_kernel_that_disagrees_with_inference(monkeypatch):
    from ir.ops.registry import OPS, Op

    mod = tracer.trace(lambda x: tracer.exp(x), tracer.spec((2,)))
    bad = OPS["exp"].__class__(**{**OPS["exp"].__dict__, "kernel": lambda xp, x: xp.exp(x).astype("float64")})
    assert isinstance(bad, Op)
    monkeypatch.setitem(OPS, "exp", bad)
    ir.Executor(mod)["main"](np.zeros(2, "float32"))  # unchecked: runs
    checked = ir.Executor(mod, check_types=True)
    checked.specialize_kernels = False  # the generic kernel, not exp's specialized ufunc (ir.runtime.specialize)
    with pytest.raises(ir.IRError, match='declared R.Tensor\\(\\(2,\\), dtype="float32"\\) but its kernel returned '
                                         'shape \\(2,\\) and dtype float64'):
        checked["main"](np.zeros(2, "float32"))


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "int32", "int64", "bool"])
def test_where_selects_exact_bits_with_broadcasting(dtype):
    from ir.ops.elementwise import _where

    rng = np.random.default_rng(0)
    special = np.array([np.inf, -np.inf, np.nan, -0.0, 1.5], dtype) if dtype.startswith("float") else None
    a = rng.integers(-5, 5, (4, 2048, 5)).astype(dtype)  # large enough for the bitwise path
    if special is not None:
        a[0, 0] = special
    b = np.asarray(rng.integers(-5, 5, (5,)).astype(dtype))
    c = rng.random((4, 2048, 1)) < 0.5
    got, expected = _where(np, c, a, b), np.where(c, a, b)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    assert got.tobytes() == expected.tobytes()
    assert _where(np, np.array(True), np.array(2.0, "float32"), np.array(-0.0, "float32")).shape == ()


def test_arrays_over_foreign_memory_run_and_count_their_bytes():
    # np.frombuffer of bytes (and memory maps) have a base that is not an array
    x = np.frombuffer(np.arange(4, dtype="float32").tobytes(), dtype="float32")
    mod = tracer.trace(lambda x: (tracer.exp(x) * x[1]).sum(), x)
    ex = ir.Executor(mod)
    for _ in range(2):  # the interpreted first call and the generated one
        assert float(ex["main"](x)) == pytest.approx(float(np.exp(np.arange(4)).sum()), rel=1e-6)
    assert ex.stats.peak_bytes >= x.nbytes
