"""Optimizer.step's plan (nn/optim/optimizers.py `_Plan`): the steps after a full check of the gradients and options
check only identities and shapes, and every change between steps the plan could miss takes the full check again.
Each case runs an optimizer with the plan beside one whose every step checks in full (`_planned` switched off): the
same parameters, state, option values and types, step counts, and the same error for the same bad input."""
import numpy as np
import pytest

import autodiff
import nn
import tracer
from nn import optim

SHAPES = [(5, 4), (4,), (4, 3), (3,)]


def _pair(cls, kw, dtype="float32"):
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s).astype(dtype) for s in SHAPES]
    out = []
    for full in (False, True):
        ps = [nn.Parameter(a.copy()) for a in arrays]
        opt = cls(ps, **kw)
        if full:
            opt._planned = lambda grads: None  # every step checks in full: the reference
        out.append((ps, opt))
    return out


def _grads(step, dtype="float32", kind="tensor"):
    rng = np.random.default_rng(100 + step)
    gs = [rng.standard_normal(s).astype(dtype) for s in SHAPES]
    return [tracer.tensor(g) for g in gs] if kind == "tensor" else gs


def _step(pair, grads, **kw):
    """opt.step on both (the same gradients: neither changes them): their outcome, values or the error raised."""
    out = []
    for _, opt in pair:
        try:
            opt.step(grads.copy() if isinstance(grads, list) else grads, **kw)
            out.append(None)
        except Exception as e:  # noqa: BLE001 - compared below
            out.append((type(e), str(e)))
    assert out[0] == out[1]
    _same(pair)
    return out[0]


def _same(pair):
    (pa, oa), (pb, ob) = pair
    for x, y in zip(pa, pb, strict=True):
        assert type(x._data) is type(y._data) and x._data.dtype == y._data.dtype
        np.testing.assert_array_equal(x._data, y._data)
    assert oa.step_count == ob.step_count and oa.skipped == ob.skipped
    for ga, gb in zip(oa.param_groups, ob.param_groups, strict=True):
        assert [(k, type(v), v) for k, v in ga.items() if k != "params"] == \
            [(k, type(v), v) for k, v in gb.items() if k != "params"]
    for sa, sb in zip(oa.state, ob.state, strict=True):
        assert sorted(sa) == sorted(sb)
        for k in sa:
            np.testing.assert_array_equal(np.asarray(sa[k]), np.asarray(sb[k]))


CONFIGS = [(optim.SGD, dict(lr=0.1)), (optim.SGD, dict(lr=0.1, momentum=0.9)), (optim.Adam, dict(lr=0.01)),
           (optim.RMSprop, dict(lr=0.01))]
IDS = ["sgd", "momentum", "adam", "rmsprop"]


def _warm(cls, kw, kind="tensor"):
    pair = _pair(cls, kw)
    for s in range(3):  # the first makes the plan, the next two take it
        assert _step(pair, _grads(s, kind=kind)) is None
    assert pair[0][1]._plan is not None
    return pair


@pytest.mark.parametrize(("cls", "kw"), CONFIGS, ids=IDS)
@pytest.mark.parametrize("kind", ["tensor", "array"])
def test_planned_steps_match_full_checks(cls, kw, kind):
    pair = _warm(cls, kw, kind)
    opt = pair[0][1]
    planned = opt._planned(_grads(9, kind=kind))
    assert planned is not None and len(planned) == len(SHAPES)  # the plan holds: the cheap path runs
    for s in range(3, 6):
        _step(pair, _grads(s, kind=kind))
    g = _grads(6, kind="array")
    g[0] = np.asfortranarray(g[0])  # not C-contiguous: numba's loop takes a copy, NumPy's ufuncs the array
    g[1] = np.repeat(g[1], 2)[::2]  # strided
    if kind == "tensor":
        a, g = g, [tracer.tensor(x) for x in g]
        g[0]._data, g[1]._data = a[0], a[1]  # (as they are)
    assert not g[0].flags.c_contiguous if kind == "array" else not g[0]._data.flags.c_contiguous
    _step(pair, g)
    _step(pair, _grads(7, kind=kind))
    g = _grads(8, kind="array")
    g[2] = g[2].reshape(3, 4)  # as many elements, another shape: the same ValueError
    assert _step(pair, [tracer.tensor(x) for x in g] if kind == "tensor" else g)[0] is ValueError
    assert _step(pair, _grads(9, kind=kind)) is None


