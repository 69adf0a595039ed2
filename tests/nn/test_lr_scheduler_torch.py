"""Issue 21 item 9: nn.optim.lr_scheduler against torch.optim.lr_scheduler. 30-step sequences of every group's
rate (and momentum / beta1 where a scheduler cycles it) with two groups of different rates, equal to torch's to
1e-12; state dicts resumed at step 15 through nn.save, and from torch's own state dicts."""
import copy
import warnings

import numpy as np
import pytest

import nn
from nn import optim

torch = pytest.importorskip("torch")

STEPS = 30
METRICS = [1.0, 0.9, 0.95, 0.96, 0.97, 0.89, 0.9, 0.9, 0.9, 0.9, 0.7, 0.71, 0.72, 0.73, 0.74, 0.75, 0.5, 0.5, 0.5,
           0.5, 0.5, 0.5, 0.49999, 0.5, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6]


def _seq(S, o, first, second, milestones):
    return S.SequentialLR(o, [first(S, o), second(S, o)], milestones)


CASES = {
    "LambdaLR": ("SGD", lambda S, o: S.LambdaLR(o, [lambda e: 0.95 ** e, lambda e: 1 / (e + 1)])),
    "MultiplicativeLR": ("SGD", lambda S, o: S.MultiplicativeLR(o, lambda e: 0.9 if e % 2 else 0.97)),
    "StepLR": ("SGD", lambda S, o: S.StepLR(o, 7, 0.5)),
    "MultiStepLR": ("SGD", lambda S, o: S.MultiStepLR(o, [5, 12, 12, 20], 0.3)),
    "ConstantLR": ("SGD", lambda S, o: S.ConstantLR(o, 0.25, 8)),
    "LinearLR": ("SGD", lambda S, o: S.LinearLR(o, 0.1, 0.9, 12)),
    "ExponentialLR": ("SGD", lambda S, o: S.ExponentialLR(o, 0.93)),
    "PolynomialLR": ("SGD", lambda S, o: S.PolynomialLR(o, 20, 2.0)),
    "CosineAnnealingLR": ("SGD", lambda S, o: S.CosineAnnealingLR(o, 10, 0.001)),  # 30 steps: past T_max, back up
    "CosineAnnealingWarmRestarts": ("SGD", lambda S, o: S.CosineAnnealingWarmRestarts(o, 4, 2, 0.01)),
    "CosineAnnealingWarmRestarts_1": ("SGD", lambda S, o: S.CosineAnnealingWarmRestarts(o, 6)),
    "CyclicLR_triangular": ("SGD", lambda S, o: S.CyclicLR(o, [0.01, 0.02], 0.1, step_size_up=4, step_size_down=3)),
    "CyclicLR_triangular2": ("Adam", lambda S, o: S.CyclicLR(o, 0.001, [0.01, 0.05], 3, mode="triangular2",
                                                              base_momentum=0.85, max_momentum=0.95)),
    "CyclicLR_exp_range": ("SGD", lambda S, o: S.CyclicLR(o, 0.01, 0.1, 5, mode="exp_range", gamma=0.97)),
    "CyclicLR_no_momentum": ("RMSprop", lambda S, o: S.CyclicLR(o, 0.01, 0.1, 5, cycle_momentum=False)),
    "OneCycleLR_cos": ("SGD", lambda S, o: S.OneCycleLR(o, [0.1, 0.2], total_steps=STEPS + 1)),
    "OneCycleLR_linear_three_phase": ("Adam", lambda S, o: S.OneCycleLR(
        o, 0.1, epochs=4, steps_per_epoch=8, pct_start=0.25, anneal_strategy="linear", three_phase=True,
        div_factor=10.0, final_div_factor=100.0, base_momentum=[0.8, 0.7], max_momentum=0.9)),
    "SequentialLR": ("SGD", lambda S, o: _seq(S, o, lambda S, o: S.LinearLR(o, 0.1, 1.0, 5),
                                              lambda S, o: S.CosineAnnealingLR(o, 20), [5])),
    "SequentialLR_three": ("SGD", lambda S, o: S.SequentialLR(
        o, [S.ConstantLR(o, 0.5, 3), S.ExponentialLR(o, 0.9), S.StepLR(o, 4, 0.5)], [6, 15])),
    "ChainedScheduler": ("SGD", lambda S, o: S.ChainedScheduler([S.ConstantLR(o, 0.5, 4), S.ExponentialLR(o, 0.9)])),
    "ReduceLROnPlateau_min": ("SGD", lambda S, o: S.ReduceLROnPlateau(o, patience=2, factor=0.5, cooldown=1,
                                                                       min_lr=[0.01, 0.0])),
    "ReduceLROnPlateau_max_abs": ("SGD", lambda S, o: S.ReduceLROnPlateau(
        o, mode="max", patience=1, threshold=0.05, threshold_mode="abs", min_lr=0.02, eps=1e-3)),
}
OPTIONS = {"SGD": dict(lr=0.1, momentum=0.9), "Adam": dict(lr=0.01), "RMSprop": dict(lr=0.01, momentum=0.5)}


def _neg_metric(k):
    return -METRICS[k]


