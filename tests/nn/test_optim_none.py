"""Optimizers skip a None gradient exactly as torch.optim does when p.grad is None (no state update, no step
count for that parameter, no decay), and param_groups / per-group options behave as torch's; compared with
torch.optim step by step."""
import numpy as np
import pytest

import nn
from nn import optim

torch = pytest.importorskip("torch")

rng = np.random.default_rng(5)
SHAPES = [(3, 2), (2,), (4,)]
START = [rng.standard_normal(s) for s in SHAPES]
GRADS = [[rng.standard_normal(s) for s in SHAPES] for _ in range(6)]


def _present(k, i):
    """Two heads trained alternately: parameter 1 has a gradient on even steps, parameter 2 on odd ones."""
    return i == 0 or (i == 1) == (k % 2 == 0)


CONFIGS = [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.1, momentum=0.9, weight_decay=0.1)),
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.05)),
    ("SGD", dict(lr=0.1, momentum=0.5, dampening=0.3)),
    ("Adam", dict(lr=0.05)),
    ("Adam", dict(lr=0.05, weight_decay=0.1)),
    ("AdamW", dict(lr=0.05)),
    ("AdamW", dict(lr=0.05, weight_decay=0.3, betas=(0.8, 0.9))),
]


def _torch_run(name, kwargs, present, steps=6, groups=None):
    tp = [torch.tensor(s, requires_grad=True) for s in START]
    topt = getattr(torch.optim, name)(groups(tp) if groups else tp, **kwargs)
    for k in range(steps):
        for i, p in enumerate(tp):
            p.grad = torch.tensor(GRADS[k][i]) if present(k, i) else None
        topt.step()
    return [p.detach().numpy() for p in tp]


def _ours(name, kwargs, present, steps=6, groups=None, named=False):
    ps = [nn.Parameter(s.copy()) for s in START]
    opt = getattr(optim, name)(groups(ps) if groups else ps, **kwargs)
    for k in range(steps):
        grads = [GRADS[k][i] if present(k, i) else None for i in range(len(ps))]
        opt.step(grads)
    return ps, opt


