"""Adam/AdamW, Adadelta, RMSprop and Adagrad as one numba call per step over flat state (nn/optim/flat.py,
ir/runtime/numba_adam.py): the same bits as the per-parameter NumPy update (parameters and every state
entry, NaN/inf/-0.0, float32 and float64, several groups, missing gradients, weight decay, maximize), state
dicts that round-trip, replaced state entries followed, and the NumPy update wherever the loop does not apply."""
import copy
import pickle

import numpy as np
import pytest

import nn
import tracer
from ir.runtime import numba_adam, numba_hook
from nn import optim

pytest.importorskip("numba")

SHAPES = [(64, 64), (64,), (3, 4, 5), (10,), (1,), (7, 3), (0,), (33,), (5, 5), (2, 9)]  # 10: two calls of 8

CONFIGS = [
    (optim.Adam, {}),
    (optim.Adam, {"amsgrad": True, "weight_decay": 0.1}),
    (optim.Adam, {"maximize": True, "eps": 1e-3}),
    (optim.Adam, {"decoupled_weight_decay": True, "weight_decay": 0.05, "amsgrad": True, "maximize": True}),
    (optim.AdamW, {"lr": 0.01}),
    (optim.Adadelta, {}),
    (optim.Adadelta, {"weight_decay": 0.1, "maximize": True, "rho": 0.5}),
    (optim.RMSprop, {}),
    (optim.RMSprop, {"centered": True, "momentum": 0.9, "weight_decay": 0.01}),
    (optim.RMSprop, {"momentum": 0.5, "maximize": True}),
    (optim.Adagrad, {}),
    (optim.Adagrad, {"lr_decay": 0.1, "initial_accumulator_value": 0.5, "weight_decay": 0.2, "maximize": True}),
]
IDS = [f"{c.__name__}-{'-'.join(map(str, kw.values())) or 'default'}" for c, kw in CONFIGS]


def _loaded():
    numba_hook.ready()
    if not numba_hook.wait(120):
        pytest.skip("numba kernels switched off (TRACEGRAD_KERNELS=numpy) or not loadable")


def _arrays(dtype, seed, specials=True):
    rng = np.random.default_rng(seed)
    ps = [rng.standard_normal(s).astype(dtype) for s in SHAPES]
    if specials:
        ps[0][0, :4] = [np.inf, -0.0, 0.0, np.nan]
        ps[1][:2] = [-np.inf, -0.0]
    return ps


def _grads(dtype, step, specials=True):
    gs = [a * 0.5 for a in _arrays(dtype, 100 + step, specials=False)]
    if specials:
        gs[0][0, :6] = [np.nan, np.inf, -0.0, 0.0, np.nan, -np.inf]
        gs[0][1, :3] = [0.0, -0.0, np.inf]
        gs[2][0, 0, :2] = [-0.0, 1e-30]
    if step % 3 == 1:
        gs[3] = None  # a parameter without a gradient at this step
    return gs


def _pair(cls, kw, dtype, groups=True, seed=0):
    """Two optimizers over equal parameters: the fused one and one kept on the NumPy update."""
    made = []
    for _ in range(2):
        params = [nn.Parameter(p) for p in _arrays(dtype, seed)]
        spec = [{"params": params[:4]}, {"params": params[4:], "lr": 0.03}] if groups else params
        made.append((params, cls(spec, **kw)))
    made[1][1]._flat_kind = None  # the NumPy reference (Adagrad's constructor made its flat state: dropped)
    made[1][1]._flat_state = None
    return made


def _bits(a):
    a = np.ascontiguousarray(a)
    return a.view(np.uint8)


def _same(pa, oa, pb, ob):
    for x, y in zip(pa, pb, strict=True):
        np.testing.assert_array_equal(_bits(x._data), _bits(y._data))
    assert [sorted(s) for s in oa.state] == [sorted(s) for s in ob.state]
    for sa, sb in zip(oa.state, ob.state, strict=True):
        for k in sa:
            np.testing.assert_array_equal(_bits(sa[k]), _bits(sb[k]), err_msg=k)


