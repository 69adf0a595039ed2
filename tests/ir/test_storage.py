"""ir.runtime.storage: large intermediates of a generated step run in arrays kept between calls. Values equal the
allocating path on every gradient case of the op table and on a GPT step (planned down to one byte), returned
arrays are never planned storage nor views of it (a later call does not change them), and arrays whose values
live at the same time never overlap in the arena."""
import sys
from pathlib import Path

import numpy as np
import pytest

import autodiff
import ir
import tracer
from ir.runtime import storage
from nn import functional as F
from tests.autodiff.test_vjp_cases import CASES as GRAD_CASES
from tests.autodiff.test_vjp_cases import scalarized
from tests.ir.adjoints import adjoint


def _flat(out):
    if isinstance(out, tuple | list):
        return [a for o in out for a in _flat(o)]
    return [np.asarray(out)]


def _executor(mod, plan: bool):
    ex = ir.Executor(mod)
    ex.plan_storage = plan
    return ex


@pytest.fixture
def plan_everything(monkeypatch):
    monkeypatch.setattr(storage, "MIN_BYTES", 1)


@pytest.mark.parametrize("case", GRAD_CASES, ids=[c.name for c in GRAD_CASES])
def test_planned_storage_gives_the_same_values_and_never_returns_itself(case, plan_everything):
    inputs = [a.astype("float32") if a.dtype.kind == "f" else a for a in case.inputs]
    mod = ir.transform.optimize()(adjoint(scalarized(case, inputs), *inputs))
    want = _flat(_executor(mod, False)["main_adjoint"](*inputs))
    fn = _executor(mod, True)["main_adjoint"]
    fn(*inputs)  # the interpreted first call; the generated function runs from the second
    first = _flat(fn(*inputs))
    kept = [a.copy() for a in first]
    again = _flat(fn(*[a * 2 if a.dtype.kind == "f" else a for a in inputs]))
    for got, w, k in zip(first, want, kept, strict=True):
        assert got.tobytes() == w.tobytes()
        assert got.tobytes() == k.tobytes()  # the third call wrote nothing into what the second returned
    planned = {id(b) for bufs in fn._fast[1].__globals__.get("pool", []) for b in bufs}
    assert bool(planned) == bool(fn.storage)  # the set the calls used is back in the pool
    assert not any(id(a) in planned or id(a.base) in planned for a in first + again)


def _block(x, w1, w2):
    h = tracer.gelu(x @ w1, approximate="tanh")
    return (tracer.tanh(h @ w2) * h.reshape(h.shape)).sum()


def test_a_transformer_like_step_plans_its_large_intermediates_and_agrees():
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s).astype("float32") for s in [(256, 64), (64, 256), (256, 256)]]
    mod = ir.transform.optimize()(adjoint(_block, *args))
    on, off = _executor(mod, True)["main_adjoint"], _executor(mod, False)["main_adjoint"]
    for _ in range(3):
        a, b = _flat(on(*args)), _flat(off(*args))
        for x, y in zip(a, b, strict=True):
            assert x.tobytes() == y.tobytes()
    assert on.storage and on.storage_bytes > 0
    assert "out=b" in on.source


def test_a_value_viewed_by_a_returned_value_is_never_planned():
    x = np.ones((256, 256), "float32")
    mod = tracer.trace(lambda x: ((tracer.exp(x) * 2).reshape(256 * 256), (tracer.exp(x) + 1).T.sum()), x)
    fn = ir.Executor(mod)["main"]
    fn(x)
    flat, total = fn(x)
    kept = flat.copy()
    fn(x * 3)
    assert flat.tobytes() == kept.tobytes()
    returned_view_of = {fn.instrs[i][2][0] for i, op in enumerate(fn.instr_ops) if op == "reshape"}
    assert not any(fn.instrs[i][4] in returned_view_of for i in fn.storage)
    assert fn.storage  # exp(x) + 1 is planned: its transpose dies inside the call


def _planned_arrays(fn):
    return [b for bufs in fn._fast[1].__globals__.get("pool", []) for b in bufs]


def test_a_gpt_step_plans_its_large_values_and_equals_the_allocating_step(plan_everything, monkeypatch):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
    from train_gpt import GPT

    def build():
        model = GPT(16, 8, 16, 2, 2)
        for block in model.blocks:
            block.mlp[1].approximate = "tanh"
        return model

    rng = np.random.default_rng(0)
    ids = rng.integers(0, 16, (3, 9))
    x, y = tracer.tensor(ids[:, :-1]), tracer.tensor(ids[:, 1:])
    steps = {}
    for planned in (False, True):
        monkeypatch.setattr(ir.Executor, "plan_storage", planned)
        model = build()
        vg = autodiff.value_and_grad(lambda x, y, m=model: F.cross_entropy(m(x).reshape(-1, 16), y.reshape(-1)),
                                     wrt=list(model.parameters()))
        steps[planned] = (model, vg)
    ref_model, ref = steps[False]
    model, vg = steps[True]
    for p, q in zip(model.parameters(), ref_model.parameters(), strict=True):
        p.data[...] = q.data  # the same weights in both
    results = []
    for _ in range(3):
        want, got = _flat(ref(x, y)), _flat(vg(x, y))
        results.append((got, [g.copy() for g in got]))
        for g, w in zip(got, want, strict=True):
            assert g.tobytes() == w.tobytes()
    step = vg.last.step
    assert step.storage and step.scratch  # results and kernels' temporaries in planned arrays
    arenas = {id(b.base if b.base is not None else b): b.base for b in _planned_arrays(step)}
    for got, kept in results:  # later calls never wrote into what an earlier one returned
        for g, k in zip(got, kept, strict=True):
            assert g.tobytes() == k.tobytes()
            assert not any(np.shares_memory(g, a) for a in arenas.values())


@pytest.mark.parametrize("seed", range(5))
def test_values_alive_at_once_never_share_bytes(seed):
    rng = np.random.default_rng(seed)
    spans = []
    for _ in range(60):
        start = int(rng.integers(0, 50))
        spans.append((start, start + int(rng.integers(0, 10)), int(rng.integers(1, 5000))))
    offsets, size = storage._offsets(spans)
    for k, (s1, e1, n1) in enumerate(spans):
        assert offsets[k] % storage.ALIGN == 0 and offsets[k] + n1 <= size
        for j, (s2, e2, n2) in enumerate(spans[:k]):
            if s1 <= e2 and s2 <= e1:
                assert offsets[k] + n1 <= offsets[j] or offsets[j] + n2 <= offsets[k]
    peak = max(sum(n for s, e, n in spans if s <= t <= e) for t in range(60))
    assert size < 2 * peak  # shared where lifetimes allow


def test_storage_off_and_on_cuda_paths_plan_nothing():
    x = np.ones((512, 256), "float32")
    mod = adjoint(lambda x: tracer.exp(tracer.exp(x) * 2).sum(), x)
    assert _executor(mod, False)["main_adjoint"].storage == {}
