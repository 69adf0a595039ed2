"""The checkpoint planner: budgets met (exact executor peak), gradients unchanged, clear errors."""
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import autodiff
import ir
import tracer
from autodiff.planner import make_plan, op_flops, parse_budget
from benchmarks.checkpoint_memory import make_batch, make_weights, residual_loss
from tests.autodiff.test_properties import BINARY, UNARY

MARKERS = ("grad.start_checkpoint", "grad.end_checkpoint")


def step_of(mod, require=None):
    """The adjoint module of mod's main, cleaned up and optimized as a compiled step is."""
    return ir.transform.optimize()(ir.transform.cleanup()(autodiff.Gradient("main", require_grads=require)(mod)))


def run(step, arrays):
    ex = ir.Executor(step)
    out = ex["main_adjoint"](*arrays)
    return out, ex.stats.peak_bytes


def assert_same(a, b):
    if isinstance(a, tuple):
        for x, y in zip(a, b, strict=True):
            assert_same(x, y)
    else:  # float32 sums may associate differently once values are recomputed: tolerance at the array's scale
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6 * float(np.abs(b).max(initial=1.0)))


def arrays_for(fn, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(p.type.shape).astype(p.type.dtype) for p in fn.params]


def check_plan(mod, budget, arrays, require=None):
    """Plan mod under budget; the planned step peaks at most at budget and gives the same results."""
    planned = autodiff.plan_checkpoints(mod, budget, require_grads=require)
    assert set(planned) == set(mod)
    expected, _ = run(step_of(mod, require), arrays)
    got, peak = run(step_of(planned, require), arrays)
    assert peak <= parse_budget(budget)
    assert_same(got, expected)
    return planned, peak


def n_regions(mod):
    return sum(b.value.op == "grad.end_checkpoint" for b in mod["main"].bindings if isinstance(b.value, ir.Call))


# ---------------------------------------------------------------- graphs

def chain(x):
    for _ in range(10):
        x = tracer.tanh(x) * 1.5
    return (x * x).sum()


def attention(x, wq, wk, wv):
    h = x
    for _ in range(3):
        q, k, v = h @ wq, h @ wk, h @ wv
        h = h + tracer.softmax(q @ k.T * 0.25, axis=-1) @ v
    return (h * h).mean()


def residual():
    weights = [tracer.tensor(w) for w in make_weights(8, 32)]
    x = make_batch(128, 32)
    traced = tracer.trace_function(residual_loss(weights, "none"), (x,))
    return traced.mod, [x] + [w.numpy() for w in weights], traced.mod["main"].params[1:]


def unplanned_peak(mod, arrays, require=None):
    return run(step_of(mod, require), arrays)[1]


@pytest.mark.parametrize("fraction", [0.2, 0.5, 0.8])
def test_budgets_are_met_on_a_residual_net(fraction):
    mod, arrays, weights = residual()
    top = unplanned_peak(mod, arrays, weights)
    every = tracer.trace_function(residual_loss([tracer.tensor(w) for w in arrays[1:]], "every"), (arrays[0],)).mod
    low = unplanned_peak(every, arrays, every["main"].params[1:])
    budget = int(low + fraction * (top - low))
    planned, peak = check_plan(mod, budget, arrays, weights)
    assert 0 < n_regions(planned) and peak <= budget


def test_a_tighter_budget_recomputes_more():
    mod, arrays, weights = residual()
    top = unplanned_peak(mod, arrays, weights)
    loose = make_plan(mod, int(0.9 * top), require_grads=weights)
    tight = make_plan(mod, int(0.6 * top), require_grads=weights)
    assert loose.peak_bytes <= 0.9 * top and tight.peak_bytes <= 0.6 * top
    assert 0 < loose.recompute_flops < tight.recompute_flops