def _count_runs(monkeypatch):
    calls = []
    real = numba_adam.run

    def run(*a):
        calls.append(a[0])
        return real(*a)
    monkeypatch.setattr(numba_adam, "run", run)
    return calls


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("cls,kw", CONFIGS, ids=IDS)
def test_fused_update_has_numpy_s_bits(cls, kw, dtype, monkeypatch):
    _loaded()
    calls = _count_runs(monkeypatch)
    (pa, oa), (pb, ob) = _pair(cls, kw, dtype)
    with np.errstate(all="ignore"):
        for step in range(5):
            gs = _grads(dtype, step)
            oa.step(gs)
            ob.step(gs)
            _same(pa, oa, pb, ob)
    assert len(calls) == 5 and oa._flat_state is not None and ob._flat_state is None
    base = oa._flat_state.parts[0].bufs[0]
    assert all(np.shares_memory(s[oa._flat_order[0]], base) for s in oa.state
               if s and s[oa._flat_order[0]].size)  # views of one buffer


@pytest.mark.parametrize("cls,kw", CONFIGS[::2], ids=IDS[::2])
@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_state_dict_round_trip_and_replaced_entries(cls, kw):
    _loaded()
    (pa, oa), (pb, ob) = _pair(cls, kw, "float32", groups=False)
    for step in range(3):
        gs = _grads("float32", step, specials=False)
        oa.step(gs)
        ob.step(gs)
    sd = oa.state_dict()
    (pc, oc), _ = _pair(cls, kw, "float32", groups=False)
    for p, q in zip(pc, pa, strict=True):
        p._data[...] = q._data
    oc.load_state_dict(sd)  # a fresh fused optimizer from the checkpoint
    name = oa._flat_order[0]
    new = np.full(SHAPES[0], 0.25, "float32")
    for o in (oa, ob, oc):  # the user replaces a state array: the next step must use it
        o.state[0][name] = new.copy()
    for step in range(3, 6):
        gs = _grads("float32", step, specials=False)
        for o in (oa, ob, oc):
            o.step(gs)
        _same(pa, oa, pb, ob)
        _same(pc, oc, pb, ob)
    sd2 = oc.state_dict()
    assert not np.shares_memory(sd2["state"][0][name], oc.state[0][name])  # state_dict copies
    oc.load_state_dict(sd)
    np.testing.assert_array_equal(oc.state[0][name], sd["state"][0][name])


def test_mixed_dtypes_mixed_amsgrad_and_replaced_parameters():
    _loaded()
    made = []
    for _ in range(2):
        ps = [nn.Parameter(a) for a in _arrays("float32", 1, specials=False)]
        ps[5] = nn.Parameter(ps[5]._data.astype("float64"))
        made.append((ps, optim.Adam([{"params": ps[:5], "amsgrad": True}, {"params": ps[5:]}], lr=0.01)))
    (pa, oa), (pb, ob) = made
    ob._flat_kind = None

    def grads(step):
        return [None if g is None else g.astype(p.dtype) for g, p in zip(_grads("float32", step, False), pa,
                                                                             strict=True)]
    for step in range(6):
        if step == 3:  # the parameters' arrays replaced (model.load_state_dict assigning new ones): the layout follows
            for p, q in zip(pa, pb, strict=True):
                p._data = p._data.copy()
                q._data = q._data.copy()
        gs = grads(step)
        oa.step(gs)
        ob.step(gs)
        _same(pa, oa, pb, ob)
    assert len(oa._flat_state.parts) == 2
    assert "max_exp_avg_sq" in oa.state[0] and "max_exp_avg_sq" not in oa.state[6]


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_fallbacks_keep_numpy_s_values(monkeypatch):
    _loaded()
    (pa, oa), (pb, ob) = _pair(optim.Adadelta, {"weight_decay": 0.01}, "float32")
    calls = _count_runs(monkeypatch)
    gs = _grads("float32", 0, specials=False)
    monkeypatch.setattr(numba_hook, "ready", lambda: False)  # the tiered start still loading
    oa.step(gs)
    ob.step(gs)
    _same(pa, oa, pb, ob)
    assert not calls and oa._flat_state is not None  # NumPy's update ran, on the views
    monkeypatch.undo()
    calls = _count_runs(monkeypatch)
    gs = _grads("float32", 2, specials=False)
    gs[0] = np.asfortranarray(gs[0])  # a gradient not C-contiguous: NumPy's update
    oa.step(gs)
    ob.step(gs)
    _same(pa, oa, pb, ob)
    assert not calls
    oa.step(_grads("float32", 3))
    ob.step(_grads("float32", 3))
    _same(pa, oa, pb, ob)
    assert calls


