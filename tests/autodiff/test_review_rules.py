"""Review findings on VJP rules: values at the edges of their domain, as PyTorch gives them."""
import numpy as np
import pytest

import autodiff
import tracer

X = np.array([-2.0, 0.0, 3.0], "float32")


def test_power_zero_exponent_has_zero_gradient_at_zero():
    g = autodiff.grad(lambda x: (x ** 0).sum(), wrt=(x := tracer.tensor(X)))(x)
    np.testing.assert_array_equal(g.numpy(), np.zeros(3, "float32"))  # PyTorch: 0 where the exponent is 0


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # 0 ** -1 = inf inside, masked by the guard
def test_power_tensor_exponent_zero_at_zero_base():
    base, exponent = np.array([0.0, 2.0], "float32"), np.array([0.0, 0.0], "float32")
    gb, ge = autodiff.grad(lambda b, e: (b ** e).sum(), wrt=[b := tracer.tensor(base), e := tracer.tensor(exponent)])(
        b, e)
    np.testing.assert_array_equal(gb.numpy(), [0.0, 0.0])
    np.testing.assert_allclose(ge.numpy(), [0.0, np.log(2.0)], rtol=1e-6)


def test_second_derivative_of_x_to_the_one_at_zero():
    def first(x):
        return autodiff.grad(lambda y: (y ** 1).sum(), wrt=x)(x).sum()
    g = autodiff.grad(first, wrt=(x := tracer.tensor(X)))(x)
    np.testing.assert_array_equal(g.numpy(), np.zeros(3, "float32"))


def test_third_derivative_of_x_to_the_one_at_zero():
    def d(f):
        return lambda x: autodiff.grad(lambda y: f(y).sum(), wrt=x)(x)
    g = d(d(d(lambda y: y ** 1)))(x := tracer.tensor(X))
    np.testing.assert_array_equal(g.numpy(), np.zeros(3, "float32"))  # PyTorch: 0, not nan
    g = d(d(d(lambda y: y ** 3)))(x)
    np.testing.assert_allclose(g.numpy(), np.full(3, 6.0, "float32"))
