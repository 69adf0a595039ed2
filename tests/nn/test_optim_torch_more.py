"""Issue 21 item 8 against torch.optim: SGD dampening/maximize, Adam/AdamW amsgrad/maximize, Adamax, NAdam, RAdam,
RMSprop, Adagrad, Adadelta. Trajectories driven by the same gradient arrays (some None, with two parameter
groups) in float64 (1e-10) and float32 (1e-5 relative); state dicts in torch's layout, resumed at step 3 from
our own (through nn.save) and from torch's, and ours loaded by torch."""
import copy
import inspect

import numpy as np
import pytest

import nn
from nn import optim

torch = pytest.importorskip("torch")

SHAPES = [(3, 4), (4,), (2, 2)]
rng = np.random.default_rng(21)
START = [rng.standard_normal(s) for s in SHAPES]
GRADS = [[rng.standard_normal(s) for s in SHAPES] for _ in range(8)]

CONFIGS = [
    ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.2, weight_decay=0.01)),
    ("SGD", dict(lr=0.1, momentum=0.5, nesterov=True, maximize=True)),
    ("Adam", dict(lr=0.05, amsgrad=True, weight_decay=0.1)),
    ("Adam", dict(lr=0.05, maximize=True, decoupled_weight_decay=True, weight_decay=0.1)),
    ("AdamW", dict(lr=0.05, amsgrad=True, maximize=True)),
    ("Adamax", dict()),
    ("Adamax", dict(lr=0.05, betas=(0.8, 0.99), weight_decay=0.1, maximize=True)),
    ("NAdam", dict()),
    ("NAdam", dict(lr=0.05, weight_decay=0.1, momentum_decay=0.01, maximize=True)),
    ("NAdam", dict(weight_decay=0.1, decoupled_weight_decay=True)),
    ("RAdam", dict()),
    ("RAdam", dict(lr=0.05, betas=(0.9, 0.8), weight_decay=0.1, decoupled_weight_decay=True, maximize=True)),
    ("RAdam", dict(lr=0.05, betas=(0.9, 0.8), weight_decay=0.1)),  # rectified from step 7 on
    ("RMSprop", dict()),
    ("RMSprop", dict(lr=0.01, alpha=0.9, centered=True, momentum=0.9, weight_decay=0.1)),
    ("RMSprop", dict(momentum=0.5, maximize=True, eps=1e-4)),
    ("Adagrad", dict()),
    ("Adagrad", dict(lr=0.1, lr_decay=0.1, initial_accumulator_value=0.5, eps=1e-6, weight_decay=0.1, maximize=True)),
    ("Adadelta", dict()),
    ("Adadelta", dict(lr=0.5, rho=0.8, eps=1e-5, weight_decay=0.1, maximize=True)),
]
IDS = [f"{n}-{i}" for i, (n, _) in enumerate(CONFIGS)]
STEPS = 8  # RAdam with betas (0.9, 0.8) switches to its rectified step at step 7


def _present(layout):
    return (lambda k, i: True) if layout == "plain" else (lambda k, i: not (i == 1 and k in (0, 3)) and
                                                          not (i == 2 and k == 1))


def _groups(layout, ps, kwargs):
    if layout == "plain":
        return ps
    return [{"params": ps[:2]}, {"params": ps[2:], "lr": kwargs.get("lr", 0.01) * 2, "weight_decay": 0.05}]


def _ours(name, kwargs, dtype, layout, steps=STEPS, ps=None, opt=None, start=0):
    ps = ps or [nn.Parameter(s.astype(dtype)) for s in START]
    opt = opt or getattr(optim, name)(_groups(layout, ps, kwargs), **kwargs)
    present = _present(layout)
    history = []
    for k in range(start, steps):
        opt.step([GRADS[k][i].astype(dtype) if present(k, i) else None for i in range(len(ps))])
        history.append([p.numpy().copy() for p in ps])
    return ps, opt, history