@pytest.mark.parametrize("variant, segment", [("every", 4), ("segments", 2), ("segments", 4)])
def test_at_a_hand_placed_peak_the_planner_recomputes_no_more(variant, segment):
    mod, arrays, weights = residual()
    hand = tracer.trace_function(residual_loss([tracer.tensor(w) for w in arrays[1:]], variant, segment),
                                 (arrays[0],)).mod
    hand_step = step_of(hand, hand["main"].params[1:])
    _, peak = run(hand_step, arrays)
    hand_flops = sum(op_flops(b.value) for b in hand_step["main_adjoint"].bindings
                     if b.loc is not None and b.loc.role == "recompute")
    plan = make_plan(mod, peak, require_grads=weights)
    assert plan.peak_bytes <= peak and 0 < plan.recompute_flops <= hand_flops


def test_budgets_are_met_on_a_chain_and_on_attention():
    mod = tracer.trace(chain, tracer.spec((64, 64)))
    arrays = arrays_for(mod["main"])
    top = unplanned_peak(mod, arrays)
    check_plan(mod, int(0.6 * top), arrays)
    mod = tracer.trace(attention, tracer.spec((32, 16)), *[tracer.spec((16, 16))] * 3)
    arrays = arrays_for(mod["main"])
    top = unplanned_peak(mod, arrays)
    planned, _ = check_plan(mod, int(0.8 * top), arrays)
    assert n_regions(planned) > 0


def branchy(ops, n_out):
    def f(a, b):
        values = [a, b]
        for binary, i, j, k in ops:
            x, y = values[i % len(values)], values[j % len(values)]
            values.append(BINARY[k % len(BINARY)](x, y) if binary else UNARY[k % len(UNARY)](x))
        return sum(((v * v).sum() for v in values[-n_out:]), tracer.tensor(0.0))
    return f


@settings(max_examples=8, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 50), st.integers(0, 50), st.integers(0, 50)),
                min_size=6, max_size=20), st.integers(1, 3), st.floats(0.0, 1.0))
def test_branchy_random_graphs_meet_every_budget_down_to_the_lowest_peak_they_report(ops, n_out, fraction):
    mod = tracer.trace(branchy(ops, n_out), tracer.spec((32, 32)), tracer.spec((32, 32)))
    arrays = arrays_for(mod["main"])
    top = unplanned_peak(mod, arrays)
    with pytest.raises(ValueError, match="no plan fits") as e:
        autodiff.plan_checkpoints(mod, 1024)
    lowest = int(re.search(r"lowest peak found is .*? \((\d+) bytes", str(e.value)).group(1))
    assert 1024 < lowest <= top
    check_plan(mod, int(lowest + fraction * (top - lowest)), arrays)


def test_dropout_recomputes_the_same_mask():
    def f(x, w):
        h = x
        for _ in range(4):
            h = h + tracer.dropout(tracer.tanh(h @ w), 0.5, seed=7)
        return (h * h).sum()

    mod = tracer.trace(f, tracer.spec((64, 32)), tracer.spec((32, 32)))
    arrays = arrays_for(mod["main"])
    top = unplanned_peak(mod, arrays)
    planned, _ = check_plan(mod, int(0.8 * top), arrays)  # every block checkpointed reaches 0.74
    assert any(b.value.op == "nn.dropout" for b in planned["main"].bindings if isinstance(b.value, ir.Call))
    recomputed = [b.value.op for b in step_of(planned)["main_adjoint"].bindings
                  if b.loc is not None and b.loc.role == "recompute"]
    assert "nn.dropout" in recomputed


def test_a_budget_nothing_reaches_says_the_lowest_peak():
    mod = tracer.trace(chain, tracer.spec((64, 64)))
    with pytest.raises(ValueError, match=r"no plan fits the memory budget of 1000 B \(1000 bytes\); the lowest "
                                         r"peak found is .* bytes, with \d+ checkpoint region\(s\)\), against .* "
                                         r"without checkpoints"):
        autodiff.plan_checkpoints(mod, 1000)