@pytest.mark.parametrize("name,kwargs", CONFIGS)
def test_a_none_gradient_is_skipped_as_torch(name, kwargs):
    ps, _ = _ours(name, kwargs, _present)
    for p, t in zip(ps, _torch_run(name, kwargs, _present), strict=True):
        np.testing.assert_allclose(p.numpy(), t, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("name,kwargs", CONFIGS)
def test_a_parameter_never_given_a_gradient_does_not_move(name, kwargs):
    ps, opt = _ours(name, kwargs, lambda k, i: i != 2)
    np.testing.assert_array_equal(ps[2].numpy(), START[2])  # no decay, no momentum, no Adam step
    assert opt.state[2] == {}


def test_none_in_a_dict_of_gradients():
    ps = {"a": nn.Parameter(START[0].copy()), "b": nn.Parameter(START[1].copy())}
    opt = optim.AdamW(ps, lr=0.1)
    opt.step({"a": GRADS[0][0], "b": None})
    np.testing.assert_array_equal(ps["b"].numpy(), START[1])
    assert not np.array_equal(ps["a"].numpy(), START[0])


def test_state_dict_keeps_the_per_parameter_step_counts():
    ps, opt = _ours("Adam", dict(lr=0.05), _present, steps=3)
    saved, values = opt.state_dict(), [p.numpy().copy() for p in ps]
    again = [nn.Parameter(v) for v in values]
    opt2 = optim.Adam(again, lr=0.05)
    opt2.load_state_dict(saved)
    full, _ = _ours("Adam", dict(lr=0.05), _present, steps=6)
    for k in range(3, 6):
        opt2.step([GRADS[k][i] if _present(k, i) else None for i in range(3)])
    for a, b in zip(full, again, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_clip_grad_norm_skips_none():
    clipped, norm = optim.clip_grad_norm([np.array([3.0, 4.0]), None], max_norm=1.0)
    assert norm == 5.0 and clipped[1] is None
    np.testing.assert_allclose(clipped[0], [0.6, 0.8], rtol=1e-5)


# ---------------------------------------------------------------- param_groups (item 20)


def _two_groups(ps):
    return [{"params": ps[:2]}, {"params": ps[2:], "lr": 0.2, "weight_decay": 0.1}]


@pytest.mark.parametrize("name,kwargs", [("SGD", dict(lr=0.01, momentum=0.9)), ("Adam", dict(lr=0.01)),
                                         ("AdamW", dict(lr=0.01, weight_decay=0.02))])
def test_per_group_options_as_torch(name, kwargs):
    ps, opt = _ours(name, kwargs, lambda k, i: True, groups=_two_groups)
    assert len(opt.param_groups) == 2 and opt.param_groups[1]["lr"] == 0.2
    assert opt.param_groups[0]["lr"] == kwargs["lr"] and opt.param_groups[1]["params"][0] is ps[2]
    for p, t in zip(ps, _torch_run(name, kwargs, lambda k, i: True, groups=_two_groups), strict=True):
        np.testing.assert_allclose(p.numpy(), t, rtol=1e-12, atol=1e-13)


def _step_both(opt, topt, tp, k):
    opt.step([GRADS[k][i] for i in range(3)])
    for i, p in enumerate(tp):
        p.grad = torch.tensor(GRADS[k][i])
    topt.step()


def _assert_same(ps, tp):
    for p, t in zip(ps, tp, strict=True):
        np.testing.assert_allclose(p.numpy(), t.detach().numpy(), rtol=1e-12)


def test_param_groups_lr_written_each_step_is_read():
    ps = [nn.Parameter(s.copy()) for s in START]
    tp = [torch.tensor(s, requires_grad=True) for s in START]
    opt, topt = optim.SGD(ps, lr=0.1, momentum=0.5), torch.optim.SGD(tp, lr=0.1, momentum=0.5)
    for k in range(4):
        for o in (opt, topt):
            for g in o.param_groups:
                g["lr"] = 0.1 / (k + 1)
        _step_both(opt, topt, tp, k)
    _assert_same(ps, tp)
    assert opt.lr == 0.1 / 4


@pytest.mark.filterwarnings("ignore:Detected call of")
def test_schedulers_follow_every_group():
    ps = [nn.Parameter(s.copy()) for s in START]
    opt = optim.SGD(_two_groups(ps), lr=0.01)
    sched = optim.StepLR(opt, step_size=1, gamma=0.5)
    tp = [torch.tensor(s, requires_grad=True) for s in START]
    topt = torch.optim.SGD(_two_groups(tp), lr=0.01)
    tsched = torch.optim.lr_scheduler.StepLR(topt, step_size=1, gamma=0.5)
    for _ in range(3):
        sched.step()
        tsched.step()
    assert [g["lr"] for g in opt.param_groups] == pytest.approx([g["lr"] for g in topt.param_groups])
    one = optim.Adam([ps[0]], lr=0.1)
    optim.StepLR(one, step_size=1, gamma=0.5).step()
    assert one.lr == 0.05 and one.param_groups[0]["lr"] == 0.05


def test_group_errors_name_the_problem():
    ps = [nn.Parameter(s.copy()) for s in START]
    with pytest.raises(ValueError, match="more than one group"):
        optim.SGD([{"params": ps[:2]}, {"params": ps[1:]}], lr=0.1)
    with pytest.raises(TypeError, match="'learning_rate'"):
        optim.SGD([{"params": ps, "learning_rate": 0.1}], lr=0.1)
    with pytest.raises(ValueError, match="'params'"):
        optim.SGD([{"lr": 0.1}], lr=0.1)
    with pytest.raises(ValueError, match="lr must be >= 0"):
        optim.SGD([{"params": ps, "lr": -1.0}], lr=0.1)
    opt = optim.SGD(_two_groups(ps), lr=0.01)
    with pytest.raises(ValueError, match=r"param_groups\[i\]\['lr'\]"):
        _ = opt.lr
    opt.lr = 0.5  # setting sets every group, as a scheduler's single rate
    assert [g["lr"] for g in opt.param_groups] == [0.5, 0.5]


def test_add_param_group_as_torch():
    ps = [nn.Parameter(s.copy()) for s in START]
    tp = [torch.tensor(s, requires_grad=True) for s in START]
    opt, topt = optim.Adam(ps[:2], lr=0.01), torch.optim.Adam(tp[:2], lr=0.01)
    opt.add_param_group({"params": [ps[2]], "lr": 0.1})
    topt.add_param_group({"params": [tp[2]], "lr": 0.1})
    for k in range(3):
        _step_both(opt, topt, tp, k)
    _assert_same(ps, tp)