def test_off_without_numba_and_for_float16(monkeypatch):
    monkeypatch.setattr(numba_hook, "ENABLED", False)  # TRACEGRAD_KERNELS=numpy / numba absent
    p = nn.Parameter(np.ones(4, "float32"))
    opt = optim.Adam([p])
    opt.step([np.ones(4, "float32")])
    assert opt._flat_state is None and opt.state[0]["exp_avg"].base is None
    monkeypatch.setattr(numba_hook, "ENABLED", True)  # and with numba's kernels on (also under TRACEGRAD_KERNELS=numpy)
    h = nn.Parameter(np.ones(4, "float16"))
    opt = optim.RMSprop([h])
    opt.step([np.ones(4, "float16")])
    assert not opt._flat_state.ok and opt.state[0]["square_avg"].dtype == np.float16


def test_a_state_entry_it_cannot_take_goes_to_numpy(monkeypatch):
    _loaded()
    (pa, oa), (pb, ob) = _pair(optim.Adam, {}, "float32", groups=False)
    gs = _grads("float32", 0, specials=False)
    oa.step(gs)
    ob.step(gs)
    for o in (oa, ob):  # a float64 state entry for a float32 parameter: NumPy's update keeps it float64
        o.state[1]["exp_avg"] = o.state[1]["exp_avg"].astype("float64")
    calls = _count_runs(monkeypatch)
    gs = _grads("float32", 2, specials=False)
    oa.step(gs)
    ob.step(gs)
    _same(pa, oa, pb, ob)
    assert not calls and oa.state[1]["exp_avg"].dtype == np.float64


def test_tensor_gradients_and_dot_grad():
    _loaded()
    (pa, oa), (pb, ob) = _pair(optim.AdamW, {}, "float32", groups=False)
    gs = _grads("float32", 0, specials=False)
    for p, g in zip(pa, gs, strict=True):
        p.grad = None if g is None else tracer.tensor(g)
    oa.step()
    ob.step(gs)
    _same(pa, oa, pb, ob)


@pytest.mark.parametrize("kind", list(numba_adam.ROWS))
def test_background_loaders_run(kind):
    """What the tiered start runs for each kernel (numba_hook.prepare swallows a loader's error)."""
    _loaded()
    for dtype in numba_adam.DTYPES:
        numba_adam._load(kind, dtype)


def _made(k, seed, make):
    """k lists of SHAPES' parameters (equal values), each with its optimizer make(params)."""
    made = []
    for _ in range(k):
        ps = [nn.Parameter(a) for a in _arrays("float32", seed, specials=False)]
        made.append((ps, make(ps)))
    return made


def test_add_param_group_after_steps():
    _loaded()
    (pa, oa), (pb, ob) = _made(2, 2, lambda ps: optim.RMSprop(ps[:5], lr=0.01, momentum=0.5))
    ob._flat_kind = None
    for step in range(4):
        if step == 2:
            oa.add_param_group({"params": pa[5:], "centered": True})
            ob.add_param_group({"params": pb[5:], "centered": True})
        n = len(oa.params)
        gs = [None if g is None else g for g in _grads("float32", step, specials=False)][:n]
        oa.step(gs)
        ob.step(gs)
        _same(pa, oa, pb, ob)
    assert "grad_avg" in oa.state[6] and "grad_avg" not in oa.state[0]


@pytest.mark.parametrize("kw", [{}, {"momentum": 0.9}, {"momentum": 0.9, "nesterov": True, "weight_decay": 0.1},
                                {"weight_decay": 0.1}])
