"""Optimizers: 5-step trajectories against the update rules written in NumPy (and torch.optim), state
dicts, errors, schedules and gradient clipping."""
import math

import numpy as np
import pytest

import nn
import tracer
from nn import optim

SHAPES = [(3, 4), (4,)]
rng = np.random.default_rng(2)
START = [rng.standard_normal(s).astype("float32") for s in SHAPES]
TARGET = [rng.standard_normal(s).astype("float32") for s in SHAPES]
NOISE = [[rng.standard_normal(s).astype("float32") for s in SHAPES] for _ in range(5)]


def _grad(k, i, p):
    """The gradient at step k for parameter i: a quadratic pull to TARGET plus fixed noise."""
    return 2 * (p - TARGET[i]) + NOISE[k][i]


def _numpy_sgd(lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False):
    ps = [p.astype("float64") for p in START]
    bufs = [None] * len(ps)
    for k in range(5):
        for i, p in enumerate(ps):
            g = _grad(k, i, p) + weight_decay * p
            if momentum:
                bufs[i] = g.copy() if bufs[i] is None else momentum * bufs[i] + (1 - dampening) * g
                g = g + momentum * bufs[i] if nesterov else bufs[i]
            ps[i] = p - lr * g
    return ps


def _numpy_adam(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, decoupled=False):
    ps = [p.astype("float64") for p in START]
    m = [np.zeros_like(p) for p in ps]
    v = [np.zeros_like(p) for p in ps]
    for k in range(5):
        t = k + 1
        for i, p in enumerate(ps):
            g = _grad(k, i, p)
            if decoupled:
                p = p * (1 - lr * weight_decay)
            else:
                g = g + weight_decay * p
            m[i] = betas[0] * m[i] + (1 - betas[0]) * g
            v[i] = betas[1] * v[i] + (1 - betas[1]) * g * g
            m_hat, v_hat = m[i] / (1 - betas[0] ** t), v[i] / (1 - betas[1] ** t)
            ps[i] = p - lr * m_hat / (np.sqrt(v_hat) + eps)
    return ps


CONFIGS = {
    "sgd": (optim.SGD, dict(lr=0.1), lambda: _numpy_sgd(0.1)),
    "sgd_momentum": (optim.SGD, dict(lr=0.05, momentum=0.9, dampening=0.1, weight_decay=0.01),
                     lambda: _numpy_sgd(0.05, 0.9, 0.1, 0.01)),
    "sgd_nesterov": (optim.SGD, dict(lr=0.05, momentum=0.8, nesterov=True), lambda: _numpy_sgd(0.05, 0.8, nesterov=True)),
    "adam": (optim.Adam, dict(lr=0.01), lambda: _numpy_adam(0.01)),
    "adam_decay": (optim.Adam, dict(lr=0.01, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1),
                   lambda: _numpy_adam(0.01, (0.8, 0.99), 1e-6, 0.1)),
    "adamw": (optim.AdamW, dict(lr=0.01), lambda: _numpy_adam(0.01, weight_decay=0.01, decoupled=True)),
}


def _run(cls, kwargs, steps=5, params=None):
    params = params or [nn.Parameter(p) for p in START]
    opt = cls(params, **kwargs)
    for k in range(steps):
        grads = [_grad(k, i, p.numpy()) for i, p in enumerate(params)]
        opt.step([tracer.tensor(g) if i == 0 else g for i, g in enumerate(grads)])  # Tensors or arrays
    return params, opt


