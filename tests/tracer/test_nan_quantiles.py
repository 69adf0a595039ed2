"""nanmedian and nanquantile against torch: values, indices, dtypes and gradients (eager loss.backward() and a
compiled step), every interpolation, all-NaN slices, and the errors torch raises."""
import itertools

import numpy as np
import pytest

import autodiff
import nn.torch as tt
import tracer
from tests.torch_optional import torch

NAN = float("nan")
_rng = np.random.default_rng(1)
X = _rng.standard_normal((4, 5))
X[_rng.random((4, 5)) < 0.35] = NAN
X[0] = NAN  # a slice of NaN only
X[1] = [1.0, 1.0, 2.0, NAN, 2.0]  # ties
MODES = ["linear", "lower", "higher", "midpoint", "nearest"]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("dim,keepdim", list(itertools.product([None, 0, 1, -1], [False, True])))
def test_forward_matches_torch(dtype, dim, keepdim):
    a = X.astype(dtype)
    if dim is None:
        np.testing.assert_array_equal(tt.nanmedian(tt.tensor(a)).numpy(), torch.nanmedian(torch.tensor(a)).numpy())
    else:
        got, want = tt.tensor(a).nanmedian(dim, keepdim), torch.nanmedian(torch.tensor(a), dim, keepdim)
        np.testing.assert_array_equal(got.values.numpy(), want.values.numpy())
        # torch leaves the index of an all-NaN slice open
        known = ~np.isnan(want.values.numpy())
        np.testing.assert_array_equal(got.indices.numpy()[known], want.indices.numpy()[known])
    for mode, q in itertools.product(MODES, [0.0, 0.3, 0.5, 1.0, [0.25, 0.5, 0.9]]):
        tq = torch.tensor(q, dtype=getattr(torch, dtype)) if isinstance(q, list) else q
        want = torch.nanquantile(torch.tensor(a), tq, dim=dim, keepdim=keepdim, interpolation=mode)
        got = tt.nanquantile(tt.tensor(a), q, dim=dim, keepdim=keepdim, interpolation=mode)
        assert got.shape == tuple(want.shape) and got.dtype == dtype, (mode, q)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, err_msg=f"{mode} {q}")


CASES = [("nanmedian_dim", lambda m, x: m.nanmedian(x, 1).values),
         ("nanmedian_all", lambda m, x: m.nanmedian(x[1:])),
         *[(f"nanquantile_{mode}", lambda m, x, mode=mode: m.nanquantile(x, 0.4, dim=1, interpolation=mode))
           for mode in MODES],
         ("nanquantile_list_all", lambda m, x: m.nanquantile(x[1:], m.tensor(np.array([0.1, 0.6]))))]


@pytest.mark.parametrize("fn", [c[1] for c in CASES], ids=[c[0] for c in CASES])
def test_gradients_match_torch_eager_and_compiled(fn):
    ta = torch.tensor(X, requires_grad=True)
    fn(torch, ta).nansum().backward()
    x = tt.tensor(X, requires_grad=True)
    fn(tt, x).nansum().backward()
    np.testing.assert_allclose(x.grad.numpy(), ta.grad.numpy(), rtol=1e-12)
    _, grad = autodiff.value_and_grad(lambda y: fn(tracer, y).nansum(), argnums=0)(tracer.tensor(X))
    np.testing.assert_allclose(grad.numpy(), ta.grad.numpy(), rtol=1e-12)


def test_integer_input_and_errors_as_torch():
    ints = np.array([[3, 1, 2], [5, 4, 6]], "int64")
    got, want = tt.tensor(ints).nanmedian(1), torch.nanmedian(torch.tensor(ints), 1)
    assert got.values.dtype == "int64"
    np.testing.assert_array_equal(got.values.numpy(), want.values.numpy())
    with pytest.raises(RuntimeError, match="float"):
        tt.nanquantile(tt.tensor(ints), 0.5)
    with pytest.raises(RuntimeError):
        torch.nanquantile(torch.tensor(ints), 0.5)
    with pytest.raises(RuntimeError, match=r"\[0, 1\]"):
        tt.nanquantile(tt.tensor(X), 1.5)
    with pytest.raises(ValueError, match="interpolation"):
        tt.nanquantile(tt.tensor(X), 0.5, interpolation="cubic")
    with pytest.raises(RuntimeError, match="empty"):
        tt.nanmedian(tt.zeros((0,)))
