"""tracegrad's own behaviour for the PyTorch habits (no torch needed): spellings, size(), item assignment,
the constructors and their RNG, NumPy's protocols, and the errors."""
import numpy as np
import pytest

import autodiff
import ir
import tracer

X = np.arange(24, dtype="float64").reshape(2, 3, 4) / 10


# ---------------------------------------------------------------- spellings


def test_dim_and_keepdim_beside_axis_and_keepdims():
    x = tracer.tensor(X)
    for spelled in (x.sum(dim=1, keepdim=True), tracer.sum(x, dim=1, keepdim=True), x.sum(axis=1, keepdims=True),
                    x.sum(1, keepdim=True)):
        np.testing.assert_allclose(spelled.numpy(), X.sum(1, keepdims=True))
    np.testing.assert_allclose(tracer.softmax(x, dim=0).numpy(), np.exp(X) / np.exp(X).sum(0))
    np.testing.assert_allclose(x.mean(dim=(0, 2)).numpy(), X.mean((0, 2)))
    np.testing.assert_allclose(tracer.var(x, dim=2).numpy(), X.var(2))
    np.testing.assert_allclose(tracer.stack([x, x], dim=1).numpy(), np.stack([X, X], 1))


@pytest.mark.parametrize("call", [
    lambda x: x.sum(axis=1, dim=1),
    lambda x: tracer.mean(x, keepdims=True, keepdim=True),
    lambda x: tracer.softmax(x, axis=0, dim=0),
    lambda x: x.max(1, dim=1),
])
def test_both_spellings_is_a_type_error(call):
    with pytest.raises(TypeError, match="axis|keepdims|multiple values"):
        call(tracer.tensor(X))


def test_shapes_as_varargs_or_a_tuple():
    assert tracer.zeros(2, 3).shape == tracer.zeros((2, 3)).shape == tracer.zeros([2, 3]).shape == (2, 3)
    assert tracer.ones(4).shape == (4,) and tracer.zeros(()).shape == ()
    assert tracer.zeros((2,), "int64").dtype == "int64" and tracer.ones(2, 2, dtype="float64").dtype == "float64"
    assert tracer.tensor(X).reshape(4, 6).shape == tracer.tensor(X).reshape((4, 6)).shape == (4, 6)
    with pytest.raises(TypeError, match="zeros: missing the size"):
        tracer.zeros()
    with pytest.raises(TypeError, match="dtype given twice"):
        tracer.zeros(2, "int64", dtype="float32")


def test_size_is_a_method():
    x = tracer.tensor(X)
    assert x.size() == (2, 3, 4) and x.size(0) == 2 and x.size(-1) == 4 and x.size(dim=1) == 3
    assert x.numel() == 24 and x.dim() == 3
    with pytest.raises(IndexError, match="dim 3 out of range"):
        x.size(3)
    with pytest.raises(TypeError, match="dim must be an int"):
        x.size(1.0)
    assert tracer.trace(lambda t: t * t.size(1), tracer.spec((2, 5)))["main"].ret_type.shape == (2, 5)


# ---------------------------------------------------------------- methods


def test_detach_gradient_is_a_stop_gradient():
    x = tracer.tensor(X)
    g = autodiff.grad(lambda t: (t * t.detach()).sum(), wrt=x)(x)
    np.testing.assert_allclose(g.numpy(), X)
    assert "stop_gradient" in str(tracer.trace(lambda t: t.detach(), X))


def test_to_and_the_casts():
    x = tracer.tensor(X)
    assert x.float().dtype == "float32" and x.half().dtype == "float16" and x.float().double().dtype == "float64"
    assert x.long().dtype == "int64" and x.int().dtype == "int32" and x.bool().dtype == "bool"
    assert x.to("float32").dtype == x.to(np.float32).dtype == x.to(tracer.zeros(1)).dtype == "float32"
    assert x.to("cpu", "float32").dtype == "float32" and x.to(device="cpu") is x
    assert x.to("cpu", copy=True) is not x
    assert x.tolist() == X.tolist() and tracer.tensor(2.5).tolist() == 2.5 and x.contiguous() is x
    with pytest.raises(ValueError, match="unknown device 'tpu'"):
        x.to("tpu")
    with pytest.raises(TypeError, match="unsupported dtype"):
        x.to(dtype="complex64")
    with pytest.raises(ValueError, match="mT: needs a tensor of at least 2"):
        _ = tracer.zeros(3).mT


def test_clone_is_independent_eager_and_traced():
    x = tracer.tensor(X)
    y = x.clone()
    y[0] = 0.0
    assert float(x[0, 0, 1]) == 0.1 and float(y[0, 0, 1]) == 0.0

    def f(t):
        u = t.clone()
        u[0] = 0.0
        return t + u
    mod = tracer.trace(f, X)
    np.testing.assert_allclose(ir.Executor(mod)["main"](X), X + np.where(np.arange(2)[:, None, None] == 0, 0, X))