@pytest.mark.parametrize("name", CONFIGS)
def test_trajectory_matches_numpy(name):
    cls, kwargs, reference = CONFIGS[name]
    params, _ = _run(cls, kwargs)
    for p, expected in zip(params, reference(), strict=True):
        assert p.dtype == "float32"
        np.testing.assert_allclose(p.numpy(), expected, rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("name", CONFIGS)
def test_trajectory_matches_torch(name):
    torch = pytest.importorskip("torch")
    cls, kwargs, _ = CONFIGS[name]
    params, _ = _run(cls, kwargs)
    tparams = [torch.tensor(p, requires_grad=True) for p in START]
    topt = getattr(torch.optim, cls.__name__)(tparams, **kwargs)
    for k in range(5):
        for i, p in enumerate(tparams):
            p.grad = torch.tensor(_grad(k, i, p.detach().numpy()))
        topt.step()
    for p, tp in zip(params, tparams, strict=True):
        np.testing.assert_allclose(p.numpy(), tp.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_updates_are_in_place():
    params = [nn.Parameter(p) for p in START]
    arrays = [p._data for p in params]
    _run(optim.Adam, dict(lr=0.1), params=params)
    assert all(p._data is a for p, a in zip(params, arrays, strict=True))
    assert not np.allclose(params[0].numpy(), START[0])


def test_step_errors_name_the_parameter_and_shapes():
    opt = optim.SGD([nn.Parameter(p) for p in START], lr=0.1)
    with pytest.raises(ValueError, match=r"gradient 1 has shape \(5,\).*parameter 1.*\(4,\)"):
        opt.step([np.zeros((3, 4)), np.zeros(5)])
    with pytest.raises(ValueError, match="1 gradients for 2 parameters"):
        opt.step([np.zeros((3, 4))])
    with pytest.raises(TypeError, match="list of gradients"):
        opt.step(tracer.tensor(np.zeros((3, 4))))  # one Tensor would otherwise iterate over its rows
    assert opt.step_count == 0


def test_constructor_errors():
    p = [nn.Parameter(np.zeros(2))]
    with pytest.raises(ValueError, match="empty"):
        optim.SGD([], lr=0.1)
    with pytest.raises(ValueError, match="more than once"):
        optim.SGD(p + p, lr=0.1)
    with pytest.raises(ValueError, match="lr"):
        optim.Adam(p, lr=-1)
    with pytest.raises(ValueError, match="betas"):
        optim.Adam(p, betas=(0.9, 1.0))
    with pytest.raises(ValueError, match="nesterov"):
        optim.SGD(p, lr=0.1, nesterov=True)
    with pytest.raises(TypeError, match="floating-point"):
        optim.SGD([tracer.tensor(np.zeros(2, "int64"))], lr=0.1)


@pytest.mark.parametrize("name", ["sgd_momentum", "adam", "adamw"])
def test_state_dict_resumes_the_same_trajectory(name):
    cls, kwargs, _ = CONFIGS[name]
    full, _ = _run(cls, kwargs, steps=5)
    params, opt = _run(cls, kwargs, steps=3)
    saved_params, saved = [p.numpy().copy() for p in params], opt.state_dict()
    opt.step([np.ones(s) for s in SHAPES])  # state_dict() is a copy: later steps do not change it
    resumed = [nn.Parameter(p) for p in saved_params]
    opt2 = cls(resumed, **kwargs)
    opt2.load_state_dict(saved)
    assert opt2.step_count == (0 if cls is optim.SGD else 3)  # torch's SGD state holds no step count
    for k in range(3, 5):
        opt2.step([_grad(k, i, p.numpy()) for i, p in enumerate(resumed)])
    for a, b in zip(full, resumed, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_state_dict_survives_save_and_load(tmp_path):
    for cls, kwargs in [(optim.SGD, dict(lr=0.1)), (optim.SGD, dict(lr=0.1, momentum=0.9)), (optim.Adam, {})]:
        params, opt = _run(cls, kwargs, steps=2)
        nn.save(opt.state_dict(), tmp_path / "opt.npz")
        again = cls([nn.Parameter(p.numpy()) for p in params], **kwargs)
        again.load_state_dict(nn.load(tmp_path / "opt.npz"))
        assert again.step_count == (0 if cls is optim.SGD else 2) and again.lr == opt.lr
        for a, b in zip(opt.state, again.state, strict=True):
            assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


def test_load_state_dict_rejects_mismatches():
    opt = optim.Adam([nn.Parameter(p) for p in START])
    opt.step([np.ones(s) for s in SHAPES])
    sd = opt.state_dict()
    sd["state"][1]["exp_avg"] = np.zeros(7)
    sd["state"][5] = {"exp_avg": np.zeros(1)}
    with pytest.raises(ValueError, match=r"exp_avg of parameter 1.*\(7,\)") as info:
        opt.load_state_dict(sd)
    assert "5" in str(info.value)


def test_lr_attribute_is_used_by_step():
    p = nn.Parameter(np.zeros(1, "float32"))
    opt = optim.SGD([p], lr=1.0)
    opt.lr = 0.5
    opt.step([np.ones(1)])
    assert float(p.numpy()[0]) == -0.5


def test_step_lr_matches_torch_rule():
    opt = optim.SGD([nn.Parameter(np.zeros(1))], lr=1.0)
    sched = optim.StepLR(opt, step_size=3, gamma=0.5)
    lrs = [opt.lr]
    for _ in range(7):
        sched.step()
        lrs.append(opt.lr)
    assert lrs == [1.0, 1.0, 1.0, 0.5, 0.5, 0.5, 0.25, 0.25]
    with pytest.raises(ValueError):
        optim.StepLR(opt, step_size=0)


def test_warmup_cosine():
    opt = optim.Adam([nn.Parameter(np.zeros(1))], lr=0.1)
    sched = optim.WarmupCosine(opt, warmup_steps=4, total_steps=12, min_lr=0.01)
    lrs = [opt.lr]
    for _ in range(14):
        sched.step()
        lrs.append(opt.lr)
    np.testing.assert_allclose(lrs[:4], [0.025, 0.05, 0.075, 0.1])
    assert lrs[4] == pytest.approx(0.1) and lrs[8] == pytest.approx(0.01 + 0.09 * 0.5)
    assert lrs[12] == pytest.approx(0.01) and lrs[14] == pytest.approx(0.01)
    assert all(a >= b for a, b in zip(lrs[4:-1], lrs[5:], strict=True))  # never increases after warm-up
    state = sched.state_dict()
    opt2 = optim.Adam([nn.Parameter(np.zeros(1))], lr=0.1)
    sched2 = optim.WarmupCosine(opt2, warmup_steps=4, total_steps=12, min_lr=0.01)
    sched2.load_state_dict(state)
    assert opt2.lr == opt.lr and sched2.last_step == 14
    with pytest.raises(ValueError):
        optim.WarmupCosine(opt, warmup_steps=5, total_steps=3)


def test_clip_grad_norm():
    grads = [np.array([3.0, 0.0], "float32"), tracer.tensor(np.array([[4.0]], "float32"))]
    clipped, norm = optim.clip_grad_norm(grads, max_norm=1.0)
    assert norm == pytest.approx(5.0)
    total = math.sqrt(sum(float((c.astype("float64") ** 2).sum()) for c in clipped))
    assert total == pytest.approx(1.0, rel=1e-5) and clipped[0].dtype == np.float32
    np.testing.assert_allclose(clipped[1], [[0.8]], rtol=1e-5)
    assert float(grads[0][0]) == 3.0  # inputs untouched
    same, norm = optim.clip_grad_norm([np.array([0.3, 0.4])], max_norm=1.0)
    assert norm == pytest.approx(0.5) and same[0].tolist() == [0.3, 0.4]


def test_clip_grad_norm_matches_torch():
    torch = pytest.importorskip("torch")
    grads = [rng.standard_normal(s).astype("float32") for s in SHAPES]
    tparams = [torch.zeros(s, requires_grad=True) for s in SHAPES]
    for p, g in zip(tparams, grads, strict=True):
        p.grad = torch.tensor(g)
    tnorm = torch.nn.utils.clip_grad_norm_(tparams, 0.5)
    clipped, norm = optim.clip_grad_norm(grads, 0.5)
    assert norm == pytest.approx(float(tnorm), rel=1e-5)
    for c, p in zip(clipped, tparams, strict=True):
        np.testing.assert_allclose(c, p.grad.numpy(), rtol=1e-5)