@pytest.mark.parametrize("kind", ["tensor", "array"])
def test_plan_holds_for_equal_dtype_objects_of_their_own(kind):
    # numba's whole-function program returns arrays whose dtype objects are new ones (equal, not the same): the
    # plan must hold for them (a plan remade at every step costs more than the full check alone)
    pair = _warm(optim.SGD, dict(lr=0.1), kind)
    g = _grads(3, kind="array")
    g = [x.view(x.dtype.newbyteorder("=")) for x in g]
    assert g[0].dtype is not np.dtype("float32")
    if kind == "tensor":
        a, g = g, [tracer.tensor(x) for x in g]
        for t, x in zip(g, a, strict=True):
            t._data = x
    assert pair[0][1]._planned(g) is not None
    plan = pair[0][1]._plan
    _step(pair, g)
    assert pair[0][1]._plan is plan


@pytest.mark.parametrize(("cls", "kw"), CONFIGS, ids=IDS)
def test_rebound_parameter_array(cls, kw):
    pair = _warm(cls, kw)
    for ps, _ in pair:
        ps[0].data = tracer.tensor(np.full((5, 4), 2.0, "float32"))  # the same shape and dtype: another array
    _step(pair, _grads(4))
    for ps, _ in pair:
        ps[2].data = tracer.tensor(np.ones((4, 3), "float64"))  # another dtype: the gradient converted to it
    _step(pair, _grads(5))
    for ps, _ in pair:
        ps[1].data = tracer.tensor(np.ones(7, "float32"))  # another shape: the gradient's is wrong now
    assert _step(pair, _grads(6))[0] is ValueError


def test_parameter_array_reshaped_in_place():
    pair = _warm(optim.SGD, dict(lr=0.1))
    for ps, _ in pair:
        ps[0]._data.shape = (4, 5)
    assert _step(pair, _grads(3))[0] is ValueError


class _OtherArray(np.ndarray):
    """A parameter array of another type (as if moved to another array module): not NumPy's own ndarray."""


@pytest.mark.parametrize(("cls", "kw"), CONFIGS, ids=IDS)
def test_parameter_moved_to_another_array_type(cls, kw):
    pair = _warm(cls, kw)
    for ps, _ in pair:
        ps[3]._data = ps[3]._data.copy().view(_OtherArray)
    _step(pair, _grads(3))
    _step(pair, _grads(4))


class _Device:
    """A gradient array of another module (CuPy's form: shape, dtype, .get() to NumPy)."""

    def __init__(self, a):
        self.a, self.shape, self.dtype = a, a.shape, a.dtype

    def get(self):
        return self.a.copy()


@pytest.mark.parametrize(("cls", "kw"), CONFIGS, ids=IDS)
def test_gradient_of_another_array_module(cls, kw):
    pair = _warm(cls, kw)
    for _, opt in pair:
        g = _grads(3)
        g[1]._data = _Device(g[1]._data)  # a Tensor on another device: converted to NumPy
        opt.step(g)
    _same(pair)
    _step(pair, _grads(4))


@pytest.mark.parametrize(("cls", "kw"), CONFIGS, ids=IDS)
def test_frozen_and_unfrozen_between_steps(cls, kw):
    pair = _warm(cls, kw)
    for ps, _ in pair:
        ps[1].requires_grad = False
    _step(pair, _grads(3))
    _step(pair, _grads(4))
    assert pair[0][1].skipped == [0, 2, 0, 0]
    for ps, _ in pair:
        ps[1].requires_grad = True
    _step(pair, _grads(5))
    _step(pair, _grads(6))


@pytest.mark.parametrize(("cls", "kw"), CONFIGS, ids=IDS)
def test_none_gradient_and_bad_gradients_after_planned_steps(cls, kw):
    pair = _warm(cls, kw)
    g = _grads(3)
    _step(pair, [g[0], None, g[2], g[3]])
    _step(pair, _grads(4))
    g = _grads(5)
    assert _step(pair, g[:3])[0] is ValueError  # a wrong count
    assert _step(pair, g + g[:1])[0] is ValueError
    assert _step(pair, [g[0], g[1], g[3], g[2]])[0] is ValueError  # a wrong shape
    assert _step(pair, [g[0], g[1], tracer.tensor(g[2].numpy().T.copy().T), g[3]]) is None  # Fortran order
    assert _step(pair, [g[0], g[1], g[2].numpy().T, g[3]])[0] is ValueError
    _step(pair, [tracer.tensor(g[0].numpy().astype("float64"))] + g[1:])  # another dtype: converted
    _step(pair, [g[0].numpy().tolist()] + g[1:])  # a list
    _step(pair, [g[0].numpy()] + g[1:])  # an array among Tensors
    _step(pair, [x.numpy() for x in g])  # arrays after Tensors
    _step(pair, [x.numpy().astype("float64") for x in g])
    _step(pair, g)
    assert _step(pair, g[0])[0] is TypeError  # a Tensor, not a list
    assert _step(pair, np.zeros(3))[0] is TypeError
    assert _step(pair, tuple(g)) is None  # any iterable: checked in full
    assert _step(pair, dict(enumerate(g)))[0] is TypeError  # a dict, but the parameters have no names


