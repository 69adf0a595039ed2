"""Numeric traps (issue 8, item 7): each behaviour eagerly and through a compiled step, tracegrad alone.
The same scenarios against PyTorch are in tests/tracer/test_numerics_torch.py."""
import math

import numpy as np
import pytest

import autodiff
import ir
import tracer

FLOATS = ["float32", "float64"]


def compiled(fn, *arrays):
    """fn(*tensors).sum() and its gradient wrt every floating input, through value_and_grad."""
    tensors = [tracer.tensor(a) for a in arrays]
    wrt = [t for t in tensors if t.dtype.startswith("float")]
    value, grads = autodiff.value_and_grad(lambda *xs: tracer.sum(fn(*xs)), wrt=wrt)(*tensors)
    return np.asarray(value), [np.asarray(g) for g in grads]


# ---------------------------------------------------------------- sigmoid, log_sigmoid


@pytest.mark.parametrize("dtype", FLOATS)
def test_sigmoid_exact_in_both_tails(dtype):
    x = np.array([-80.0, -40.0, -20.0, -1.0, 0.0, 1.0, 20.0, 40.0, 80.0], dtype)  # -100: a float32 denormal
    exact = 1.0 / (1.0 + np.exp(-x.astype("float64")))
    out = tracer.sigmoid(tracer.tensor(x)).numpy()
    assert out.dtype == dtype
    np.testing.assert_allclose(out, exact, rtol=1e-6 if dtype == "float32" else 1e-14, atol=0)
    assert out[2] > 0  # the old 0.5 * (1 + tanh(x / 2)) gave exactly 0 at -20 in float32
    value, (grad,) = compiled(tracer.sigmoid, x)
    np.testing.assert_allclose(value, exact.sum(), rtol=1e-6)
    exact_grad = exact * (1.0 / (1.0 + np.exp(x.astype("float64"))))  # s(x) * s(-x), exact in both tails
    np.testing.assert_allclose(grad, exact_grad, rtol=1e-5 if dtype == "float32" else 1e-13, atol=0)
    assert grad[6] > 0 and grad[2] > 0  # y * (1 - y) rounds the right tail to 0


def test_minus_log_sigmoid_is_finite_at_minus_20():
    x = tracer.tensor(np.array([-20.0], "float32"))
    np.testing.assert_allclose((-tracer.log(tracer.sigmoid(x))).numpy(), [20.0], rtol=1e-6)


@pytest.mark.parametrize("dtype", FLOATS)
def test_log_sigmoid_stable_for_any_logit(dtype):
    x = np.array([-1e4, -200.0, -30.0, -1.0, 0.0, 1.0, 30.0, 200.0, 1e4], dtype)
    exact = -np.logaddexp(0.0, -x.astype("float64"))
    out = tracer.log_sigmoid(tracer.tensor(x)).numpy()
    assert out.dtype == dtype and np.isfinite(out).all()
    # the right tail too (-exp(-30), not 0), down to the dtype's smallest normal number
    np.testing.assert_allclose(out, exact, rtol=1e-6, atol=np.finfo(dtype).tiny)
    _, (grad,) = compiled(tracer.log_sigmoid, x)
    sigmoid_of_minus_x = np.exp(-np.logaddexp(0.0, x.astype("float64")))
    np.testing.assert_allclose(grad, sigmoid_of_minus_x, rtol=1e-6, atol=np.finfo(dtype).tiny)


# ---------------------------------------------------------------- division


def test_true_division_of_integer_tensors_is_float32():
    a, b = tracer.tensor(np.array([7, -7, 1], "int64")), tracer.tensor(np.array([2, 2, 3], "int32"))
    for out in (a / b, tracer.divide(a, b), a / 2, 7 / b, tracer.tensor([True, False]) / 2):
        assert out.dtype == "float32"
    np.testing.assert_allclose((a / b).numpy(), [3.5, -3.5, 1 / 3], rtol=1e-7)
    mod = tracer.trace(lambda a, b: a / b, a, b)
    assert [b.value.op for b in mod["main"].bindings][-1] == "divide"
    assert mod["main"].ret_type.dtype == "float32"


def test_python_integers_passed_to_a_compiled_step_divide_as_python():
    x = tracer.tensor(np.ones(2, "float64"))
    step = autodiff.value_and_grad(lambda x, n: (x * (n / 3)).sum(), wrt=[x])
    for n in (1, 2, 7):
        value, (g,) = step(x, n)
        assert float(value) == 2 * (n / 3) and np.asarray(g).tolist() == [n / 3, n / 3]  # float64, not float32


