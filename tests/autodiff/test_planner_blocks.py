"""The planner on transformer-like models, whose blocks are several low-crossing segments each: the
budget of the hand-placed every-block plan is reached (it was missed when the candidate segments sat
across block boundaries), and the planned step's gradients equal the unplanned step's."""
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import autodiff
import ir
import tracer
from autodiff.planner import make_plan
from tests.autodiff.test_properties import BINARY, UNARY

BLOCKS, T, D, HEADS = 8, 4, 8, 2


def gpt_like(checkpoint_blocks: bool):
    """Embedding add, BLOCKS pre-norm blocks x + attn(ln(x)), x + mlp(ln(x)), a final norm, a head."""
    causal = np.tril(np.ones((T, T), dtype=bool))

    def block(x, wqkv, wo, w1, w2):
        h = tracer.layer_norm(x) @ wqkv
        q, k, v = (h[..., i * D:(i + 1) * D].reshape((-1, T, HEADS, D // HEADS)).transpose(1, 2) for i in range(3))
        scores = tracer.where(causal, q @ k.transpose(-1, -2) * (D // HEADS) ** -0.5, -1e9)
        att = (tracer.softmax(scores, axis=-1) @ v).transpose(1, 2).reshape((-1, T, D))
        x = x + att @ wo
        return x + tracer.gelu(tracer.layer_norm(x) @ w1) @ w2

    def loss(x, pos, head, *weights):
        h = x + pos
        for i in range(BLOCKS):
            ws = weights[4 * i:4 * i + 4]
            h = tracer.checkpoint(block)(h, *ws) if checkpoint_blocks else block(h, *ws)
        return ((tracer.layer_norm(h) @ head) ** 2).mean()

    shapes = [(4, T, D), (T, D), (D, 11)] + [(D, 3 * D), (D, D), (D, 4 * D), (4 * D, D)] * BLOCKS
    return tracer.trace(loss, *[tracer.spec(s) for s in shapes])


def flat(out):
    return [a for x in out for a in flat(x)] if isinstance(out, tuple) else [out]


def step_peak(mod, arrays):
    step = ir.transform.optimize()(ir.transform.cleanup()(autodiff.Gradient("main")(mod)))  # as a compiled step
    ex = ir.Executor(step)
    out = ex["main_adjoint"](*arrays)
    return out, ex.stats.peak_bytes


def test_the_every_block_budget_is_met_on_a_gpt_like_model():
    plain, every = gpt_like(False), gpt_like(True)
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(p.type.shape).astype("float32") * 0.3 for p in plain["main"].params]
    expected, top = step_peak(plain, arrays)
    _, budget = step_peak(every, arrays)
    assert budget < 0.6 * top
    plan = make_plan(plain, budget)  # every block checkpointed reaches it, so the planner must too
    got, peak = step_peak(plan.module, arrays)
    assert peak == plan.peak_bytes <= budget
    for a, b in zip(flat(got), flat(expected), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6 * float(np.abs(b).max(initial=1.0)))


def repeated(ops, reps: int, checkpoint_blocks: bool):
    """A random branchy block body (the property tests' ops), applied reps times with a residual add,
    each repetition a checkpoint region when checkpoint_blocks."""
    def block(h, w):
        values = [h, tracer.tanh(h @ w)]
        for binary, i, j, k in ops:
            x, y = values[i % len(values)], values[j % len(values)]
            values.append(BINARY[k % len(BINARY)](x, y) if binary else UNARY[k % len(UNARY)](x))
        return h + values[-1]

    def loss(x, *ws):
        h = x * 0.5
        for w in ws:
            h = tracer.checkpoint(block)(h, w) if checkpoint_blocks else block(h, w)
        return (h * h).mean()

    return tracer.trace(loss, tracer.spec((16, 16)), *[tracer.spec((16, 16))] * reps)


@settings(max_examples=6, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 50), st.integers(0, 50), st.integers(0, 50)),
                min_size=2, max_size=8), st.integers(3, 6))
def test_repeated_random_blocks_reach_the_every_block_peak(ops, reps):
    """The planner finds the blocks of any repeated body, so every-block checkpointing's peak is a
    budget it meets, with the same gradients."""
    plain, every = repeated(ops, reps, False), repeated(ops, reps, True)
    rng = np.random.default_rng(1)
    arrays = [rng.standard_normal(p.type.shape).astype("float32") * 0.5 for p in plain["main"].params]
    expected, top = step_peak(plain, arrays)
    _, budget = step_peak(every, arrays)
    plan = make_plan(plain, min(budget, top))
    got, peak = step_peak(plan.module, arrays)
    assert peak == plan.peak_bytes <= budget
    for a, b in zip(flat(got), flat(expected), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5 * float(np.abs(b).max(initial=1.0)))


def test_blocks_are_the_repeated_bodies():
    from autodiff.planner import _Search

    plain = gpt_like(False)
    blocks = _Search(plain, "main", None, 0, "cpu").blocks()
    assert len(blocks) == BLOCKS and len({b - a for a, b in blocks}) == 1
    assert all(blocks[i][1] == blocks[i + 1][0] for i in range(BLOCKS - 1))

    def f(x):  # nothing repeats: no blocks
        return (tracer.exp(x).sum(axis=0) @ tracer.tanh(x)).sum()

    assert _Search(tracer.trace(f, tracer.spec((4, 4))), "main", None, 0, "cpu").blocks() == []