def test_dict_gradients_after_planned_steps():
    rng = np.random.default_rng(0)
    pair = []
    for full in (False, True):
        ps = {f"w{i}": nn.Parameter(rng.standard_normal(s).astype("float32")) for i, s in enumerate(SHAPES)}
        rng = np.random.default_rng(0)
        opt = optim.SGD(ps, lr=0.1)
        if full:
            opt._planned = lambda grads: None
        pair.append((list(ps.values()), opt))
    for s in range(3):
        _step(pair, _grads(s))
    g = _grads(3)
    _step(pair, {f"w{i}": x for i, x in enumerate(g)})
    assert _step(pair, {f"w{i}": x for i, x in enumerate(g[:3])})[0] is ValueError
    _step(pair, _grads(4))


@pytest.mark.parametrize("value", [np.float64(0.1), np.float32(0.05), 0.05, np.float64(0.05)])
@pytest.mark.parametrize(("cls", "kw"), CONFIGS, ids=IDS)
def test_numpy_scalar_options_set_between_steps(cls, kw, value):
    # np.float64(0.1) == 0.1, the lr it replaces: a cache comparing values would keep the NumPy scalar
    pair = _warm(cls, kw)
    for _, opt in pair:
        opt.param_groups[0]["lr"] = value
    _step(pair, _grads(3))
    assert type(pair[0][1].param_groups[0]["lr"]) is float
    for _, opt in pair:
        opt.param_groups[0]["weight_decay"] = np.float32(0.0)  # == 0: still made a Python float
    _step(pair, _grads(4))
    assert type(pair[0][1].param_groups[0]["weight_decay"]) is float
    for _, opt in pair:
        opt.param_groups[0]["weight_decay"] = np.float64(0.01)
    _step(pair, _grads(5))


@pytest.mark.parametrize(("cls", "kw"), CONFIGS, ids=IDS)
def test_lambda_lr_with_numpy_exp(cls, kw):
    pair = _warm(cls, kw)
    scheds = [optim.lr_scheduler.LambdaLR(opt, lambda e: np.exp(-0.5 * e)) for _, opt in pair]
    for s in range(3, 7):
        _step(pair, _grads(s))
        for sched in scheds:
            sched.step()
        assert type(pair[0][1].param_groups[0]["lr"]) is np.float64  # read as a float at the next step
    _step(pair, _grads(7))
    assert type(pair[0][1].param_groups[0]["lr"]) is float


@pytest.mark.parametrize(("cls", "kw"), CONFIGS, ids=IDS)
def test_options_set_between_steps(cls, kw):
    pair = _warm(cls, kw)
    for _, opt in pair:
        opt.lr = 0.5  # every group, through the attribute
    _step(pair, _grads(3))
    for _, opt in pair:
        opt.param_groups[0]["maximize"] = True
    _step(pair, _grads(4))
    name = "momentum" if cls is optim.SGD else "eps" if cls is optim.Adam else "alpha"
    for _, opt in pair:
        opt.param_groups[0][name] = {"momentum": 0.5, "eps": 1e-3, "alpha": 0.5}[name]
    _step(pair, _grads(5))
    for _, opt in pair:
        opt.param_groups[0]["extra"] = 1  # another key: checked in full (and ignored, as before)
    _step(pair, _grads(6))
    for _, opt in pair:
        opt.param_groups[0]["lr2"] = opt.param_groups[0].pop("lr")  # the same value under another key: KeyError
    assert _step(pair, _grads(7))[0] is KeyError


@pytest.mark.parametrize(("cls", "option", "value"), [(optim.Adam, "amsgrad", True), (optim.RMSprop, "centered", True),
                                                     (optim.RMSprop, "momentum", 0.9)])
def test_option_that_adds_state_between_steps(cls, option, value):
    # the flat state (nn/optim/flat.py) kept for a plan: an option taking up another state entry makes a new plan
    pair = _warm(cls, dict(lr=0.01))
    for _, opt in pair:
        opt.param_groups[0][option] = value
    _step(pair, _grads(3))
    _step(pair, _grads(4))
    assert len(pair[0][1].state[0]) == len(pair[1][1].state[0]) > 1 + (cls is optim.Adam)


@pytest.mark.parametrize(("cls", "kw"), CONFIGS, ids=IDS)
def test_last_option_renamed(cls, kw):
    # the same values in the same order under other keys: plain SGD's choice, made once per plan, reads "maximize"
    pair = _warm(cls, kw)
    for _, opt in pair:
        group = opt.param_groups[0]
        group["renamed"] = group.pop(list(group)[-1])
    out = _step(pair, _grads(3))  # (the same outcome: Adam reads decoupled_weight_decay only with a decay)
    assert cls is not optim.SGD or out[0] is KeyError


