"""FoldConstants: the adjoint's scalar seed chain folds to one constant, broadcasts that an elementwise
op makes itself disappear, values stay bit for bit, and nothing that must run at run time is folded."""
import numpy as np
import pytest

import ir
import tracer
from ir.ops.registry import make_call
from ir.transform import FoldConstants, optimize
from ir.transform.fold import _fold
from tests.ir.adjoints import adjoint as _step
from tests.ir.adjoints import ops as _ops


def _loss(x, y, w):
    return -(y * tracer.log_softmax(x @ w)).sum(axis=1).mean()


def test_the_seed_chain_of_a_mean_loss_folds_and_the_broadcasts_go():
    rng = np.random.default_rng(0)
    args = [rng.standard_normal((32, 8)).astype("float32"), np.eye(10, dtype="float32")[rng.integers(0, 10, 32)],
            rng.standard_normal((8, 10)).astype("float32")]
    mod = _step(_loss, *args)
    before = _ops(mod["main_adjoint"])
    after_mod = optimize()(mod)
    ir.verify(after_mod)
    after = _ops(after_mod["main_adjoint"])
    assert "ones" in before and "broadcast_to" in before
    assert "ones" not in after and "broadcast_to" not in after and "reshape" not in after
    assert len(after) <= len(before) - 6
    assert ir.structural_equal(ir.parse(str(after_mod)), after_mod)  # folded constants print and parse
    want = ir.Executor(mod)["main_adjoint"](*args)
    got = ir.Executor(after_mod)["main_adjoint"](*args)
    assert got[0].tobytes() == want[0].tobytes()
    for g, w in zip(got[1], want[1], strict=True):
        assert g.tobytes() == w.tobytes()


def test_a_broadcast_that_is_returned_or_needed_for_the_shape_stays():
    x = np.arange(3, dtype="float32")
    mod = tracer.trace(lambda x: (tracer.broadcast_to(x, (2, 3)), tracer.broadcast_to(x, (2, 3)) * x), x)
    out = FoldConstants()(mod)
    ops = _ops(out["main"])
    assert ops.count("broadcast_to") >= 1  # the returned one; the multiply alone would give shape (3,)
    got = ir.Executor(out)["main"](x)
    assert got[0].shape == (2, 3) and got[1].shape == (2, 3)
    np.testing.assert_array_equal(got[1], np.broadcast_to(x * x, (2, 3)))


def test_integer_division_by_zero_and_random_draws_are_not_folded():
    def fn(x):
        zero = tracer.zeros((), "int64")
        q = tracer.ones((), "int64") // zero
        return x + q.astype("float32")
    mod = tracer.trace(fn, np.zeros((), "float32"))
    out = FoldConstants()(mod)
    assert "floor_divide" in _ops(out["main"])
    with pytest.raises(ZeroDivisionError, match="floor_divide"):
        ir.Executor(out)["main"](np.zeros((), "float32"))
    # a draw from a constant seed is still a draw at run time (dropout's and rand's seeds are inputs)
    draw = make_call("random.uniform", [ir.Constant(np.array(7, "int64"))], {"shape": ()})
    assert _fold(draw) is None


def test_large_constants_are_left_computed():
    mod = tracer.trace(lambda x: x + tracer.ones((64,), "float32") * 2.0, np.zeros(64, "float32"))
    out = FoldConstants()(mod)
    assert "ones" in _ops(out["main"])  # 64 elements: computed at run time, the IR stays readable