@pytest.mark.parametrize("call, error, match", [
    (lambda x: x.flatten(2, 1), ValueError, "start_dim 2 comes after end_dim 1"),
    (lambda x: x.unflatten(1, (2, 2)), ValueError, r"sizes \(2, 2\) do not split axis 1 of size 3"),
    (lambda x: x.unsqueeze(4), IndexError, "unsqueeze: dim 4 out of range"),
    (lambda x: x.expand(3, 4), ValueError, "expand: 2 sizes for a tensor of 3 dimensions"),
    (lambda x: x.expand(-1, 2, 3, 4), ValueError, "-1 is not allowed for a new leading axis"),
    (lambda x: x.repeat(2, 2), ValueError, "repeat: 2 repeats for a tensor of 3 dimensions"),
    (lambda x: x.chunk(0), ValueError, "chunks must be a positive int"),
    (lambda x: x.clamp(), TypeError, "at least one of min and max"),
    (lambda x: x.masked_fill(x, 0.0), TypeError, "mask must be a bool tensor, got dtype float64"),
    (lambda x: x.view("float32"), TypeError, "view.dtype. reinterprets bits"),
    (lambda x: x.permute(0, 1.5, 2), TypeError, "permute: sizes must be ints"),
    (lambda x: x.norm(p="nuc"), ValueError, "p must be a number or 'fro'"),
    (lambda x: x.t(), ValueError, r"t: expects a tensor of at most 2 dimensions, got shape \(2, 3, 4\)"),
    (lambda x: x.mm(x), ValueError, r"mm: expects two 2-D tensors, got shapes \(2, 3, 4\) and \(2, 3, 4\)"),
    (lambda x: x.div(2, rounding_mode="round"), ValueError, "rounding_mode must be None, .trunc. or .floor."),
])
def test_method_errors_name_the_method(call, error, match):
    with pytest.raises(error, match=match):
        call(tracer.tensor(X))


def test_chunk_like_torch_gives_fewer_pieces_when_they_do_not_divide():
    pieces = tracer.arange(0.0, 5.0).chunk(4)
    assert [p.tolist() for p in pieces] == [[0.0, 1.0], [2.0, 3.0], [4.0]]


def test_std_and_var_correction():
    x = tracer.tensor([1.0, 2.0, 3.0, 4.0])
    # the method is torch's (unbiased by default); tracer.var keeps NumPy's population default (issue 20 item 6)
    assert x.var().item() == pytest.approx(5 / 3) and x.var(unbiased=False).item() == 1.25
    assert tracer.var(x).item() == 1.25 and x.var(correction=0).item() == 1.25
    assert x.std(correction=1).item() == pytest.approx(np.std([1, 2, 3, 4], ddof=1))
    assert np.isnan(tracer.tensor([1.0]).var(correction=1).item())


# ---------------------------------------------------------------- item assignment


def test_eager_assignment_writes_in_place():
    a = np.zeros((3, 4), "float32")
    x = tracer.from_numpy(a) if hasattr(tracer, "from_numpy") else tracer.Tensor.wrap(a)
    buf = x._data
    x[1] = 2.0
    x[:, tracer.tensor([0, 3])] = tracer.tensor([7.0, 8.0])
    x[x > 7.5] = -1.0
    assert x._data is buf
    expected = np.zeros((3, 4), "float32")
    expected[1] = 2
    expected[:, [0, 3]] = [7, 8]
    expected[expected > 7.5] = -1
    np.testing.assert_array_equal(a, expected)
    y = tracer.tensor([1, 2, 3])
    y[0] = 9.7  # cast to the tensor's dtype, as torch
    assert y.tolist() == [9, 2, 3] and y.dtype == "int64"


def test_eager_assignment_to_broadcast_memory_is_refused():
    x = tracer.zeros(3).expand(2, 3)
    with pytest.raises(ValueError, match="read-only memory"):
        x[0] = 1.0


def test_traced_assignment_prints_and_parses():
    def f(x, v, i):
        y = x * 1.0
        y[:, 1:3] = v
        y[i] = 0.0
        return y
    mod = tracer.trace(f, np.zeros((4, 5), "float32"), np.ones((4, 2), "float32"), np.array([0, 2]))
    text = str(mod)
    assert "R.slice_update(" in text and "R.index_update(" in text
    assert ir.structural_equal(ir.parse(text), mod)
    out = ir.Executor(mod)["main"](np.zeros((4, 5), "float32"), np.ones((4, 2), "float32"), np.array([0, 2]))
    expected = np.zeros((4, 5), "float32")
    expected[:, 1:3] = 1
    expected[[0, 2]] = 0
    np.testing.assert_array_equal(out, expected)


