"""ir.runtime.storage: large intermediates of a generated step run in arrays kept between calls. Values equal the
allocating path on every gradient case of the op table (planned down to one byte), returned arrays are
never planned storage (a later call does not change them), and nothing that may be viewed is planned."""
import numpy as np
import pytest

import ir
import tracer
from ir.runtime import storage
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
    # a value some op keeps a view of (h, through reshape) is never planned
    viewed = [i for i, op in enumerate(on.instr_ops) if op == "reshape"]
    sources = {on.instrs[i][2][0] for i in viewed}
    assert not any(on.instrs[i][4] in sources for i in on.storage)


def test_storage_off_and_on_cuda_paths_plan_nothing():
    x = np.ones((512, 256), "float32")
    mod = adjoint(lambda x: tracer.exp(tracer.exp(x) * 2).sum(), x)
    assert _executor(mod, False)["main_adjoint"].storage == {}