def test_option_mutated_in_place_is_never_trusted():
    # an option holding a mutable value (a 0-d array of momentum) may change without a new object: no plan is made
    pair = _pair(optim.SGD, dict(lr=0.1))
    for _, opt in pair:
        opt.param_groups[0]["momentum"] = np.array(0.0)
    for s in range(3):
        _step(pair, _grads(s))
    assert pair[0][1]._plan is None
    for _, opt in pair:
        opt.param_groups[0]["momentum"][...] = 0.9
    _step(pair, _grads(3))
    _step(pair, _grads(4))
    assert "momentum_buffer" in pair[0][1].state[0]


@pytest.mark.parametrize(("cls", "kw"), CONFIGS, ids=IDS)
def test_add_param_group_and_load_state_dict_between_steps(cls, kw):
    pair = _warm(cls, kw)
    extra = np.random.default_rng(7).standard_normal((2, 3)).astype("float32")
    for _, opt in pair:
        opt.add_param_group({"params": [nn.Parameter(extra.copy())], "lr": 0.2})
    more = np.random.default_rng(8).standard_normal((2, 3)).astype("float32")
    for s in range(3, 6):
        outs = []
        for _, opt in pair:
            opt.step(_grads(s) + [more * s])
            outs.append(opt.params[-1]._data.copy())
        np.testing.assert_array_equal(*outs)
        _same(pair)
    saved = pair[1][1].state_dict()
    saved["param_groups"][0]["lr"] = 0.03
    for _, opt in pair:
        opt.load_state_dict(saved)
    for s in range(6, 8):
        for _, opt in pair:
            opt.step(_grads(s) + [more])
        _same(pair)
    assert pair[0][1].param_groups[0]["lr"] == 0.03


@pytest.mark.parametrize(("cls", "kw"), CONFIGS, ids=IDS)
def test_closure_and_dot_grad_steps(cls, kw):
    pair = _warm(cls, kw)
    for s in range(3, 5):
        for ps, _ in pair:
            for p, g in zip(ps, _grads(s), strict=True):
                p.grad = tracer.tensor(g.numpy().copy())
        _step(pair, None)
    losses = []
    for ps, opt in pair:
        def closure(ps=ps, opt=opt):
            opt.zero_grad()
            loss = sum((p * p).sum() for p in ps)
            loss.backward()
            return loss
        losses.append(float(opt.step(closure).numpy()))
    assert losses[0] == losses[1]
    _same(pair)


@pytest.mark.parametrize(("cls", "kw"), CONFIGS, ids=IDS)
def test_anomaly_mode_switched_on_between_steps(cls, kw):
    pair = _warm(cls, kw)
    g = _grads(3)
    g[2] = tracer.tensor(np.full((4, 3), np.nan, "float32"))
    with autodiff.detect_anomaly():
        out = _step(pair, g)
    assert out is not None and "the gradient of parameter 2" in out[1]  # before the update: nothing changed
    _step(pair, _grads(4))


def test_value_and_grad_loop():
    """The tiny-MLP form of the benchmarks: value_and_grad's Tensors into SGD, plan kept across steps."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((8, 5)).astype("float32")
    outs = []
    for full in (False, True):
        ws = [nn.Parameter(rng_w) for rng_w in (np.ones((5, 4), "float32") * 0.1, np.zeros(4, "float32"))]
        vg = autodiff.value_and_grad(lambda x, ws=ws: tracer.relu(x @ ws[0] + ws[1]).sum(), wrt=ws)
        opt = optim.SGD(ws, lr=0.1)
        if full:
            opt._planned = lambda grads: None
        for _ in range(4):
            opt.step(vg(x)[1])
        outs.append([w.numpy().copy() for w in ws])
        if not full:
            assert opt._plan is not None
    for a, b in zip(*outs, strict=True):
        np.testing.assert_array_equal(a, b)


def test_copied_optimizer_checks_in_full():
    import copy
    import pickle
    pair = _warm(optim.SGD, dict(lr=0.1))
    opt = pair[0][1]
    for twin in (copy.deepcopy(opt), pickle.loads(pickle.dumps(opt))):
        assert twin._plan is None
        before = [p._data.copy() for p in twin.params]
        twin.step(_grads(3))
        for p, b, g in zip(twin.params, before, _grads(3), strict=True):
            np.testing.assert_array_equal(p._data, b - np.multiply(g.numpy(), 0.1))
        assert twin._plan is not None and twin._plan.datas[0] is twin.params[0]._data
