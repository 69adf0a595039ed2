"""optim.LBFGS against torch.optim.LBFGS (issue 21 item 8): 5-step trajectories (parameters and returned losses)
on a small least-squares regression and a small tanh MLP, with and without the strong-Wolfe line search, float64
(1e-10) and float32 (1e-5 relative); the closure calls loss.backward() as torch's, or sets .grad from a compiled
autodiff.value_and_grad step; state_dict in torch's layout, resumed midway (also through nn.save/nn.load)."""
import numpy as np
import pytest

import autodiff
import nn
import tracer
from nn import functional as F
from nn import optim
from tests.torch_optional import torch

rng = np.random.default_rng(8)
X = rng.standard_normal((12, 3))
Y = rng.standard_normal((12, 2))
W1, B1 = rng.standard_normal((5, 3)) * 0.5, rng.standard_normal(5) * 0.1
W2, B2 = rng.standard_normal((2, 5)) * 0.5, rng.standard_normal(2) * 0.1
PROBLEMS = {"regression": [W1[:2], B1[:2]], "mlp": [W1, B1, W2, B2]}
TOL = {"float64": dict(rtol=1e-10, atol=1e-12), "float32": dict(rtol=1e-5, atol=1e-5)}


def _forward(lib, ps, x):
    if len(ps) == 2:
        return lib.matmul(x, ps[0].T) + ps[1]
    return lib.matmul(lib.tanh(lib.matmul(x, ps[0].T) + ps[1]), ps[2].T) + ps[3]


def _run_torch(problem, dtype, kwargs, steps=5, sd=None, start=None):
    ps = [torch.tensor(p.astype(dtype), requires_grad=True) for p in (start or PROBLEMS[problem])]
    x, y = torch.tensor(X.astype(dtype)), torch.tensor(Y[:, :2].astype(dtype))
    opt = torch.optim.LBFGS(ps, **kwargs)
    if sd is not None:
        opt.load_state_dict(sd)

    def closure():
        opt.zero_grad()
        loss = ((_forward(torch, ps, x) - y) ** 2).mean()
        loss.backward()
        return loss
    losses = [float(opt.step(closure)) for _ in range(steps)]
    return losses, [p.detach().numpy().copy() for p in ps], opt


def _run_ours(problem, dtype, kwargs, steps=5, compiled=False, opt=None, ps=None):
    ps = ps or [nn.Parameter(p.astype(dtype)) for p in PROBLEMS[problem]]
    x, y = tracer.tensor(X.astype(dtype)), tracer.tensor(Y[:, :2].astype(dtype))
    opt = opt or optim.LBFGS(ps, **kwargs)
    loss_fn = lambda x, y: ((_forward(tracer, ps, x) - y) ** 2).mean()  # noqa: E731
    step = autodiff.value_and_grad(loss_fn, wrt=ps)

    def closure():
        opt.zero_grad()
        if compiled:
            loss, grads = step(x, y)
            for p, g in zip(ps, grads, strict=True):
                p.grad = g
            return loss
        loss = loss_fn(x, y)
        loss.backward()
        return loss
    losses = [float(opt.step(closure)) for _ in range(steps)]
    return losses, [p.numpy().copy() for p in ps], opt, ps


# 5 steps of 3 iterations stay away from the converged regime, where tolerance tests on differences of ~1e-9
# decide whether one more iteration runs (then rounding decides); one run with torch's defaults.
SEARCH = [dict(lr=0.2, max_iter=3), dict(line_search_fn="strong_wolfe", max_iter=3),
          dict(lr=1, max_iter=2, history_size=2), dict(line_search_fn="strong_wolfe")]


