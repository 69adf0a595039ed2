"""Adversarial review of session 2's issue-23 work (since a527268): Optimizer.step's plan and the flat state it
skips, max pooling's NaN/tie/-inf taps, the float32 LSTM cell and log_softmax + nll rows, the split by fixed
slices, and the 2-thread splits. Each test attacks what a PyTorch user can do, against torch (CPU) or against
the same optimizer checking in full at every step. Strict xfails: findings left to their owners (see reasons)."""
import copy
import itertools
import os
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import autodiff
import nn
import tracer
from ir.runtime import numba_hook
from nn import functional as F
from nn import optim
from tests.ir.test_maxpool_nan import kernels  # noqa: F401  (the plain NumPy kernels, or numba's)
from tests.torch_optional import torch

nan, inf = np.nan, np.inf
TF = torch.nn.functional

# ------------------------------------------------------------------------------------------------ optimizer plan

SHAPES = [(200, 180), (40,), (16, 16), (7,)]  # one above numba_optim.MIN_SIZE: the per-parameter numba loops too
CONFIGS = [(optim.SGD, dict(lr=0.1)), (optim.SGD, dict(lr=0.1, momentum=0.9, nesterov=True)),
           (optim.SGD, dict(lr=0.1, momentum=0.9, weight_decay=0.01, maximize=True, dampening=0.1)),
           (optim.Adam, dict(lr=0.01, amsgrad=True)), (optim.AdamW, dict(lr=0.01)),
           (optim.RMSprop, dict(lr=0.01, centered=True, momentum=0.5)), (optim.Adagrad, dict(lr=0.1)),
           (optim.Adadelta, dict(lr=1.0))]
IDS = ["sgd", "nesterov", "sgd_all_options", "amsgrad", "adamw", "rmsprop_centered", "adagrad", "adadelta"]


def _full_checks(grads):  # (module level: a pickled optimizer refers to it by name)
    return None


def _pair(cls, kw):
    out = []
    for full in (False, True):
        rng = np.random.default_rng(0)
        ps = [nn.Parameter(rng.standard_normal(s).astype("float32")) for s in SHAPES]
        opt = cls(ps, **kw)
        if full:
            opt._planned = _full_checks  # the reference: every step checks in full
        out.append((ps, opt))
    return out


def _grads(step, kind="array"):
    rng = np.random.default_rng(100 + step)
    gs = [rng.standard_normal(s).astype("float32") for s in SHAPES]
    if kind == "tensor":
        return [tracer.tensor(g) for g in gs]
    if kind == "fortran":
        return [np.asfortranarray(g) for g in gs]
    if kind == "strided":
        return [np.stack([g, g], -1)[..., 0] for g in gs]
    if kind == "float64":
        return [g.astype("float64") for g in gs]
    return gs


def _assert_same(pair):
    (pa, oa), (pb, ob) = pair
    for x, y in zip(pa, pb, strict=True):
        assert x._data.dtype == y._data.dtype
        np.testing.assert_array_equal(x._data, y._data)
    assert oa.step_count == ob.step_count
    for sa, sb in zip(oa.state, ob.state, strict=True):
        assert sorted(sa) == sorted(sb)
        for k in sa:
            np.testing.assert_array_equal(np.asarray(sa[k]), np.asarray(sb[k]))


def _mutate(mut, ps, opt, cls):
    group = opt.param_groups[0]
    if mut == "lr_float32":
        group["lr"] = np.float32(0.05)
    elif mut == "betas_list" and "betas" in group:
        group["betas"] = [0.9, 0.99]
    elif mut == "data_in_place":
        ps[0].data[...] = 2.0
    elif mut == "rebound":
        ps[0].data = tracer.tensor(np.ones(SHAPES[0], np.float32))
    elif mut == "frozen":
        ps[1].requires_grad_(False)
    elif mut == "to_float64":
        for p in ps:
            p.data = tracer.tensor(p._data.astype(np.float64))
    elif mut == "state_dict":
        opt.load_state_dict(opt.state_dict())
    elif mut == "state_replaced":
        for st in opt.state:
            for k in list(st):
                st[k] = np.full_like(np.asarray(st[k]), 0.5)
    elif mut == "state_cleared" and cls is not optim.SGD:
        opt.state[0].clear()