def test_sgd_loop_with_maximize_has_numpy_s_bits(kw, monkeypatch):
    """numba_optim.sgd (one loop per parameter of at least MIN_SIZE elements) with maximize: NaN signs too."""
    _loaded()
    from ir.runtime import numba_optim
    rng = np.random.default_rng(3)
    n = numba_optim.MIN_SIZE
    p = rng.standard_normal(n).astype("float32")
    p[:4] = [np.inf, np.nan, -np.inf, 0.0]
    made = [nn.Parameter(p.copy()), nn.Parameter(p.copy())]
    opts = [optim.SGD([q], lr=0.1, maximize=True, **kw) for q in made]
    real = numba_optim.sgd
    with np.errstate(all="ignore"):
        for _ in range(3):
            g = rng.standard_normal(n).astype("float32")
            g[:4] = [np.nan, -np.nan, np.inf, -0.0]
            for k, o in enumerate(opts):
                monkeypatch.setattr(numba_optim, "sgd", real if k == 0 else lambda *a: False)
                o.step([g])
            np.testing.assert_array_equal(made[0]._data.view(np.uint32), made[1]._data.view(np.uint32))


@pytest.mark.parametrize("how", ["deepcopy", "pickle"])
def test_a_copied_optimizer_updates_its_own_parameters(how):
    _loaded()
    (pa, oa), _ = _pair(optim.Adam, {"amsgrad": True}, "float32", groups=False)
    oa.step(_grads("float32", 0, specials=False))
    ob = copy.deepcopy(oa) if how == "deepcopy" else pickle.loads(pickle.dumps(oa))
    for o in (oa, ob):
        o.step(_grads("float32", 2, specials=False))
    _same(oa.params, oa, ob.params, ob)
    assert ob._flat_state.datas[0] is ob.params[0]._data


@pytest.mark.parametrize("how", ["deepcopy", "pickle"])
def test_a_copied_plain_sgd_makes_its_own_views(how):
    _loaded()
    ps = [nn.Parameter(a) for a in _arrays("float32", 4, specials=False)]
    opt = optim.SGD(ps, lr=0.1)
    gs = [g for g in _grads("float32", 0, specials=False)]
    opt.step(gs)
    assert opt._flat is not None
    twin = copy.deepcopy(opt) if how == "deepcopy" else pickle.loads(pickle.dumps(opt))
    assert twin._flat is None and twin._flat_key is None
    before = [p._data.copy() for p in twin.params]
    twin.step(gs)
    for p, b, g in zip(twin.params, before, gs, strict=True):
        np.testing.assert_array_equal(p._data, b - np.multiply(g, 0.1))


def _held(opt):
    """Every state entry, as a user holding opt.state[i][name] would keep it."""
    return [dict(s) for s in opt.state]


def _still_held(opt, held):
    for i, entries in enumerate(held):
        for name, v in entries.items():
            assert opt.state[i][name] is v, (i, name)


def _rebind(ps, make):
    """p.data = a new array (from `make(old)`) for parameter i of each list."""
    for p in ps:
        p.data = tracer.tensor(make(p.numpy()))


def _like(ps, k):
    rng = np.random.default_rng(200 + k)
    return [rng.standard_normal(p.shape).astype(p.dtype) for p in ps]


@pytest.mark.parametrize("cls,kw", CONFIGS, ids=IDS)
def test_held_entries_stay_the_state_across_add_param_group_twice_and_a_rebind(cls, kw, monkeypatch):
    _loaded()
    calls = _count_runs(monkeypatch)
    made = []
    for _ in range(2):
        ps = [nn.Parameter(a) for a in _arrays("float32", 5, specials=False)]
        ps[2] = nn.Parameter(ps[2]._data.astype("float64"))
        made.append((ps, cls(ps[:4], **kw)))
    (pa, oa), (pb, ob) = made
    ob._flat_kind = None
    held = []
    with np.errstate(all="ignore"):
        for step in range(7):
            if step in (2, 4):
                for ps, o in made:
                    o.add_param_group({"params": ps[4:7], "lr": 0.02} if step == 2 else
                                      {"params": ps[7:], "weight_decay": 0.1})
            if step == 5:  # p.data = an array of the same shape and dtype: only the part's view of it is new
                _rebind([pa[0], pb[0]], np.copy)
            gs = [None if g is None else g.astype(p.dtype) for g, p in zip(_grads("float32", step, False), pa,
                                                                            strict=True)][:len(oa.params)]
            before = len(calls)
            oa.step(gs)
            ob.step(gs)
            assert len(calls) > before  # numba's loop ran
            _same(pa, oa, pb, ob)
            _still_held(oa, held)
            held = _held(oa)
    assert len(oa._flat_state.parts) == 3  # float32 and float64 from the start; the groups added in one with room
    assert oa._flat_state.datas[0] is pa[0]._data