def test_ir_divide_keeps_truncating_integer_division():
    x1, x2 = ir.Var("x1", ir.TensorType((2,), "int64")), ir.Var("x2", ir.TensorType((2,), "int64"))
    bld = ir.Builder()
    out = bld.emit(ir.make_call("divide", [x1, x2]))
    mod = ir.IRModule({"main": ir.Function([x1, x2], [ir.Block(bld.bindings)], out)})
    got = ir.Executor(mod)["main"](np.array([7, -7]), np.array([2, 2]))
    assert got.dtype == "int64" and got.tolist() == [3, -3]
    with pytest.raises(ZeroDivisionError, match="divide"):
        ir.Executor(mod)["main"](np.array([7, -7]), np.array([2, 0]))


@pytest.mark.parametrize("dtype", ["int32", "int64", "float32", "float64"])
def test_floor_divide_and_remainder_follow_python(dtype):
    a = np.array([7, -7, 7, -7, 0, 6], dtype)
    b = np.array([2, 2, -2, -2, 3, 3], dtype)
    ta, tb = tracer.tensor(a), tracer.tensor(b)
    want_q = [7 // 2, -7 // 2, 7 // -2, -7 // -2, 0, 2]
    want_r = [7 % 2, -7 % 2, 7 % -2, -7 % -2, 0, 0]
    for q in (ta // tb, tracer.floor_divide(ta, tb), ta.floor_divide(tb)):
        assert q.dtype == dtype and q.numpy().tolist() == want_q
    for r in (ta % tb, tracer.remainder(ta, tb), ta.remainder(tb)):
        assert r.dtype == dtype and r.numpy().tolist() == want_r
    assert (7 // tb).numpy().tolist() == [3, 3, -4, -4, 2, 2] and (ta // 3).numpy().tolist()[:2] == [2, -3]
    assert (7 % tb).numpy().tolist() == [1, 1, -1, -1, 1, 1] and (ta % 3).numpy().tolist()[:2] == [1, 2]
    traced = tracer.trace(lambda a, b: (a // b, a % b), a, b)
    assert [bd.value.op for bd in traced["main"].bindings] == ["floor_divide", "floor_mod"]


def test_remainder_gradient_and_floor_divide_zero_gradient():
    a = np.array([5.5, -5.5, 7.0], "float64")
    b = np.array([2.0, 2.0, -2.0], "float64")
    value, (ga, gb) = compiled(lambda x, y: x % y, a, b)
    np.testing.assert_allclose(value, np.remainder(a, b).sum())
    np.testing.assert_allclose(ga, [1.0, 1.0, 1.0])
    np.testing.assert_allclose(gb, -np.floor(a / b))  # [-2, 3, 4]
    _, (ga, gb) = compiled(lambda x, y: x // y + x, a, b)
    np.testing.assert_allclose(ga, [1.0, 1.0, 1.0])  # only the `+ x` term
    np.testing.assert_allclose(gb, [0.0, 0.0, 0.0])


def test_float_floor_division_by_zero_is_inf_or_nan_without_warning():
    a, zero = tracer.tensor([1.0, -1.0, 0.0]), tracer.tensor(0.0)
    with np.errstate(all="raise"):  # a NumPy warning would raise here
        assert (a // zero).numpy().tolist()[:2] == [math.inf, -math.inf]
        assert np.isnan((a % zero).numpy()).all()


@pytest.mark.parametrize("op", ["floor_divide", "remainder"])
def test_integer_division_by_zero_raises_eagerly_and_compiled(op):
    fn = getattr(tracer, op)
    x = tracer.tensor(np.array([1.0, 2.0], "float32"))
    k = tracer.tensor(np.array([7, 8], "int64"))
    with pytest.raises(ZeroDivisionError, match="integer division by zero"):
        fn(k, tracer.tensor(np.array([0, 2], "int64")))

    def loss(x, n):
        return (x * tracer.astype(fn(k, n), "float32")).sum()

    step = autodiff.value_and_grad(loss, wrt=[x])
    value, _ = step(x, tracer.tensor(np.array([1, 3], "int64")))
    assert float(value) == float(loss(x, tracer.tensor(np.array([1, 3], "int64"))))
    with pytest.raises(ZeroDivisionError, match="integer division by zero"):
        step(x, tracer.tensor(np.array([0, 3], "int64")))


# ---------------------------------------------------------------- sums, float16 statistics


@pytest.mark.parametrize("dtype", ["int32", "bool"])
def test_sum_of_int32_and_bool_accumulates_in_int64(dtype):
    big = np.full(3, 2**30, "int32") if dtype == "int32" else np.array([True, True, False])
    want = 3 * 2**30 if dtype == "int32" else 2  # overflows int32
    out = tracer.tensor(big).sum()
    assert out.dtype == "int64" and out.item() == want
    assert tracer.sum(tracer.tensor(big), axis=0, keepdims=True).numpy().tolist() == [want]
    mod = tracer.trace(lambda x: x.sum(), big)
    assert mod["main"].ret_type.dtype == "int64"
    assert ir.Executor(mod)["main"](big).item() == want


def test_float16_var_and_layer_norm_statistics_in_float32():
    rng = np.random.default_rng(0)
    x = (300.0 + 200.0 * rng.standard_normal((4, 64))).astype("float16")  # (x - mean)**2 > 65504
    ref = x.astype("float64")
    var = tracer.var(tracer.tensor(x), axis=-1)
    assert var.dtype == "float16" and np.isfinite(var.numpy()).all()
    np.testing.assert_allclose(var.numpy(), ref.var(axis=-1), rtol=2e-3)
    y = tracer.layer_norm(tracer.tensor(x))
    want = (ref - ref.mean(-1, keepdims=True)) / np.sqrt(ref.var(-1, keepdims=True) + 1e-5)
    assert y.dtype == "float16"
    np.testing.assert_allclose(y.numpy(), want, atol=4e-3)
    small = (1e-2 * rng.standard_normal((2, 32))).astype("float16")  # float16 squares lose digits
    np.testing.assert_allclose(tracer.var(tracer.tensor(small), axis=-1).numpy(),
                               small.astype("float64").var(-1), rtol=2e-3)
    tiny = (1e-4 * rng.standard_normal((2, 32))).astype("float16")  # float16 squares underflow to 0
    ref = tiny.astype("float64")
    want = (ref - ref.mean(-1, keepdims=True)) / np.sqrt(ref.var(-1, keepdims=True) + 1e-10)
    np.testing.assert_allclose(tracer.layer_norm(tracer.tensor(tiny), eps=1e-10).numpy(), want, atol=4e-3)


def test_float16_layer_norm_gradient_is_finite_and_close_to_float64():
    rng = np.random.default_rng(1)
    x = (300.0 + 200.0 * rng.standard_normal((3, 40))).astype("float16")
    w = rng.uniform(0.5, 1.5, 40).astype("float16")
    probe = rng.standard_normal((3, 40))

    def loss(dtype):
        xt, wt = tracer.tensor(x.astype(dtype)), tracer.tensor(w.astype(dtype))
        f = lambda a, b: (tracer.astype(tracer.layer_norm(a, b), "float64") * tracer.tensor(probe)).sum()  # noqa: E731
        return [np.asarray(g) for g in autodiff.grad(f, wrt=[xt, wt])(xt, wt)]

    gx16, gw16 = loss("float16")
    gx64, gw64 = loss("float64")
    assert gx16.dtype == "float16" and np.isfinite(gx16).all() and np.isfinite(gw16).all()
    np.testing.assert_allclose(gx16, gx64, atol=2e-3)
    np.testing.assert_allclose(gw16, gw64, rtol=1e-2, atol=2e-2)


# ---------------------------------------------------------------- NaN in max, min, relu, maximum, minimum

NAN = math.nan


def test_nan_propagates_through_max_min_relu_maximum_minimum():
    x = np.array([1.0, NAN, 3.0, NAN])
    t = tracer.tensor(x)
    for out in (tracer.max(t), tracer.min(t), tracer.maximum(t, 2.0), tracer.minimum(2.0, t)):
        assert np.isnan(out.numpy()).any()
    assert np.isnan(tracer.relu(t).numpy()[1])
    # gradients as PyTorch's (see test_numerics_torch.py): the nans of a full max share g
    _, (g,) = compiled(tracer.max, x)
    np.testing.assert_array_equal(g, [0.0, 0.5, 0.0, 0.5])
    _, (g,) = compiled(tracer.relu, x)
    np.testing.assert_array_equal(g, [1.0, 1.0, 1.0, 1.0])  # relu'(nan) = 1, as threshold_backward
    a, b = np.array([NAN, 1.0, 2.0, NAN, 1.0]), np.array([1.0, NAN, 2.0, NAN, 0.0])
    _, (ga, gb) = compiled(tracer.maximum, a, b)
    np.testing.assert_array_equal(ga, [1.0, 1.0, 0.5, 1.0, 1.0])
    np.testing.assert_array_equal(gb, [1.0, 1.0, 0.5, 1.0, 0.0])
    rows = np.array([[1.0, NAN, 3.0], [1.0, 2.0, 3.0]])
    _, (g,) = compiled(lambda v: tracer.max(v, axis=1), rows)
    assert g.tolist() == [[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]  # to the nan, as torch's x.max(dim) (issue 19, item 13)
    with np.errstate(divide="ignore", invalid="ignore"):  # g / 0 * 0 in the nan row, on purpose
        _, (g,) = compiled(lambda v: v.amax(axis=1), rows)
    assert np.isnan(g[0]).all() and g[1].tolist() == [0.0, 0.0, 1.0]  # torch.amax's