MUTATIONS = ["lr_float32", "betas_list", "data_in_place", "rebound", "frozen", "to_float64", "state_dict",
             "state_replaced", "state_cleared", "deepcopy", "pickle", "kinds", "same_object_mutated", "anomaly",
             "grads_are_params", "grads_view_each_other"]
KINDS = ["array", "tensor", "array", "tensor", "fortran", "strided", "float64", "tensor", "array"]


@pytest.mark.parametrize("mut", MUTATIONS)
@pytest.mark.parametrize(("cls", "kw"), CONFIGS, ids=IDS)
def test_plan_matches_full_checks_under_user_changes(cls, kw, mut):
    """Each change a user can make between steps (after planned steps: the plan made at step 0 holds at 1..3) gives
    the bits and state of the same optimizer checking in full at every step."""
    pair = _pair(cls, kw)
    held = [_grads(0), _grads(0)]
    for s in range(7):
        if s == 4:
            for ps, opt in pair:
                _mutate(mut, ps, opt, cls)
            if mut == "deepcopy":
                pair = [copy.deepcopy(x) for x in pair]
            elif mut == "pickle":
                pair = [pickle.loads(pickle.dumps(x)) for x in pair]
        if mut == "betas_list" and s == 5:  # the list option changed in place: the plan must not trust it
            for _, opt in pair:
                if isinstance(opt.param_groups[0].get("betas"), list):
                    opt.param_groups[0]["betas"][1] = 0.9
        for j, (ps, opt) in enumerate(pair):
            if mut == "to_float64" and s >= 4:
                g = [x.astype(np.float64) for x in _grads(s)]
            elif mut == "same_object_mutated":
                for x in held[j]:
                    x *= 1.5
                g = held[j]
            elif mut == "grads_are_params":
                g = [p.data for p in ps]
            elif mut == "grads_view_each_other":
                base = _grads(s)
                g = [base[0], base[1], base[0][:16, :16], base[1][:7]]
            else:
                g = _grads(s, KINDS[s] if mut == "kinds" else "array")
            if mut == "anomaly" and s >= 4:
                with autodiff.detect_anomaly():
                    opt.step(list(g))
            else:
                opt.step(list(g))
        _assert_same(pair)


@pytest.mark.parametrize(("cls", "kw"), [(optim.SGD, dict(lr=0.05)), (optim.Adam, dict(lr=0.01))], ids=["sgd", "adam"])
def test_plan_holds_past_the_whole_function_program_and_matches_full_checks(cls, kw):
    """value_and_grad's gradients for 70 steps (numba's whole-function program takes over at HOT_CALLS, its arrays
    boxed by ir.runtime.numba_box): the plan made once holds to the end, and an optimizer checking in full given the
    same gradients (over copies of the parameters) gets the same bits. (The program's float32 tanh differs from
    NumPy's in the last bits, and a later step made from the same function takes the program sooner: so both
    optimizers take each step's gradients from one step function.)"""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((32, 64)).astype("float32")
    w0 = [rng.standard_normal((64, 64)).astype("float32") * 0.1, np.zeros(64, "float32"),
          rng.standard_normal((64, 10)).astype("float32") * 0.1]
    ws, copies = [nn.Parameter(w.copy()) for w in w0], [nn.Parameter(w.copy()) for w in w0]
    vg = autodiff.value_and_grad(lambda x: (tracer.tanh(x @ ws[0] + ws[1]) @ ws[2]).sum() * 0.01, wrt=ws)
    opt, full = cls(ws, **kw), cls(copies, **kw)
    full._planned = _full_checks
    plans = []
    for _ in range(70):
        grads = vg(x)[1]
        full.step(list(grads))
        opt.step(grads)
        plans.append(opt._plan)
        for a, b in zip(ws, copies, strict=True):
            np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert plans[5] is not None and all(p is plans[5] for p in plans[5:])


