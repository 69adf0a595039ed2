"""In-place `**=`, `//=`, `%=` (and pow_, floor_divide_, remainder_), detach/stop_gradient sharing the buffer,
views of captured tensors and `p.data`: eager as torch, compiled as eager or a TraceError naming the view."""
import numpy as np
import pytest

import autodiff
import nn
import tracer

torch = pytest.importorskip("torch")

# (operator, method, operand); operands of both signs to exercise floor and the divisor's sign
IOPS = [("__ipow__", "pow_", 2), ("__ifloordiv__", "floor_divide_", -3), ("__imod__", "remainder_", -3),
        ("__ifloordiv__", "floor_divide_", 4), ("__imod__", "remainder_", 4), ("__ipow__", "pow_", 3)]
VALUES = np.array([-7, -2, 0, 5, 9])


def _apply(t, op, method, other, use_method):
    alias = t
    if use_method:
        out = getattr(t, method)(other)
        assert out is t
    else:
        t = getattr(t, op)(other)
    assert t is alias  # updated in place, not rebound
    return alias


@pytest.mark.parametrize("dtype", ["int64", "int32", "float32", "float64"])
@pytest.mark.parametrize("op,method,other", IOPS)
@pytest.mark.parametrize("use_method", [False, True])
def test_eager_in_place_matches_torch(dtype, op, method, other, use_method):
    ours = tracer.tensor(VALUES.astype(dtype))
    ref = torch.tensor(VALUES.astype(dtype))
    talias = ref
    getattr(ref, method)(other)
    _apply(ours, op, method, other, use_method)
    assert ours.dtype == dtype and str(talias.dtype) == f"torch.{dtype}"
    np.testing.assert_array_equal(ours.numpy(), talias.numpy())


def test_alias_sees_the_update_with_the_operators():
    h = tracer.tensor(np.array([1.5, -2.5], "float32"))
    alias = h
    h **= 2
    h //= 2
    h %= 0.75
    t = torch.tensor([1.5, -2.5])
    talias = t
    t **= 2
    t //= 2
    t %= 0.75
    np.testing.assert_array_equal(alias.numpy(), talias.numpy())


def test_tensor_operands_and_dtype_rules_as_torch():
    a = tracer.tensor(np.array([2.0, 3.0], "float32"))
    a.pow_(tracer.tensor(np.array([2.0, 0.5], "float64")))  # float64 result stored in the float32 tensor
    assert a.dtype == "float32"
    np.testing.assert_allclose(a.numpy(), [4.0, 3.0 ** 0.5], rtol=1e-6)
    i = tracer.tensor(np.array([7, -7]))
    with pytest.raises(TypeError, match="float32.*int64|cannot be stored in the int64"):
        i **= 0.5  # torch: result type Float can't be cast to Long
    with pytest.raises(TypeError, match="int64"):
        i //= 2.5
    with pytest.raises(TypeError, match="int64"):
        i.remainder_(1.5)
    with pytest.raises(RuntimeError, match="shape"):
        tracer.tensor(np.ones(2)).pow_(tracer.tensor(np.ones((3, 2))))


def _compiled_pair(op, dtype="float64"):
    """fn writing with `op` to a local traced value and to a captured buffer, and its eager value."""
    buf = tracer.tensor(np.array([1.5, -2.0, 3.0], dtype))
    w = tracer.tensor(np.array([1.0, 2.0, -1.5], dtype))

    def fn(x):
        h = x * w
        alias = h
        getattr(h, op)(2)
        getattr(buf, op)(tracer.tensor(np.array([2.0, 2.0, 2.0], dtype)))
        return (alias * w).sum() + buf.sum()
    return fn, buf, w


@pytest.mark.parametrize("op", ["__ipow__", "__ifloordiv__", "__imod__", "pow_", "floor_divide_", "remainder_"])
def test_inside_a_compiled_step_as_eager(op):
    x = np.array([1.25, -3.5, 2.0])
    fn, buf, w = _compiled_pair(op)
    eager = [float(fn(tracer.tensor(x))) for _ in range(3)]
    eager_buf = buf.numpy().copy()
    fn, buf, w = _compiled_pair(op)
    step = autodiff.value_and_grad(fn, wrt=[w])
    compiled = [float(step(x)[0]) for _ in range(3)]
    np.testing.assert_allclose(compiled, eager, rtol=1e-12)
    np.testing.assert_allclose(buf.numpy(), eager_buf, rtol=1e-12)  # the captured buffer written back


def test_pow_gradient_in_place_matches_torch():
    x = np.array([0.5, 1.5, -2.0])
    w = tracer.tensor(np.array([1.0, 2.0, 3.0]))

    def fn(x):
        h = x * w
        h **= 3
        return h.sum()
    _, (g,) = autodiff.value_and_grad(fn, wrt=[w])(x)
    tw = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    h = torch.tensor(x) * tw
    h **= 3
    h.sum().backward()
    np.testing.assert_allclose(g.numpy(), tw.grad.numpy(), rtol=1e-12)


# ---------------------------------------------------------------- detach / stop_gradient share the buffer (item 4)