def test_a_generous_budget_needs_no_checkpoints_and_replaces_the_users():
    def f(x):
        return tracer.checkpoint(chain)(x)

    mod = tracer.trace(f, tracer.spec((8, 8)))
    assert n_regions(mod) == 1
    planned = autodiff.plan_checkpoints(mod, "1GiB")
    assert n_regions(planned) == 0
    assert not any(isinstance(b.value, ir.Call) and b.value.op in MARKERS for b in planned["main"].bindings)
    assert "R.grad.start_checkpoint" not in str(planned)


def test_the_plan_prints_as_markers():
    mod = tracer.trace(chain, tracer.spec((64, 64)))
    top = unplanned_peak(mod, arrays_for(mod["main"]))
    text = str(autodiff.plan_checkpoints(mod, int(0.6 * top)))
    assert "R.grad.start_checkpoint" in text and "R.grad.end_checkpoint" in text
    assert ir.structural_equal(ir.parse(text), autodiff.plan_checkpoints(mod, int(0.6 * top)))


def test_bad_budgets_and_modules():
    assert parse_budget("64MiB") == 64 * 2**20 and parse_budget("2 GB") == 2 * 10**9 and parse_budget(512) == 512
    assert parse_budget("1.5KiB") == 1536 and parse_budget(1e6) == 10**6
    for bad in ("64 parsecs", "MiB", ""):
        with pytest.raises(ValueError, match="is not a size"):
            parse_budget(bad)
    with pytest.raises(ValueError, match="must be at least 1 byte"):
        parse_budget(0)
    for bad in (True, None, [1]):
        with pytest.raises(TypeError, match="memory budget must be a number of bytes"):
            parse_budget(bad)
    mod = tracer.trace(chain, tracer.spec((4, 4)))
    with pytest.raises(ValueError, match="already has main_adjoint"):
        make_plan(step_of(mod), "1MiB")  # plan_checkpoints takes it: test_readme.py
    with pytest.raises(KeyError, match="no function named 'nope'"):
        autodiff.plan_checkpoints(mod, "1MiB", func_name="nope")


def test_flops_estimates():
    x, w = ir.Var("x", ir.TensorType((8, 16))), ir.Var("w", ir.TensorType((16, 4)))
    assert op_flops(ir.make_call("matmul", [x, w])) == 2 * 8 * 4 * 16
    assert op_flops(ir.make_call("tanh", [x])) == 128
    assert op_flops(ir.make_call("sum", [x], {"axis": None})) == 128
    assert op_flops(ir.make_call("reshape", [x], {"shape": (16, 8)})) == 0
    assert op_flops(ir.make_call("grad.start_checkpoint", [x])) == 0


# ---------------------------------------------------------------- value_and_grad(memory_budget=...)

def test_value_and_grad_with_a_budget():
    weights = [tracer.tensor(w) for w in make_weights(8, 32)]
    x = make_batch(128, 32)
    loss = residual_loss(weights, "none")
    plain = autodiff.value_and_grad(loss, wrt=weights)
    value, grads = plain(x)
    top = plain.stats.peak_bytes
    budget = int(0.6 * top)
    step = autodiff.value_and_grad(loss, wrt=weights, memory_budget=budget)
    v2, g2 = step(x)
    assert step.stats.peak_bytes <= budget < top
    np.testing.assert_allclose(v2.numpy(), value.numpy(), rtol=1e-6)
    assert_same(tuple(g.numpy() for g in g2), tuple(g.numpy() for g in grads))
    assert "R.grad.start_checkpoint" in step.module.script()
    prof = step.memory_profile()
    assert prof.peak_bytes == step.stats.peak_bytes
    assert "recompute" in prof.roles
    with pytest.raises(ValueError, match="no plan fits the memory budget of 1.00 KiB"):
        autodiff.value_and_grad(loss, wrt=weights, memory_budget="1KiB")(x)
    with pytest.raises(ValueError, match="is not a size"):
        autodiff.value_and_grad(loss, wrt=weights, memory_budget="lots")


def test_memory_profile_before_a_call():
    step = autodiff.value_and_grad(lambda x: (x * x).sum(), wrt=[])
    with pytest.raises(RuntimeError, match="no call yet"):
        step.memory_profile()
