"""Review of issue 19's numeric edges: gradients at the kink points against torch, eager and compiled."""
import numpy as np
import pytest

import autodiff
import nn
from nn import functional as F

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("alpha", [1.0, 0.5, 2.0])
def test_elu_gradient_at_zero_is_torchs(dtype, alpha):
    # elu is x for x > 0 and alpha * (exp(x) - 1) below: at 0 torch takes the lower branch's slope, alpha
    # (both slopes agree for alpha = 1). exp(minimum(x, 0)) split minimum's tie, giving alpha / 2.
    x = np.array([0.0, -1.0, 1.0, -0.0], dtype)
    xt = torch.tensor(x, requires_grad=True)
    torch.nn.functional.elu(xt, alpha=alpha).sum().backward()
    want = xt.grad.numpy()
    loss = lambda a: F.elu(a, alpha=alpha).sum()  # noqa: E731
    eager = autodiff.grad(loss, argnums=0)
    np.testing.assert_allclose(eager(x).numpy(), want, rtol=1e-6)
    module = nn.ELU(alpha=alpha)
    step = autodiff.value_and_grad(lambda a: module(a).sum(), argnums=0)
    for _ in range(2):  # traced, then replayed
        value, g = step(x)
        np.testing.assert_allclose(g.numpy(), want, rtol=1e-6)
        np.testing.assert_allclose(float(value), float(torch.nn.functional.elu(torch.tensor(x), alpha=alpha).sum()),
                                   rtol=1e-6)
    big = np.array([1000.0, -1000.0], dtype)  # the large-x guard the minimum was there for still holds
    assert np.isfinite(autodiff.grad(loss, argnums=0)(big).numpy()).all()