def _detach_then_update(cut):
    w = tracer.tensor(np.array([1.0, 2.0]))

    def fn(x):
        h = x * w
        d = cut(h)
        h += 3.0  # eagerly d shares h's buffer and sees this
        return (d * w).sum() + (h * w).sum()
    return fn, w


@pytest.mark.parametrize("cut", [lambda h: h.detach(), tracer.stop_gradient])
def test_detach_then_in_place_update_eager_as_torch_compiled_refused(cut):
    x = np.array([3.0, 4.0])
    fn, w = _detach_then_update(cut)
    eager = float(fn(tracer.tensor(x)))
    tw = torch.tensor([1.0, 2.0])
    th = torch.tensor(x) * tw
    td = th.detach()
    th += 3.0
    assert eager == float((td * tw).sum() + (th * tw).sum())  # 34, not 26
    with pytest.raises(tracer.TraceError, match="view.*updated in place"):
        autodiff.value_and_grad(fn, wrt=[w])(x)


def test_writing_to_a_detached_tensor_inside_a_trace_is_refused():
    w = tracer.tensor(np.array([1.0, 2.0]))

    def fn(x):
        h = x * w
        h.detach().mul_(0.5)  # eagerly halves h as well
        return (h * w).sum()
    assert float(fn(tracer.tensor(np.array([2.0, 2.0])))) == 5.0
    with pytest.raises(tracer.TraceError, match="view"):
        autodiff.value_and_grad(fn, wrt=[w])(np.array([2.0, 2.0]))


def test_detach_without_a_later_write_still_compiles():
    w = tracer.tensor(np.array([1.0, 2.0]))

    def fn(x):
        h = x * w
        d = h.detach()
        return (d * h).sum()
    value, (g,) = autodiff.value_and_grad(fn, wrt=[w])(np.array([3.0, 4.0]))
    assert float(value) == 73.0
    np.testing.assert_allclose(g.numpy(), [9.0, 32.0])  # d is a constant: d * x


@pytest.mark.parametrize("view", [lambda t: t.reshape(1, 2), lambda t: t[0:1], lambda t: t.detach(),
                                  lambda t: t[None, :]])
def test_view_of_a_captured_tensor_then_its_in_place_update(view):
    buf = tracer.tensor(np.array([1.0, 2.0]))
    w = tracer.tensor(np.array([1.0, 1.0]))

    def fn(x):
        v = view(buf)
        buf.add_(1.0)  # eagerly the view sees it; compiled the view would hold the old values
        return (v * x * w).sum()
    tbuf = torch.tensor([1.0, 2.0])
    tv = view(tbuf)
    tbuf.add_(1.0)
    assert float(fn(tracer.tensor(np.array([1.0, 1.0])))) == float((tv * torch.ones(2)).sum())
    with pytest.raises(tracer.TraceError, match="view"):
        autodiff.value_and_grad(fn, wrt=[w])(np.array([1.0, 1.0]))


def test_view_of_a_captured_tensor_taken_after_the_write_compiles():
    buf = tracer.tensor(np.array([1.0, 2.0]))
    w = tracer.tensor(np.array([1.0, 1.0]))

    def fn(x):
        buf.add_(1.0)
        v = buf.reshape(1, 2)
        return (v * x * w).sum()
    step = autodiff.value_and_grad(fn, wrt=[w])
    assert [float(step(np.ones(2))[0]) for _ in range(2)] == [5.0, 7.0]


# ---------------------------------------------------------------- p.data (item 20)


def test_data_shares_the_parameter_buffer_as_torch():
    p = nn.Parameter(np.array([2.0, 4.0], "float32"))
    d = p.data
    assert type(d) is tracer.Tensor and not isinstance(d, nn.Parameter)
    p.data.mul_(0.5)
    np.testing.assert_array_equal(p.numpy(), [1.0, 2.0])
    p.data[0] = 7.0
    assert p.numpy()[0] == 7.0 and d.numpy()[0] == 7.0
    p.data = tracer.tensor(np.array([9.0, 9.0, 9.0]))  # torch: replaces the values, shape included
    assert p.shape == (3,) and p.dtype == "float64" and p.numpy().tolist() == [9.0, 9.0, 9.0]


def test_data_inside_a_compiled_step():
    lin = nn.Linear(2, 1)

    def reads(x):
        return (lin(x) + lin.weight.data.sum()).sum()
    x = np.ones((3, 2), "float32")
    value, grads = autodiff.value_and_grad(reads, wrt=lin.parameters())(x)
    np.testing.assert_allclose(float(value), float(reads(tracer.tensor(x))), rtol=1e-6)
    np.testing.assert_allclose(grads[0].numpy(), np.full((1, 2), 3.0), rtol=1e-6)  # .data carries no gradient

    def writes(x):
        lin.weight.data.mul_(0.5)
        return lin(x).sum()
    # refused either as a write to a view (TraceError) or as a write to a buffer fn also reads as another
    # captured tensor (ValueError): both name the view
    with pytest.raises((tracer.TraceError, ValueError), match="view"):
        autodiff.value_and_grad(writes, wrt=lin.parameters())(x)
