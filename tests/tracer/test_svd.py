"""linalg.svd / svdvals and the singular-value matrix norms against torch: values, dtypes and gradients
eagerly (loss.backward()), in a compiled step (autodiff.value_and_grad), at a repeated singular value, and
the errors torch raises."""
import numpy as np
import pytest

import autodiff
import nn.torch as tt
import tracer
from tests.torch_optional import torch

rng = np.random.default_rng(0)
A = rng.standard_normal((2, 3, 4))
SQUARE = rng.standard_normal((3, 3))


def _both(fn, a):
    """(value, gradient) of sum(fn(a)) in torch, tracegrad eagerly and tracegrad compiled."""
    ta = torch.tensor(a, requires_grad=True)
    t_out = fn(torch, ta).sum()
    t_out.backward()
    x = tt.tensor(a, requires_grad=True)
    out = fn(tt, x).sum()
    out.backward()
    step = autodiff.value_and_grad(lambda y: fn(tracer, y).sum(), argnums=0)
    c_out, c_grad = step(tracer.tensor(a))
    want = (t_out.detach().numpy(), ta.grad.numpy())
    return want, [(out.numpy(), x.grad.numpy()), (c_out.numpy(), c_grad.numpy())]


@pytest.mark.parametrize("ord", ["nuc", 2, -2])
@pytest.mark.parametrize("dim", [(-2, -1), (0, 2), (2, 1)])
def test_matrix_norm_values_and_gradients_match_torch(ord, dim):
    want, got = _both(lambda m, a: m.linalg.matrix_norm(a, ord=ord, dim=dim, keepdim=True) * 1.5, A)
    for value, grad in got:
        np.testing.assert_allclose(value, want[0], rtol=1e-12)
        np.testing.assert_allclose(grad, want[1], rtol=1e-9, atol=1e-12)
    assert tt.linalg.matrix_norm(tt.tensor(A), ord, dim, keepdim=True).shape == \
        tuple(torch.linalg.matrix_norm(torch.tensor(A), ord, dim, keepdim=True).shape)


@pytest.mark.parametrize("ord", ["nuc", 2, -2])
def test_linalg_norm_with_singular_value_ords(ord):
    want, got = _both(lambda m, a: m.linalg.norm(a, ord), SQUARE)
    for value, grad in got:
        np.testing.assert_allclose(value, want[0], rtol=1e-12)
        np.testing.assert_allclose(grad, want[1], rtol=1e-9, atol=1e-12)


def test_svdvals_and_svd_match_torch_float32():
    a = A.astype("float32")
    s = tt.linalg.svdvals(tt.tensor(a))
    assert s.dtype == "float32" and s.shape == (2, 3)
    np.testing.assert_allclose(s.numpy(), torch.linalg.svdvals(torch.tensor(a)).numpy(), rtol=1e-5)
    u, s2, vh = tt.linalg.svd(tt.tensor(a), full_matrices=False)
    np.testing.assert_allclose((u.numpy() * s2.numpy()[..., None, :]) @ vh.numpy(), a, atol=1e-5)


@pytest.mark.parametrize("shape", [(3, 3), (4, 2), (2, 4)])
def test_svd_gradient_of_gauge_invariant_loss_matches_torch(shape):
    a = rng.standard_normal(shape)
    w_u = rng.uniform(0.5, 1.5, (shape[0], min(shape)))
    w_v = rng.uniform(0.5, 1.5, (min(shape), shape[1]))

    def loss(m, x):
        u, s, vh = m.linalg.svd(x, full_matrices=False)
        return (u * u * m.tensor(w_u)).sum() + (vh * vh * m.tensor(w_v)).sum() + (s ** 3).sum()
    want, got = _both(loss, a)
    for value, grad in got:
        np.testing.assert_allclose(value, want[0], rtol=1e-10)
        np.testing.assert_allclose(grad, want[1], rtol=1e-8, atol=1e-10)
    assert autodiff.gradcheck(lambda x: loss(tracer, x), tracer.tensor(a))


@pytest.mark.parametrize("fn", [lambda m, a: m.linalg.matrix_norm(a, 2), lambda m, a: m.linalg.matrix_norm(a, "nuc"),
                                lambda m, a: m.linalg.svdvals(a).sum(),
                                lambda m, a: m.linalg.svd(a, full_matrices=False)[1].sum()],
                         ids=["2", "nuc", "svdvals", "svd_S"])
def test_gradient_at_a_repeated_singular_value_is_torchs(fn):
    """2 I has one singular value three times: svdvals' gradient U diag(g) Vh is the same for every choice
    of the singular vectors (g is equal across the tie), and finite, as torch's; the 2-norm's max shares it."""
    want, got = _both(fn, 2.0 * np.eye(3))
    for value, grad in got:
        np.testing.assert_allclose(value, want[0], rtol=1e-12)
        np.testing.assert_allclose(grad, want[1], rtol=1e-9, atol=1e-12)


def test_errors_as_torch():
    for bad in (tt.tensor([[1, 2], [3, 4]]), tt.tensor([1.0, 2.0])):
        with pytest.raises(RuntimeError, match="svdvals"):
            tt.linalg.svdvals(bad)
        with pytest.raises(RuntimeError):
            torch.linalg.svdvals(torch.tensor(bad.numpy()))
    with pytest.raises(NotImplementedError, match="full_matrices=False"):
        tt.linalg.svd(tt.tensor(A))
    with pytest.raises(RuntimeError, match="empty"):
        tt.linalg.matrix_norm(tt.zeros((0, 3)), 2)
    assert tt.linalg.matrix_norm(tt.zeros((0, 3)), "nuc").item() == 0.0