def test_p_data_of_another_shape_dtype_or_layout_leaves_the_others_held(monkeypatch):
    _loaded()
    (pa, oa), (pb, ob) = _made(2, 6, lambda ps: optim.Adam(ps, lr=0.01, amsgrad=True))
    ob._flat_kind = None
    calls = _count_runs(monkeypatch)
    step = iter(range(100))

    def both(numba=True):
        gs = _like(pa, next(step))
        before = len(calls)
        oa.step(gs)
        ob.step(gs)
        assert (len(calls) > before) == numba
        _same(pa, oa, pb, ob)

    both()
    both()
    held, buf = _held(oa), oa._flat_state.parts[0].bufs[0]
    _rebind([pa[0], pb[0]], np.asfortranarray)  # not C-contiguous: NumPy's update, on the same views
    both(numba=False)
    _still_held(oa, held)
    _rebind([pa[0], pb[0]], np.ascontiguousarray)
    both()
    _still_held(oa, held)
    assert oa._flat_state.parts[0].bufs[0] is buf and len(oa._flat_state.parts) == 1
    _rebind([pa[2], pb[2]], lambda a: a.reshape(5, 4, 3).copy())  # another shape: the old entries do not fit
    for o in (oa, ob):
        with pytest.raises(ValueError):
            o.step(_like(pa, 50))
    _rebind([pa[3], pb[3]], lambda a: a.astype("float64"))  # another dtype: NumPy's update follows its entries
    for o in (oa, ob):
        o.state[2] = {}
    both(numba=False)
    assert oa.state[3]["exp_avg"].dtype == np.float32
    for o in (oa, ob):
        o.state[3] = {}
    both()
    both()
    held[2] = held[3] = {}
    _still_held(oa, held)
    parts = oa._flat_state.parts
    assert len(parts) == 3 and parts[0].bufs[0] is buf and parts[0].rows == [0, 1, 4, 5, 6, 7, 8, 9]
    assert np.shares_memory(oa.state[2]["exp_avg"], parts[1].bufs[0]) and parts[2].dtype == np.float64


def test_a_part_s_room_is_taken_after_what_it_gave_out():
    _loaded()
    ps = [nn.Parameter(np.ones(s, "float32")) for s in [(4,), (3, 5), (6,)]]
    opt = optim.Adam(ps[:1], lr=0.1)
    opt.step(_like(ps[:1], 0))
    opt.add_param_group({"params": ps[1:]})  # a part with room to spare
    opt.step(_like(ps, 1))
    left = opt.state[2]["exp_avg"]  # the part's last parameter, which gets another shape
    before = left.copy()
    ps[2].data = tracer.tensor(np.ones(7, "float32"))
    opt.state[2] = {}
    opt.step(_like(ps, 2))
    parts = opt._flat_state.parts
    assert len(parts) == 2 and parts[1].rows == [1, 2] and np.shares_memory(opt.state[2]["exp_avg"], parts[1].bufs[0])
    assert not np.shares_memory(opt.state[2]["exp_avg"], left) and np.array_equal(left, before)


def test_amsgrad_switched_on_and_off_keeps_the_held_entries(monkeypatch):
    _loaded()
    (pa, oa), (pb, ob) = _pair(optim.Adam, {"weight_decay": 0.1}, "float32")
    calls = _count_runs(monkeypatch)
    held = []
    with np.errstate(all="ignore"):
        for step in range(8):
            if step in (2, 4, 6):  # group 1's amsgrad on, off, on again (its max_exp_avg_sq kept meanwhile)
                for o in (oa, ob):
                    o.param_groups[1]["amsgrad"] = step != 4
            gs = _grads("float32", step)
            oa.step(gs)
            ob.step(gs)
            _same(pa, oa, pb, ob)
            _still_held(oa, held)
            held = _held(oa)
    assert len(calls) == 8 and "max_exp_avg_sq" in oa.state[4] and "max_exp_avg_sq" not in oa.state[0]


