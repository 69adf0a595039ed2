"""Review findings on grad / value_and_grad: a wrt leaf reaching fn by more than one route."""
import numpy as np
import pytest

import autodiff
import tracer

X = np.array([0.5, -1.0, 2.0], "float32")
Y = np.array([1.5, 0.25, -3.0], "float32")


def test_leaf_passed_twice_gets_both_contributions():
    x = tracer.tensor(X)
    value, g = autodiff.value_and_grad(lambda a, b: (a * b).sum(), wrt=x)(x, x)
    np.testing.assert_allclose(value.item(), (X * X).sum(), rtol=1e-6)
    np.testing.assert_allclose(g.numpy(), 2 * X, rtol=1e-6)


def test_leaf_both_captured_and_passed_gets_both_contributions():
    x, y = tracer.tensor(X), tracer.tensor(Y)
    g = autodiff.grad(lambda a: (a * x * y).sum(), wrt=[x, y])(x)
    np.testing.assert_allclose(g[0].numpy(), 2 * X * Y, rtol=1e-6)
    np.testing.assert_allclose(g[1].numpy(), X * X, rtol=1e-6)


def test_leaf_passed_twice_inside_a_trace():
    def outer(a):
        return autodiff.grad(lambda p, q: (p * p * q).sum(), wrt=a)(a, a).sum()  # d/da sum(a^3) = 3a^2
    g = autodiff.grad(outer, wrt=(x := tracer.tensor(X)))(x)
    np.testing.assert_allclose(g.numpy(), 6 * X, rtol=1e-6)


def test_a_constant_result_has_no_gradient_for_an_unread_argument():
    x = tracer.tensor(X)
    value, g = autodiff.value_and_grad(lambda a: tracer.tensor(2.0), wrt=x)(x)
    assert value.item() == 2.0
    assert g is None  # torch: an input the result does not use has no gradient (allow_unused gives None)
    value, g = autodiff.value_and_grad(lambda a: tracer.tensor(2.0), argnums=0)(x)
    np.testing.assert_array_equal(g.numpy(), np.zeros(3, "float32"))  # JAX: zeros


def test_gradcheck_report_reads_as_plain_numbers():
    x = tracer.tensor(np.array([[0.3, -0.2], [0.5, 0.1]], "float32"))
    with pytest.raises(AssertionError) as info:
        autodiff.gradcheck(lambda a: tracer.stop_gradient(a) * a, x)  # half the true gradient
    message = str(info.value)
    assert "at index (0, 0)" in message and "np." not in message, message


def test_gradients_never_share_a_weight_buffer():
    # d(w1 * w2)/dw1 simplifies to w2 itself (and a reshape of it to a view): the executor would hand back
    # w2's own array, which an optimizer then updates in place before using it as w1's... or w2's gradient.
    from nn import optim
    w1, w2 = tracer.tensor(np.array(1.0, "float32")), tracer.tensor(np.array(3.0, "float32"))
    grads = autodiff.grad(lambda: w1 * w2, wrt=[w1, w2])()
    optim.SGD([w1, w2], lr=1.0).step(grads)
    assert (w1.item(), w2.item()) == (-2.0, 2.0)
    v = tracer.tensor(np.array([2.0], "float32"))
    g = autodiff.grad(lambda: w1 * v.reshape(()), wrt=w1)()  # a reshape of v: a view of its buffer
    assert g.item() == 2.0 and not np.shares_memory(g.numpy(), v.numpy())
    value, (gs,) = autodiff.value_and_grad(lambda s: s * w2, wrt=[w1])(w1)
    assert not np.shares_memory(gs.numpy(), w2.numpy()) and not np.shares_memory(value.numpy(), w1.numpy())