def _torch(name, kwargs, dtype, layout, steps=STEPS, tp=None, topt=None, start=0):
    tp = tp or [torch.tensor(s.astype(dtype), requires_grad=True) for s in START]
    topt = topt or getattr(torch.optim, name)(_groups(layout, tp, kwargs), **kwargs)
    present = _present(layout)
    history = []
    for k in range(start, steps):
        for i, p in enumerate(tp):
            p.grad = torch.tensor(GRADS[k][i].astype(dtype)) if present(k, i) else None
        topt.step()
        history.append([p.detach().numpy().copy() for p in tp])
    return tp, topt, history


def _close(ours, theirs, dtype, loose=False):
    tol = dict(rtol=1e-10, atol=1e-12) if dtype == "float64" and not loose else dict(rtol=1e-5, atol=1e-6)
    for step, (a, b) in enumerate(zip(ours, theirs, strict=True)):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert x.dtype == np.dtype(dtype)
            np.testing.assert_allclose(x, y, **tol, err_msg=f"step {step + 1}, parameter {i}")


@pytest.mark.parametrize("layout", ["plain", "groups_and_none"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name,kwargs", CONFIGS, ids=IDS)
def test_trajectory_matches_torch(name, kwargs, dtype, layout):
    _close(_ours(name, kwargs, dtype, layout)[2], _torch(name, kwargs, dtype, layout)[2], dtype)


def _to_numpy(sd):
    return {"state": {k: {n: v.numpy() if isinstance(v, torch.Tensor) else v for n, v in s.items()}
                      for k, s in sd["state"].items()}, "param_groups": copy.deepcopy(sd["param_groups"])}


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name,kwargs", CONFIGS, ids=IDS)
def test_resume_at_step_3_from_nn_save(name, kwargs, dtype, tmp_path):
    full = _ours(name, kwargs, dtype, "groups_and_none")[2]
    ps, opt, _ = _ours(name, kwargs, dtype, "groups_and_none", steps=3)
    nn.save({"opt": opt.state_dict()}, tmp_path / "o.npz")
    again = [nn.Parameter(p.numpy().copy()) for p in ps]
    opt2 = getattr(optim, name)(_groups("groups_and_none", again, kwargs), **kwargs)
    opt2.load_state_dict(nn.load(tmp_path / "o.npz")["opt"])
    rest = _ours(name, kwargs, dtype, "groups_and_none", ps=again, opt=opt2, start=3)[2]
    for a, b in zip(full[3:], rest, strict=True):
        for x, y in zip(a, b, strict=True):
            np.testing.assert_array_equal(x, y)  # resuming continues identically
    _close(rest, _torch(name, kwargs, dtype, "groups_and_none")[2][3:], dtype)


@pytest.mark.parametrize("name,kwargs", CONFIGS, ids=IDS)
def test_loads_torch_state_dict_and_torch_loads_ours(name, kwargs):
    dtype, layout = "float64", "groups_and_none"
    tp, topt, _ = _torch(name, kwargs, dtype, layout, steps=3)
    expected = _torch(name, kwargs, dtype, layout, tp=tp, topt=topt, start=3)[2]
    # torch's state at step 3 (tensors as arrays) into a fresh tracegrad optimizer
    tp3, topt3, _ = _torch(name, kwargs, dtype, layout, steps=3)
    ps = [nn.Parameter(p.detach().numpy().copy()) for p in tp3]
    opt = getattr(optim, name)(_groups(layout, ps, kwargs), **kwargs)
    opt.load_state_dict(_to_numpy(topt3.state_dict()))
    _close(_ours(name, kwargs, dtype, layout, ps=ps, opt=opt, start=3)[2], expected, dtype)
    # ours at step 3 (arrays as tensors) into a fresh torch optimizer: it continues as torch does from its own
    # state dict (torch casts a loaded NAdam mu_product to the parameters' dtype, so not quite uninterrupted)
    ps, opt, _ = _ours(name, kwargs, dtype, layout, steps=3)
    sd = opt.state_dict()
    sd = {"state": {k: {n: torch.tensor(v) for n, v in s.items()} for k, s in sd["state"].items()},
          "param_groups": sd["param_groups"]}
    results = []
    for state in (sd, topt3.state_dict()):
        tp = [torch.tensor(p.numpy().copy(), requires_grad=True) for p in ps]
        topt = getattr(torch.optim, name)(_groups(layout, tp, kwargs), **kwargs)
        topt.load_state_dict(state)
        results.append(_torch(name, kwargs, dtype, layout, tp=tp, topt=topt, start=3)[2])
    _close(results[0], results[1], dtype)
    _close(results[0], expected, dtype, loose=name == "NAdam")


@pytest.mark.parametrize("name,kwargs", CONFIGS, ids=IDS)
def test_state_dict_layout_is_torch_s(name, kwargs):
    _, opt, _ = _ours(name, kwargs, "float64", "groups_and_none", steps=2)
    _, topt, _ = _torch(name, kwargs, "float64", "groups_and_none", steps=2)
    ours, theirs = opt.state_dict(), topt.state_dict()
    assert sorted(ours["state"]) == sorted(theirs["state"])  # torch orders by first update
    for k, s in theirs["state"].items():
        assert list(ours["state"][k]) == list(s), k  # the same names in the same order
        for n, v in s.items():
            assert ours["state"][k][n].shape == tuple(v.shape)
    skip = {"foreach", "fused", "capturable", "differentiable"}
    for a, b in zip(ours["param_groups"], theirs["param_groups"], strict=True):
        assert a == {k: v for k, v in b.items() if k not in skip}


@pytest.mark.parametrize("name", ["Adam", "AdamW", "Adamax", "NAdam", "RAdam", "RMSprop", "Adagrad", "Adadelta"])
def test_signature_is_torch_s(name):
    ours = inspect.signature(getattr(optim, name)).parameters
    theirs = inspect.signature(getattr(torch.optim, name)).parameters
    assert list(ours) == list(theirs)
    for k, p in theirs.items():
        assert ours[k].kind == p.kind, k
        if p.default is not inspect.Parameter.empty:
            assert ours[k].default == p.default, k


def test_sgd_signature_keeps_design_md_s_order_and_torch_s_keywords():
    ours = inspect.signature(optim.SGD).parameters
    theirs = inspect.signature(torch.optim.SGD).parameters
    assert set(ours) == set(theirs) and ours["lr"].default == theirs["lr"].default
    assert all(ours[k].kind == inspect.Parameter.KEYWORD_ONLY for k in ("maximize", "foreach", "fused"))


@pytest.mark.parametrize("name,bad", [("RMSprop", dict(alpha=-1)), ("Adagrad", dict(lr_decay=-1)),
                                      ("Adagrad", dict(initial_accumulator_value=-1)), ("Adadelta", dict(rho=1.5)),
                                      ("NAdam", dict(momentum_decay=-1)), ("Adamax", dict(betas=(1.0, 0.9))),
                                      ("RAdam", dict(eps=-1)), ("SGD", dict(differentiable=True))])
def test_bad_options_are_refused_by_name(name, bad):
    key = next(iter(bad))
    with pytest.raises((ValueError, NotImplementedError), match=key):
        getattr(optim, name)([nn.Parameter(np.zeros(2))], **bad)


def test_a_changed_group_option_takes_effect_for_new_optimizers():
    ps, opt, _ = _ours("RMSprop", dict(momentum=0.5), "float64", "groups_and_none", steps=2)
    tp, topt, _ = _torch("RMSprop", dict(momentum=0.5), "float64", "groups_and_none", steps=2)
    opt.param_groups[1]["momentum"] = topt.param_groups[1]["momentum"] = 0.1
    opt.param_groups[0]["lr"] = topt.param_groups[0]["lr"] = 0.3
    _close(_ours("RMSprop", {}, "float64", "groups_and_none", ps=ps, opt=opt, start=2)[2],
           _torch("RMSprop", {}, "float64", "groups_and_none", tp=tp, topt=topt, start=2)[2], "float64")
