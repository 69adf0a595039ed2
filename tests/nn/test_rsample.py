"""rsample of Gamma, Beta and Dirichlet (issue 21 item 11): the gradient of a Gamma draw equals
torch._standard_gamma_grad at the same (alpha, x) (float64, 1e-10; float32 1e-5), eagerly with backward() and in
a compiled step; the rate's gradient is -x / rate^2; Beta and Dirichlet draws differentiate through the Gammas
they normalise (chain rule checked against the op, and d E[x] / d alpha by many draws)."""
import numpy as np
import pytest

import autodiff
import tracer as T
from nn import distributions as D
from tests.torch_optional import torch
from tracer.tensor import apply

ALPHA = np.array([0.2, 0.7, 1.5, 4.0, 9.0, 30.0])


def _ref_grad(alpha, x):
    return torch._standard_gamma_grad(torch.tensor(alpha), torch.tensor(x)).numpy()


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_gamma_rsample_gradient_is_torchs(dtype):
    if torch is None:
        pytest.skip("torch is not installed")
    a = T.tensor(ALPHA.astype(dtype), requires_grad=True)
    rate = T.tensor(np.full(6, 2.0, dtype), requires_grad=True)
    T.manual_seed(0)
    y = D.Gamma(a, rate).rsample()
    assert y.dtype == dtype and y.requires_grad
    y.sum().backward()
    x = y.numpy() * 2.0  # the standard draw
    tol = dict(rtol=1e-10) if dtype == "float64" else dict(rtol=1e-5)
    np.testing.assert_allclose(a.grad.numpy(), _ref_grad(ALPHA.astype(dtype), x.astype(dtype)) / 2.0, **tol)
    np.testing.assert_allclose(rate.grad.numpy(), -y.numpy() / 2.0, **tol)


def test_gamma_rsample_in_a_compiled_step():
    def f(a):
        x = D.Gamma(a, 1.0).rsample()
        return x.sum(), x
    step = autodiff.value_and_grad(f, argnums=0, has_aux=True)
    a = T.tensor(ALPHA)
    (_, x1), g1 = step(a)
    (_, x2), g2 = step(a)
    assert not np.array_equal(x1.numpy(), x2.numpy())  # a fresh draw per call
    for x, g in ((x1, g1), (x2, g2)):
        op = apply("random.standard_gamma_grad", [a, x]).numpy()
        np.testing.assert_allclose(g.numpy(), op, rtol=1e-12)
        if torch is not None:
            np.testing.assert_allclose(g.numpy(), _ref_grad(ALPHA, x.numpy()), rtol=1e-10)


def test_dirichlet_and_beta_rsample_chain_rule():
    c = T.tensor(np.array([0.5, 2.0, 5.0]), requires_grad=True)
    T.manual_seed(1)
    x = D.Dirichlet(c).rsample()
    assert x.requires_grad and abs(float(x.sum()) - 1) < 1e-12
    x[0].backward()
    T.manual_seed(1)
    g = D.Gamma(T.tensor(np.array([0.5, 2.0, 5.0])), 1.0).sample().numpy()  # the same Gamma draws
    np.testing.assert_allclose(g / g.sum(), x.numpy(), rtol=1e-12)
    dg = apply("random.standard_gamma_grad", [T.tensor(np.array([0.5, 2.0, 5.0])), T.tensor(g)]).numpy()
    s = g.sum()
    expect = (np.eye(3)[0] / s - g[0] / s ** 2) * dg  # d(g0 / sum g) / d c_i = (delta_0i / s - g0 / s^2) dg_i
    np.testing.assert_allclose(c.grad.numpy(), expect, rtol=1e-10)


def test_beta_rsample_mean_gradient():
    a = T.tensor(np.array(2.0), requires_grad=True)
    b = T.tensor(np.array(3.0), requires_grad=True)
    T.manual_seed(2)
    D.Beta(a, b).rsample((40000,)).mean().backward()
    # d E[x]/da = b / (a + b)^2 = 0.12, d E[x]/db = -a / (a + b)^2 = -0.08; 40000 draws: sd of the mean ~ 1e-3
    np.testing.assert_allclose([float(a.grad), float(b.grad)], [0.12, -0.08], atol=6e-3)