@pytest.mark.parametrize("problem", ["regression", "mlp"])
@pytest.mark.parametrize("kwargs", SEARCH[:3], ids=["fixed", "strong_wolfe", "short_history"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_trajectory_matches_torch(problem, kwargs, dtype):
    if torch is None:
        pytest.skip("torch is not installed")
    if dtype == "float32":  # BLAS sums in another order differ by ~1e-7; the curvature pairs' divisions grow it
        kwargs = {**kwargs, "max_iter": 2}  # by about 3x per iteration: 10 iterations stay within 1e-5
    t_losses, t_params, _ = _run_torch(problem, dtype, kwargs)
    o_losses, o_params, opt, _ = _run_ours(problem, dtype, kwargs)
    np.testing.assert_allclose(o_losses, t_losses, **TOL[dtype])
    for a, b in zip(o_params, t_params, strict=True):
        assert a.dtype == b.dtype
        np.testing.assert_allclose(a, b, **TOL[dtype])
    assert o_losses[-1] < o_losses[0]  # it optimises


def test_defaults_strong_wolfe_regression():
    """torch's defaults (20 iterations a step) with the line search, float64, on the regression."""
    if torch is None:
        pytest.skip("torch is not installed")
    t_losses, t_params, _ = _run_torch("regression", "float64", SEARCH[3])
    o_losses, o_params, _, _ = _run_ours("regression", "float64", SEARCH[3])
    np.testing.assert_allclose(o_losses, t_losses, **TOL["float64"])
    for a, b in zip(o_params, t_params, strict=True):
        np.testing.assert_allclose(a, b, **TOL["float64"])


@pytest.mark.parametrize("kwargs", SEARCH[:2], ids=["fixed", "strong_wolfe"])
def test_compiled_closure_matches_eager(kwargs):
    eager = _run_ours("mlp", "float64", kwargs)
    compiled = _run_ours("mlp", "float64", kwargs, compiled=True)
    np.testing.assert_allclose(compiled[0], eager[0], rtol=1e-12)
    for a, b in zip(compiled[1], eager[1], strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("kwargs", SEARCH[:2], ids=["fixed", "strong_wolfe"])
def test_state_dict_resume(kwargs, tmp_path):
    full = _run_ours("mlp", "float64", kwargs, steps=4)
    _, _, opt, ps = _run_ours("mlp", "float64", kwargs, steps=2)
    sd = opt.state_dict()
    assert sorted(sd["state"][0]) == sorted(["func_evals", "n_iter", "d", "t", "old_dirs", "old_stps", "ro",
                                              "H_diag", "prev_flat_grad", "prev_loss", "al"])
    assert sd["param_groups"][0]["params"] == [0, 1, 2, 3]
    nn.save(sd["state"], tmp_path / "opt.npz")  # nn.save stores no strings or None (line_search_fn)
    for loaded in (sd, {"state": nn.load(tmp_path / "opt.npz"), "param_groups": sd["param_groups"]}):
        ps2 = [nn.Parameter(p.numpy().copy()) for p in ps]
        opt2 = optim.LBFGS(ps2, **kwargs)
        opt2.load_state_dict(loaded)
        losses, params, _, _ = _run_ours("mlp", "float64", kwargs, steps=2, opt=opt2, ps=ps2)
        np.testing.assert_allclose(losses, full[0][2:], rtol=1e-12)
        for a, b in zip(params, full[1], strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
    if torch is not None:  # torch resumes from ours and lands where our uninterrupted run does
        def to_torch(v):
            if isinstance(v, list):
                return [None if a is None else to_torch(a) for a in v]
            return torch.tensor(v) if isinstance(v, np.ndarray | np.generic) else v
        tsd = {"state": {0: {k: to_torch(v) for k, v in sd["state"][0].items()}},
               "param_groups": sd["param_groups"]}
        _, params, _ = _run_torch("mlp", "float64", kwargs, steps=2, sd=tsd, start=[p.numpy() for p in ps])
        for a, b in zip(params, full[1], strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_errors():
    p = nn.Parameter(np.zeros(2))
    with pytest.raises(ValueError, match="line_search_fn"):
        optim.LBFGS([p], line_search_fn="armijo")
    with pytest.raises(ValueError, match="parameter groups"):
        optim.LBFGS([{"params": [p]}, {"params": [nn.Parameter(np.zeros(1))]}])
    opt = optim.LBFGS([p])
    with pytest.raises(TypeError, match="closure"):
        opt.step()
    with pytest.raises(TypeError, match="return the loss"):
        opt.step(lambda: None)


def test_optimal_start_returns_without_moving():
    p = nn.Parameter(np.array([1.0, -2.0]))
    opt = optim.LBFGS([p])

    def closure():
        opt.zero_grad()
        loss = ((p - tracer.tensor(np.array([1.0, -2.0]))) ** 2).sum()
        loss.backward()
        return loss
    assert float(opt.step(closure)) == 0.0
    np.testing.assert_array_equal(p.numpy(), [1.0, -2.0])
    assert opt.state_dict()["state"][0]["func_evals"] == 1


def test_mse_through_functional():
    """A model and F.mse_loss, as a torch program writes them: the loss falls to the least-squares optimum."""
    model = nn.Linear(3, 2, bias=True)
    x, y = tracer.tensor(X.astype("float32")), tracer.tensor(Y.astype("float32"))
    opt = optim.LBFGS(model.parameters(), line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        return loss
    for _ in range(3):
        opt.step(closure)
    a = np.hstack([X, np.ones((12, 1))])
    best = np.linalg.lstsq(a, Y, rcond=None)[0]
    np.testing.assert_allclose(model.weight.numpy(), best[:3].T, rtol=1e-3, atol=1e-4)