TORCH_CONFIGS = [(optim.SGD, torch.optim.SGD, dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01)),
                 (optim.SGD, torch.optim.SGD, dict(lr=0.1, momentum=0.9, maximize=True, dampening=0.2)),
                 (optim.Adam, torch.optim.Adam, dict(lr=0.01, amsgrad=True, weight_decay=0.1)),
                 (optim.AdamW, torch.optim.AdamW, dict(lr=0.01)),
                 (optim.RMSprop, torch.optim.RMSprop, dict(lr=0.01, centered=True, momentum=0.5)),
                 (optim.Adagrad, torch.optim.Adagrad, dict(lr=0.1, lr_decay=0.01)),
                 (optim.Adadelta, torch.optim.Adadelta, dict(lr=1.0, weight_decay=0.01))]


@pytest.mark.parametrize(("ours", "theirs", "kw"), TORCH_CONFIGS, ids=[c[0].__name__ + str(i)
                                                                       for i, c in enumerate(TORCH_CONFIGS)])
def test_planned_steps_follow_torch_through_option_changes(ours, theirs, kw):
    """A scheduler's NumPy-scalar lr, a momentum/betas/weight_decay change and a None gradient mid-run, against
    torch 2.x's CPU optimizer given the same changes."""
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s).astype("float32") for s in SHAPES]
    ps = [nn.Parameter(a.copy()) for a in arrays]
    ts = [torch.tensor(a.copy(), requires_grad=True) for a in arrays]
    opt, topt = ours(ps, **kw), theirs(ts, **kw)
    for s in range(7):
        gs = _grads(s)
        if s == 3:
            for g in (opt.param_groups[0], topt.param_groups[0]):
                g["lr"] = g["lr"] * np.float32(0.5)
        if s == 5:
            for g in (opt.param_groups[0], topt.param_groups[0]):
                if "betas" in g:
                    g["betas"] = (0.8, 0.99)
                if "momentum" in g and g["momentum"]:
                    g["momentum"] = 0.7
                if "weight_decay" in g:
                    g["weight_decay"] = 0.05
        none = s == 6  # parameter 1 without a gradient: skipped, its state untouched
        opt.step([None if none and i == 1 else tracer.tensor(g) for i, g in enumerate(gs)])
        for i, (t, g) in enumerate(zip(ts, gs, strict=True)):
            t.grad = None if none and i == 1 else torch.tensor(g)
        topt.step()
        for p, t in zip(ps, ts, strict=True):
            np.testing.assert_allclose(p.numpy(), t.detach().numpy(), rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("cls", [optim.SGD, optim.Adam])
def test_parameter_made_read_only_after_steps_raises_as_a_fresh_optimizer(cls):
    # (the numba path wrote on through the 1-D views and flat state made while it was writeable)
    ps = [nn.Parameter(np.ones((200, 200), np.float32)) for _ in range(2)]
    opt = cls(ps, lr=0.1)
    g = [np.ones((200, 200), np.float32)] * 2
    for _ in range(3):
        opt.step(g)
    ps[0]._data.flags.writeable = False
    before = [p.numpy().copy() for p in ps]
    with pytest.raises(ValueError, match=r"parameter 0 \(unnamed\) is read-only"):
        opt.step(g)
    for p, b in zip(ps, before, strict=True):  # raised before any parameter was updated
        np.testing.assert_array_equal(p.numpy(), b)
    ps[0]._data.flags.writeable = True
    opt.step(g)
    assert not np.array_equal(ps[0].numpy(), before[0])


@pytest.mark.parametrize("change", ["appended", "reversed"])
def test_param_groups_edited_by_hand_as_torch(change):
    a0, b0 = np.ones(3, np.float32), np.ones(2, np.float32)
    a, b = nn.Parameter(a0.copy()), nn.Parameter(b0.copy())
    ta, tb = torch.tensor(a0, requires_grad=True), torch.tensor(b0, requires_grad=True)
    if change == "appended":
        opt, topt = optim.SGD([a], lr=0.1), torch.optim.SGD([ta], lr=0.1)
        extra = dict(momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False, maximize=False)
        opt.param_groups.append({"params": [b], "lr": 1.0, **extra})
        topt.param_groups.append({**topt.param_groups[0], "params": [tb], "lr": 1.0})
    else:
        opt = optim.SGD([{"params": [a], "lr": 0.1}, {"params": [b], "lr": 1.0}])
        topt = torch.optim.SGD([{"params": [ta], "lr": 0.1}, {"params": [tb], "lr": 1.0}])
        opt.param_groups.reverse()
        topt.param_groups.reverse()
    a.grad, b.grad = tracer.tensor(np.ones(3, np.float32)), tracer.tensor(np.ones(2, np.float32))
    ta.grad, tb.grad = torch.ones(3), torch.ones(2)
    opt.step()
    topt.step()
    np.testing.assert_array_equal(a.numpy(), ta.detach().numpy())
    np.testing.assert_array_equal(b.numpy(), tb.detach().numpy())


# ------------------------------------------------------------------------------------------------ max pooling

SPECIALS = [nan, inf, -inf, 1.0, 0.0, -0.0]


def _pairs(shape, fill, dtype):
    """One sample per (position, value) x (position, value) of two special taps over `shape` (fill elsewhere)."""
    n = int(np.prod(shape))
    xs = []
    for (a, va), (b, vb) in itertools.product(itertools.product(range(n), SPECIALS), repeat=2):
        if a < b:
            x = np.full(shape, fill, dtype)
            x.ravel()[a], x.ravel()[b] = va, vb
            xs.append(x[None, None])
    return np.concatenate(xs)


def _same(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape and np.array_equal(a, b, equal_nan=True)


def _pool_case(x, kw, nd):
    tfn, fn = (TF.max_pool2d, F.max_pool2d) if nd == 2 else (TF.max_pool1d, F.max_pool1d)
    ty, ti = tfn(torch.tensor(x), return_indices=True, **kw)
    w = (np.arange(ty.numel()) % 7 + 1).reshape(ty.shape).astype(x.dtype)
    y, i = fn(tracer.tensor(x), return_indices=True, **kw)
    _same(y.numpy(), ty.numpy())
    _same(i.numpy(), ti.numpy())
    for relu in (False, True):
        leaf = torch.tensor(x, requires_grad=True)
        (tfn(torch.relu(leaf) if relu else leaf, **kw) * torch.tensor(w)).sum().backward()
        xt = tracer.tensor(x)
        _, (g,) = autodiff.value_and_grad(lambda t, relu=relu: (fn(F.relu(t) if relu else t, **kw) * w).sum(),
                                          wrt=[xt])(xt)
        _same(g.numpy(), leaf.grad.numpy())
        lf = tracer.tensor(x, requires_grad=True)
        (fn(F.relu(lf) if relu else lf, **kw) * tracer.tensor(w)).sum().backward()
        _same(lf.grad.numpy(), leaf.grad.numpy())
    if nd == 2:
        z = TF.max_unpool2d(ty, ti, kw["kernel_size"], kw["stride"], kw["padding"], output_size=x.shape[2:])
        u = F.max_unpool2d(y, i, kw["kernel_size"], kw["stride"], kw["padding"], output_size=x.shape[2:])
        _same(u.numpy(), z.numpy())


@pytest.mark.parametrize(("k", "s", "p", "ceil"), [(2, 2, 0, False), (3, 2, 1, True), (2, 1, 1, False)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_max_pool2d_two_specials_at_every_window_position(k, s, p, ceil, dtype, kernels):  # noqa: F811
    """NaN, +-inf, 1, +-0 at every pair of positions of a window (padded and ceil_mode windows too): values,
    indices, gradients (relu before the pool too), eager and compiled, and max_unpool after, as torch."""
    size = k + (1 if ceil else 0)
    _pool_case(_pairs((size, size), -1.0, dtype), dict(kernel_size=k, stride=s, padding=p, ceil_mode=ceil), 2)


@pytest.mark.parametrize(("k", "s", "p", "ceil"), [(2, 2, 0, False), (3, 2, 1, True)])
def test_max_pool1d_two_specials_at_every_position(k, s, p, ceil, kernels):  # noqa: F811
    for n in range(k, k + 3):
        _pool_case(_pairs((n,), -2.0, "float32"), dict(kernel_size=k, stride=s, padding=p, ceil_mode=ceil), 1)


@pytest.mark.parametrize(("nd", "n", "out"), [(1, 5, 3), (1, 7, 4), (2, 4, (3, 3))])
def test_adaptive_max_pool_two_specials_at_every_position(nd, n, out):
    x = _pairs((n,) if nd == 1 else (n, n), -1.0, "float32")
    tf, f = (TF.adaptive_max_pool1d, F.adaptive_max_pool1d) if nd == 1 else \
        (TF.adaptive_max_pool2d, F.adaptive_max_pool2d)
    ty, ti = tf(torch.tensor(x), out, return_indices=True)
    w = (np.arange(ty.numel()) % 5 + 1).reshape(ty.shape).astype("float32")
    leaf = torch.tensor(x, requires_grad=True)
    (tf(leaf, out) * torch.tensor(w)).sum().backward()
    y, i = f(tracer.tensor(x), out, return_indices=True)
    _same(y.numpy(), ty.numpy())
    _same(i.numpy(), ti.numpy())
    xt = tracer.tensor(x)
    _, (g,) = autodiff.value_and_grad(lambda t: (f(t, out) * w).sum(), wrt=[xt])(xt)
    _same(g.numpy(), leaf.grad.numpy())


def test_conv_net_planned_scratch_as_torch_and_from_two_threads(kernels):  # noqa: F811
    """Three convolutions of other work sizes (padding, stride 2, dilation 2) around relu + ceil_mode max pool, whose
    col2im scratch is planned (b9f6c40): gradients as torch's, and two Python threads calling the step at once get
    the serial bits (the arena the scratch shares)."""
    import threading
    rng = np.random.default_rng(0)
    vals = [rng.standard_normal((4, 3, 17, 15)).astype("float32"), (rng.standard_normal((8, 3, 3, 3)) * 0.3),
            (rng.standard_normal((6, 8, 5, 5)) * 0.2), (rng.standard_normal((5, 6, 2, 2)) * 0.2)]
    vals = [v.astype("float32") for v in vals]

    def net(lib, x, a, b, c):
        h = lib.max_pool2d(lib.relu(lib.conv2d(x, a, stride=1, padding=1)), 2, ceil_mode=True)
        h = lib.relu(lib.conv2d(h, b, stride=2, padding=2))
        h = lib.conv2d(h, c, dilation=2)
        return (h * h).sum()
    ts = [torch.tensor(v, requires_grad=True) for v in vals]
    net(TF, *ts).backward()
    args = [tracer.tensor(v) for v in vals]
    step = autodiff.value_and_grad(lambda *a: net(F, *a), wrt=args)
    for _ in range(2):
        _, gs = step(*args)
    res = [g.numpy().copy() for g in gs]
    for g, t in zip(res, ts, strict=True):
        np.testing.assert_allclose(g, t.grad.numpy(), rtol=1e-4, atol=1e-4 * np.abs(t.grad.numpy()).max())
    bad = []

    def work():
        for _ in range(4):
            bad.append(not all(np.array_equal(g.numpy(), r) for g, r in zip(step(*args)[1], res, strict=True)))
    threads = [threading.Thread(target=work) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert bad == [False] * 8


# ------------------------------------------------------------------------------------------------ RNNs, nll


def _rnn_case(mode, dtype, scale, special=None, bidirectional=False, batch_first=False, T=4, B=20, H=64, layers=1):
    torch.manual_seed(0)
    tm = getattr(torch.nn, mode)(8, H, num_layers=layers, bidirectional=bidirectional, batch_first=batch_first)
    tm = tm.to(getattr(torch, dtype))
    m = getattr(nn, mode)(8, H, num_layers=layers, bidirectional=bidirectional, batch_first=batch_first, dtype=dtype)
    for name, p in tm.named_parameters():
        getattr(m, name).data = tracer.tensor(p.detach().numpy().copy())
    rng = np.random.default_rng(1)
    x = (rng.uniform(-1, 1, (B, T, 8) if batch_first else (T, B, 8)) * scale).astype(dtype)
    if special is not None:
        x.reshape(-1)[[3, 50, 77]] = special
    tx = torch.tensor(x, requires_grad=True)
    ty = tm(tx)[0]
    w = rng.standard_normal(ty.shape).astype(dtype)
    (ty * torch.tensor(w)).sum().backward()
    xt = tracer.tensor(x)
    whh = m.weight_hh_l0
    step = autodiff.value_and_grad(lambda x: (m(x)[0] * w).sum(), wrt=[xt, whh])
    for _ in range(2):
        _, (gx, gw) = step(xt)
    tol = 2e-6 if dtype == "float32" else 1e-13
    for a, b in ((m(tracer.tensor(x))[0].numpy(), ty.detach().numpy()), (gx.numpy(), tx.grad.numpy()),
                 (gw.numpy(), tm.weight_hh_l0.grad.numpy())):
        assert np.array_equal(np.isnan(a), np.isnan(b)) and np.array_equal(np.isinf(a), np.isinf(b))
        fin = np.isfinite(b)
        np.testing.assert_allclose(a[fin], b[fin], rtol=0, atol=tol * max(1.0, float(np.abs(b[fin]).max(initial=0))))


@pytest.mark.parametrize(("mode", "dtype", "scale", "special"),
                         [("LSTM", d, s, v) for d in ("float32", "float64")
                          for s, v in ((1, None), (100, None), (1, nan), (1, inf), (1, -inf))]
                         + [(m, "float32", s, v) for m in ("GRU", "RNN") for s, v in ((100, None), (1, nan), (1, -inf))])
def test_rnn_saturated_and_non_finite_inputs_as_torch(mode, dtype, scale, special):
    """Gates driven to |x| ~ 100 (where a polynomial exp/tanh could overflow), NaN/inf inputs, float64 models (the
    float32 cell never used): outputs and gradients as torch's (B * 4H = 5120 gates: numba's cell where present)."""
    _rnn_case(mode, dtype, scale, special)


@pytest.mark.parametrize(("kw"), [dict(bidirectional=True, batch_first=True), dict(T=1, B=1), dict(T=1, B=64),
                                  dict(layers=2)], ids=["bidir_batch_first", "t1b1", "t1b64", "two_layers"])
def test_lstm_shapes_at_saturation_as_torch(kw):
    _rnn_case("LSTM", "float32", 50, **kw)


def test_lstm_float32_cell_runs_and_float64_does_not(monkeypatch):
    pytest.importorskip("numba")
    from ir.runtime import numba_rnn
    if not numba_hook.ENABLED:
        pytest.skip("numba's kernels are off")
    real, used = numba_rnn._module, []

    class Counting:
        def __getattr__(self, name):
            used.append(name)
            return getattr(real(), name)
    monkeypatch.setattr(numba_rnn, "_module", Counting)
    _rnn_case("LSTM", "float64", 100)
    assert not used
    _rnn_case("LSTM", "float32", 100)
    assert "cell" in used and "cell_backward" in used


def _nll_case(z, t, reduction, ignore_index):
    zt = torch.tensor(z.astype("float64"), requires_grad=True)
    tl = TF.nll_loss(torch.log_softmax(zt, -1), torch.tensor(t), ignore_index=ignore_index, reduction=reduction)
    (tl if reduction != "none" else tl.sum()).backward()
    x, tt = tracer.tensor(z), tracer.tensor(t)

    def f(x):
        loss = F.nll_loss(F.log_softmax(x, -1), tt, ignore_index=ignore_index, reduction=reduction)
        return loss if reduction != "none" else loss.sum()
    val, (g,) = autodiff.value_and_grad(f, wrt=[x])(x)
    want = float(tl.detach().sum())
    assert np.isnan(float(val)) == np.isnan(want)
    if np.isfinite(want):
        assert abs(float(val) - want) <= 2e-6 * abs(want)
    else:
        assert float(val) == want or np.isnan(want)
    a, b = g.numpy().astype("float64"), zt.grad.numpy()
    assert np.array_equal(np.isnan(a), np.isnan(b))
    fin = np.isfinite(b)
    np.testing.assert_allclose(a[fin], b[fin], rtol=2e-5, atol=1e-6 * np.abs(b[fin]).max(initial=0))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("scale", [1, 100, 1e4])
def test_log_softmax_nll_large_logits_as_torch(scale, reduction):
    rng = np.random.default_rng(0)
    z = (rng.uniform(-1, 1, (700, 100)) * scale).astype("float32")  # above numba_nll's size: its row kernels
    t = rng.integers(0, 100, 700)
    t[::7] = -100
    _nll_case(z, t, reduction, -100)


def test_log_softmax_nll_neg_inf_entries_as_torch():
    rng = np.random.default_rng(0)
    z = rng.standard_normal((700, 100)).astype("float32") * 10
    z[::3, ::5] = -inf
    z[2::3, 7] = 1e4
    t = rng.integers(0, 100, 700)
    t[1::3] = 1
    _nll_case(z, t, "mean", -100)
    t[::3] = 5  # targets at -inf: an infinite loss
    _nll_case(z, t, "sum", 3)
    _nll_case(z, np.full(700, 4), "mean", 4)  # every target ignored: NaN


def test_split_by_fixed_slices_as_torch():
    x0 = np.random.default_rng(0).standard_normal((5, 7, 3)).astype("float32")
    for spec, axis in [(2, 0), ([1, 4], 0), (3, 1), ([2, 2, 3], 1), (1, -1), ([0, 5], 0)]:
        tx = torch.tensor(x0, requires_grad=True)
        tl = sum((p * (i + 1)).sin().sum() for i, p in enumerate(tx.split(spec, axis)))
        tl.backward()
        x = tracer.tensor(x0)
        v, (g,) = autodiff.value_and_grad(
            lambda t, spec=spec, axis=axis: sum((p * (i + 1)).sin().sum() for i, p in enumerate(t.split(spec, axis))),
            wrt=[x])(x)
        assert abs(float(v) - float(tl.detach())) < 1e-4
        np.testing.assert_allclose(g.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------------------------------------ two threads

_THREADS_SCRIPT = textwrap.dedent('''
    import os, sys, threading
    import numpy as np
    import autodiff, tracer
    from nn import functional as F
    rng = np.random.default_rng(0)
    q = tracer.tensor(rng.standard_normal((16, 4, 64, 32)).astype("float32"))
    k = tracer.tensor(rng.standard_normal((16, 4, 64, 32)).astype("float32"))
    w = tracer.tensor(rng.standard_normal((32, 512)).astype("float32") * 0.1)
    x = tracer.tensor(rng.standard_normal((1024, 32)).astype("float32"))
    def f(q, k, w, x):
        a = F.softmax(tracer.matmul(q, tracer.permute_dims(k, [0, 1, 3, 2])) / 8.0, -1)
        v = tracer.matmul(a, k)
        h = F.gelu(tracer.matmul(x, w))
        return (v * v).sum() + (tracer.tanh(h) * h).mean() + F.layer_norm(h, (512,)).sum() * 1e-3
    step = autodiff.value_and_grad(f, wrt=[q, k, w, x])
    def run():
        v, gs = step(q, k, w, x)
        return [np.asarray(v)] + [g.numpy().copy() for g in gs]
    for _ in range(3):
        res = run()
    got, errs = [], []
    def work():
        try:
            for _ in range(4):
                got.append(run())
        except BaseException as e:
            errs.append(repr(e))
    ts = [threading.Thread(target=work) for _ in range(2)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    assert not errs, errs
    assert all(np.array_equal(a, b) for r in got for a, b in zip(r, res))
    pid = os.fork()
    if pid == 0:
        os._exit(0 if all(np.array_equal(a, b) for a, b in zip(run(), res)) else 3)
    assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
    np.savez(sys.argv[1], *res)
''')


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork")
def test_two_threads_give_one_thread_bits(tmp_path):
    """OMP/NUMBA/OPENBLAS_NUM_THREADS=2 (split2's worker, numba's prange forms) against 1: the same bits; two Python
    threads calling the compiled step at once and a forked child get them too."""
    script = tmp_path / "step.py"
    script.write_text(_THREADS_SCRIPT)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = {}
    for n in (1, 2):
        env = {**os.environ, "OMP_NUM_THREADS": str(n), "NUMBA_NUM_THREADS": str(n), "OPENBLAS_NUM_THREADS": str(n),
               "PYTHONPATH": root,  # the tiered start ("numba") switches kernels (last bits) at a time of its own
               "TRACEGRAD_KERNELS": "numpy" if os.environ.get("TRACEGRAD_KERNELS") == "numpy" else "numba-sync"}
        subprocess.run([sys.executable, str(script), str(tmp_path / f"t{n}.npz")], env=env, check=True, cwd=root,
                       timeout=300)
        out[n] = np.load(tmp_path / f"t{n}.npz")
    for key in out[1]:
        np.testing.assert_array_equal(out[1][key], out[2][key])


@pytest.mark.parametrize("grads_as", ["dot_grad", "list"])
@pytest.mark.parametrize("change", ["appended", "reversed", "params_appended", "params_popped", "moved", "replaced"])
def test_param_groups_edited_by_hand_between_steps_keep_each_parameters_state_as_torch(change, grads_as):
    # Adam's state must follow its parameter (by identity) through the edit; the plan made at the steps before
    # must notice it, also an in-place edit of a group's "params" list
    rng = np.random.default_rng(0)
    init = [rng.standard_normal(n).astype(np.float32) for n in (3, 2, 4)]
    ps = [nn.Parameter(a.copy()) for a in init]
    ts = [torch.tensor(a.copy(), requires_grad=True) for a in init]
    opt = optim.Adam([{"params": ps[:2], "lr": 0.1}, {"params": ps[2:], "lr": 0.01}])
    topt = torch.optim.Adam([{"params": ts[:2], "lr": 0.1}, {"params": ts[2:], "lr": 0.01}])
    extra_p, extra_t = nn.Parameter(np.ones(5, np.float32)), torch.ones(5, requires_grad=True)

    def edit(o, xs, extra):
        g0, g1 = o.param_groups
        if change == "appended":
            o.param_groups.append({**{k: v for k, v in g0.items() if k != "params"}, "params": [extra], "lr": 0.5})
        elif change == "reversed":
            o.param_groups.reverse()
        elif change == "params_appended":
            g1["params"].append(extra)
        elif change == "params_popped":
            g0["params"].pop()
        elif change == "moved":  # the boundary moves: the same parameters in the same order, other options
            g1["params"].insert(0, g0["params"].pop())
        else:
            g0["params"][0] = extra

    live = list(ps) + [extra_p]
    tlive = list(ts) + [extra_t]
    for step in range(4):
        if step == 2:
            edit(opt, ps, extra_p)
            edit(topt, ts, extra_t)
        grads = [rng.standard_normal(p.shape).astype(np.float32) for p in live]
        for p, t, g in zip(live, tlive, grads, strict=True):
            p.grad, t.grad = tracer.tensor(g), torch.tensor(g)
        if grads_as == "list":
            order = {id(p): g for p, g in zip(live, grads, strict=True)}
            opt.step([order[id(p)] for grp in opt.param_groups for p in grp["params"]])
        else:
            opt.step()
        topt.step()
        for p, t in zip(live, tlive, strict=True):
            np.testing.assert_allclose(p.numpy(), t.detach().numpy(), rtol=1e-6, atol=1e-7)