def test_state_dict_round_trip_after_a_relayout():
    _loaded()
    made = _made(3, 7, lambda ps: optim.RMSprop(ps[:5], lr=0.01, momentum=0.5))
    (pa, oa), (pb, ob), (pc, oc) = made
    ob._flat_kind = None
    for step in range(5):
        if step == 2:
            for ps, o in made[:2]:
                o.add_param_group({"params": ps[5:], "centered": True})
        gs = _grads("float32", step, specials=False)[:len(oa.params)]
        oa.step(gs)
        ob.step(gs)
        if step == 2:
            held, sd, snap = _held(oa), oa.state_dict(), [p.numpy().copy() for p in pa]
    oc.add_param_group({"params": pc[5:], "centered": True})
    for ps, o in made:
        for p, s in zip(ps, snap, strict=True):
            p._data[...] = s
        o.load_state_dict(sd)  # the state at step 3 again (each a copy)
    _rebind([pa[0], pb[0], pc[0]], np.copy)  # and a re-layout at the same step
    for step in range(5, 8):
        gs = _grads("float32", step, specials=False)
        for o in (oa, ob, oc):
            o.step(gs)
        _same(pa, oa, pb, ob)
        _same(pc, oc, pb, ob)
        _still_held(oa, held)  # the loaded values copied into the held views, which are the entries again


@pytest.mark.parametrize("cls,kw", CONFIGS[::3], ids=IDS[::3])
def test_the_tiered_start_s_numpy_steps_make_the_views_a_held_entry_stays(cls, kw, monkeypatch):
    _loaded()
    (pa, oa), (pb, ob) = _pair(cls, kw, "float32")
    monkeypatch.setattr(numba_hook, "ready", lambda: False)  # numba still loading: NumPy's update
    calls = _count_runs(monkeypatch)
    with np.errstate(all="ignore"):
        for step in range(2):
            oa.step(_grads("float32", step))
            ob.step(_grads("float32", step))
            _same(pa, oa, pb, ob)
        assert not calls
        held, bufs = _held(oa), oa._flat_state.parts[0].bufs
        assert all(any(np.shares_memory(v, b) for b in bufs) for s in held for v in s.values() if v.size)
        monkeypatch.undo()
        calls = _count_runs(monkeypatch)
        for step in range(2, 4):
            oa.step(_grads("float32", step))
            ob.step(_grads("float32", step))
            _same(pa, oa, pb, ob)
            _still_held(oa, held)
    assert len(calls) == 2


@pytest.mark.parametrize("cls,kw", CONFIGS, ids=IDS)
def test_entries_held_after_load_state_dict_or_from_the_constructor_stay_live(cls, kw, monkeypatch):
    """A reference taken right after load_state_dict (or to Adagrad's constructor-made "sum", or after
    add_param_group) is the entry the fused steps update, as with torch; values as the NumPy update's."""
    _loaded()
    calls = _count_runs(monkeypatch)
    (pa, oa), (pb, ob) = _pair(cls, kw, "float32")
    for k in range(2):
        grads = _grads("float32", k)
        oa.step(grads)
        ob.step(grads)
    (qa, fresh_a), (qb, fresh_b) = _pair(cls, kw, "float32")
    for q, p in zip(qa + qb, pa + pb, strict=True):
        q._data[...] = p._data
    fresh_a.load_state_dict(oa.state_dict())
    fresh_b.load_state_dict(ob.state_dict())
    held = _held(fresh_a)
    extra = [nn.Parameter(np.full((3, 2), 0.5, "float32")), nn.Parameter(np.full(5, -1.0, "float32"))]
    fresh_a.add_param_group({"params": [extra[0]]})
    fresh_b.add_param_group({"params": [nn.Parameter(extra[0].numpy().copy())]})
    held_extra = _held(fresh_a)[-1]  # Adagrad's "sum" exists from add_param_group on
    before = len(calls)
    for k in range(2, 4):
        grads = _grads("float32", k) + [np.full((3, 2), 0.25, "float32")]
        fresh_a.step(grads)
        fresh_b.step(grads)
    assert len(calls) > before  # the fused loop ran
    _still_held(fresh_a, held)
    for name, v in held_extra.items():
        assert fresh_a.state[-1][name] is v, name
    _same(qa + [extra[0]], fresh_a, qb + [fresh_b.params[-1]], fresh_b)
    ada = optim.Adagrad([extra[1]], lr=0.1, initial_accumulator_value=0.5)
    total = ada.state[0]["sum"]
    ada.step([np.ones(5, "float32")])
    assert ada.state[0]["sum"] is total and total[0] == 1.5