def test_assignment_rebinds_every_name_of_the_tensor():
    def f(x):
        y = x * 2.0
        alias = y
        y[0] = 0.0
        return alias
    out = ir.Executor(tracer.trace(f, X))["main"](X)
    np.testing.assert_allclose(out, np.concatenate([np.zeros((1, 3, 4)), X[1:] * 2]))


def test_compiled_step_writes_back_a_captured_tensor():
    buf = tracer.zeros(3, dtype="float64")
    w = tracer.tensor(np.ones(3))

    def loss(x):
        buf[1] = x.sum()
        return (w * x).sum()
    step = autodiff.value_and_grad(loss, wrt=w)
    for k in (1.0, 2.0):
        x = tracer.tensor(np.full(3, k))
        value, g = step(x)
        assert buf.tolist() == [0.0, 3 * k, 0.0]
        np.testing.assert_allclose(g.numpy(), np.full(3, k))


@pytest.mark.parametrize("key, value, match", [
    ((slice(0, 2),), np.ones((3, 3, 4)), r"value of shape \(3, 3, 4\) cannot be broadcast to the indexed region"),
    (np.ones((2, 3), bool), np.ones(5), "one entry per masked element is not supported"),
    (np.ones((3,), bool), 0.0, r"mask of shape \(3,\) does not match x of shape \(2, 3, 4\)"),
])
def test_traced_assignment_errors(key, value, match):
    def f(x):
        y = x.clone()
        y[key] = value
        return y
    with pytest.raises((ValueError, IndexError), match=match):
        tracer.trace(f, X)


def test_update_ops_check_their_arguments():
    x = ir.Var("x", ir.TensorType((4, 3), "float32"))
    v = ir.Var("v", ir.TensorType((2, 3), "float64"))
    i = ir.Var("i", ir.TensorType((2,), "int64"))
    with pytest.raises(ir.IRError, match="slice_update: value has dtype float64 but x has dtype float32"):
        ir.make_call("slice_update", [x, v], dict(axes=[0], begin=[0], end=[2], strides=[1]))
    w = ir.Var("w", ir.TensorType((3, 3), "float32"))
    with pytest.raises(ir.IRError, match=r"index_update: value of shape \(3, 3\) does not match the take of shape "
                                         r"\(2, 3\)"):
        ir.make_call("index_update", [x, i, w], dict(axis=0))


# ---------------------------------------------------------------- constructors and the RNG


def test_constructors():
    assert tracer.arange(5).tolist() == [0, 1, 2, 3, 4] and tracer.arange(5).dtype == "int64"
    assert tracer.arange(1, 7, 2).tolist() == [1, 3, 5] and tracer.arange(2, -2, -1).tolist() == [2, 1, 0, -1]
    assert tracer.arange(0, 1, 0.25).dtype == "float32" and tracer.arange(0, 1, 0.25).numel() == 4
    np.testing.assert_allclose(tracer.linspace(0, 1, 5).numpy(), np.linspace(0, 1, 5))
    np.testing.assert_array_equal(tracer.eye(2, 3).numpy(), np.eye(2, 3, dtype="float32"))
    assert tracer.empty(2, 3).shape == (2, 3) and tracer.empty_like(tracer.zeros(4, dtype="int64")).dtype == "int64"
    assert tracer.full((2,), 3.0).tolist() == [3.0, 3.0]
    assert tracer.cat([tracer.ones(2), tracer.zeros(1)], dim=0).tolist() == [1.0, 1.0, 0.0]
    assert tracer.randint_like(tracer.zeros(50), 3).dtype == "float32"
    with pytest.raises(ValueError, match="arange: step must not be 0"):
        tracer.arange(0, 1, 0)
    with pytest.raises(TypeError, match="randint: expected \\(high, size\\) or \\(low, high, size\\)"):
        tracer.randint(1, 2, 3, (4,))
    with pytest.raises(TypeError, match="pass generator= or seed=, not both"):
        tracer.randn(2, seed=0, generator=tracer.Generator(0))
    with pytest.raises(ir.IRError, match="random.randint: low \\(5\\) must be less than high \\(5\\)"):
        tracer.randint(5, 5, (2,))