def _make(lib, name):
    kind, build = CASES[name]
    if lib == "torch":
        ps = [torch.zeros(2, requires_grad=True), torch.zeros(3, requires_grad=True)]
        O, S = torch.optim, torch.optim.lr_scheduler
    else:
        ps = [nn.Parameter(np.zeros(2)), nn.Parameter(np.zeros(3))]
        O, S = optim, optim.lr_scheduler
    opt = getattr(O, kind)([{"params": ps[:1]}, {"params": ps[1:], "lr": OPTIONS[kind]["lr"] * 0.37}],
                           **OPTIONS[kind])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return opt, build(S, opt)


def _record(opt, sched):
    g = opt.param_groups
    return ([float(x) for x in sched.get_last_lr()] + [float(x["lr"]) for x in g]
            + [float(x["betas"][0] if "betas" in x else x.get("momentum", 0.0)) for x in g])


def _run(opt, sched, name, start=0, stop=STEPS):
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch: "scheduler.step() before optimizer.step()"
        for k in range(start, stop):
            metric = (_neg_metric(k) if name.endswith("max_abs") else METRICS[k])
            sched.step(metric) if name.startswith("ReduceLROnPlateau") else sched.step()
            out.append(_record(opt, sched))
    return out


def _same(a, b):
    np.testing.assert_allclose(np.array(a), np.array(b), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("name", CASES)
def test_sequence_matches_torch(name):
    opt, sched = _make("ours", name)
    topt, tsched = _make("torch", name)
    _same([_record(opt, sched)], [_record(topt, tsched)])  # after the constructor
    _same(_run(opt, sched, name), _run(topt, tsched, name))
    assert getattr(sched, "last_epoch", None) == getattr(tsched, "last_epoch", None)


def _torch_opt_state(topt):
    sd = topt.state_dict()
    return {"state": {k: {n: v.numpy() for n, v in s.items()} for k, s in sd["state"].items()},
            "param_groups": copy.deepcopy(sd["param_groups"])}


@pytest.mark.parametrize("name", CASES)
def test_resume_at_step_15(name, tmp_path):
    opt, sched = _make("ours", name)
    full = _run(opt, sched, name)
    opt, sched = _make("ours", name)
    _run(opt, sched, name, stop=15)
    nn.save({"opt": opt.state_dict(), "sched": sched.state_dict()}, tmp_path / "ckpt.npz")
    ckpt = nn.load(tmp_path / "ckpt.npz")
    opt2, sched2 = _make("ours", name)
    opt2.load_state_dict(ckpt["opt"])
    sched2.load_state_dict(ckpt["sched"])
    _same(_run(opt2, sched2, name, start=15), full[15:])
    # torch's state dicts (the optimizer's tensors as arrays) into ours
    topt, tsched = _make("torch", name)
    _run(topt, tsched, name, stop=15)
    opt3, sched3 = _make("ours", name)
    opt3.load_state_dict(_torch_opt_state(topt))
    sched3.load_state_dict(tsched.state_dict())
    _same(_run(opt3, sched3, name, start=15), _run(topt, tsched, name, start=15))


def test_base_lrs_come_from_initial_lr_and_a_changed_rate_carries_on():
    opt, sched = _make("ours", "CosineAnnealingLR")
    topt, tsched = _make("torch", "CosineAnnealingLR")
    assert [g["initial_lr"] for g in opt.param_groups] == [0.1, 0.1 * 0.37] == sched.base_lrs
    _run(opt, sched, "CosineAnnealingLR", stop=3)
    _run(topt, tsched, "CosineAnnealingLR", stop=3)
    opt.param_groups[1]["lr"] = topt.param_groups[1]["lr"] = 0.5  # the recursive form continues from here
    _same(_run(opt, sched, "CosineAnnealingLR", start=3), _run(topt, tsched, "CosineAnnealingLR", start=3))


def test_errors_as_torch():
    opt, _ = _make("ours", "StepLR")
    S = optim.lr_scheduler
    with pytest.raises(ValueError, match="3 values"):
        S.CyclicLR(opt, [0.1, 0.2, 0.3], 1.0)
    with pytest.raises(ValueError, match="momentum"):
        S.OneCycleLR(optim.Adagrad([nn.Parameter(np.zeros(1))]), 0.1, total_steps=5)
    with pytest.raises(ValueError, match="total_steps"):
        S.OneCycleLR(opt, 0.1)
    with pytest.raises(ValueError, match="ReduceLROnPlateau"):
        S.ChainedScheduler([S.ReduceLROnPlateau(opt)])
    with pytest.raises(KeyError, match="initial_lr"):
        S.StepLR(optim.SGD([nn.Parameter(np.zeros(1))], lr=0.1), 3, last_epoch=4)
    with pytest.raises(TypeError, match="not an Optimizer"):
        S.StepLR(object(), 3)
    one = S.OneCycleLR(optim.SGD([nn.Parameter(np.zeros(1))], lr=0.1, momentum=0.9), 0.1, total_steps=2)
    one.step()
    one.step()
    with pytest.raises(ValueError, match="Tried to step 3 times"):
        one.step()


def test_schedules_module_still_importable():
    from nn.optim import schedules
    assert schedules.StepLR is optim.lr_scheduler.StepLR is optim.StepLR
    assert issubclass(schedules.WarmupCosine, schedules.LRSchedule)