def test_seeded_draws_repeat_eagerly_and_traced():
    eager = tracer.randn(3, 4, seed=11).numpy()
    np.testing.assert_array_equal(eager, tracer.randn((3, 4), seed=11).numpy())
    mod = tracer.trace(lambda: tracer.randn(3, 4, seed=11))
    np.testing.assert_array_equal(ir.Executor(mod)["main"](), eager)
    assert "R.random.normal(" in str(mod) and ir.structural_equal(ir.parse(str(mod)), mod)
    tracer.manual_seed(5)
    first = [tracer.rand(3).tolist(), tracer.randint(100, (3,)).tolist()]
    tracer.manual_seed(5)
    assert [tracer.rand(3).tolist(), tracer.randint(100, (3,)).tolist()] == first
    g = tracer.Generator(3)
    a, b = tracer.rand(4, generator=g).numpy(), tracer.rand(4, generator=g).numpy()
    assert not np.array_equal(a, b)
    np.testing.assert_array_equal(tracer.rand(4, generator=tracer.Generator(3)).numpy(), a)


def test_a_compiled_step_draws_fresh_values_every_call():
    w = tracer.tensor(np.ones(4))
    step = autodiff.value_and_grad(lambda x: (w * x * tracer.rand(4, dtype="float64")).sum(), wrt=w)
    x = tracer.tensor(np.ones(4))
    tracer.manual_seed(0)
    grads = [step(x)[1].numpy() for _ in range(3)]
    assert not np.array_equal(grads[0], grads[1]) and all(((0 <= g) & (g < 1)).all() for g in grads)
    tracer.manual_seed(0)
    np.testing.assert_array_equal(step(x)[1].numpy(), grads[0])


def test_random_values_are_the_same_on_any_device_by_construction():
    """The kernel is a function of (seed, index): a smaller draw is a prefix of a larger one."""
    big = tracer.rand(10, seed=4).numpy()
    np.testing.assert_array_equal(tracer.rand(4, seed=4).numpy(), big[:4])


# ---------------------------------------------------------------- NumPy's protocols


def test_numpy_ufuncs_and_functions_return_tensors():
    x = tracer.tensor(X)
    for out, ref in [(np.exp(x), np.exp(X)), (np.add(x, 1), X + 1), (np.ones(4) * x, X), (np.maximum(x, 0.5),
                     np.maximum(X, 0.5)), (np.sum(x), X.sum()), (np.mean(x, axis=0), X.mean(0)),
                     (np.max(x, axis=(0, 2), keepdims=True), X.max((0, 2), keepdims=True)),
                     (np.concatenate([x, x], axis=1), np.concatenate([X, X], 1)), (np.clip(x, 0.3, 1.0),
                     np.clip(X, 0.3, 1.0)), (np.reshape(x, (4, 6)), X.reshape(4, 6)), (np.std(x, ddof=1),
                     X.std(ddof=1)), (np.where(x > 1, x, 0.0), np.where(X > 1, X, 0.0))]:
        assert isinstance(out, tracer.Tensor), type(out)
        np.testing.assert_allclose(out.numpy(), ref)
    assert np.shape(x) == (2, 3, 4) and np.ndim(x) == 3 and np.size(x) == 24
    assert np.allclose(x, X) and bool(np.isclose(x, X).all())  # other functions see arrays, as before
    mod = tracer.trace(lambda t: np.sum(np.exp(t), axis=1), X)
    assert "R.exp(" in str(mod) and "R.sum(" in str(mod)


def test_numpy_inplace_on_an_array_writes_the_array():
    arr = np.zeros(3)
    arr += tracer.tensor(np.ones(3))
    assert isinstance(arr, np.ndarray) and arr.tolist() == [1.0, 1.0, 1.0]


@pytest.mark.parametrize("call, match", [
    (lambda t: np.isnan(t), r"np.isnan is not supported on tracegrad Tensors; use x != x"),
    (lambda t: np.add.reduce(t), r"np.add.reduce is not supported.*tracer.sum"),
    (lambda t: np.cbrt(t), r"np.cbrt is not supported on tracegrad Tensors; use a tracer function"),
])
def test_unsupported_ufuncs_name_what_to_use(call, match):
    with pytest.raises(TypeError, match=match):
        call(tracer.tensor(X))


def test_numpy_functions_on_traced_values_raise_clearly():
    with pytest.raises(TypeError, match="np.allclose is not supported on traced tensors"):
        tracer.trace(lambda t: np.allclose(t, 0.0) * t, X)
    with pytest.raises(TypeError, match=r"np.where\(condition\) \(the indices form\) is not supported"):
        np.where(tracer.tensor(X) > 1)


def test_a_generator_inside_a_trace_is_drawn_per_call_not_while_tracing():
    from tracer.rng import fresh_seed

    g = tracer.Generator(0)
    traced = tracer.trace_function(lambda: tracer.randn(3, generator=g), ())
    (seed,) = traced.captured
    assert seed._fresh_seed is g  # the compiled step feeds fresh_seed(g) on each call
    np.testing.assert_array_equal(fresh_seed(seed._fresh_seed), tracer.Generator(0).draw_seed())  # nothing drawn yet
