"""Gradient checkpointing: same gradients, one recomputation of what the backward needs, lower peak memory."""
import contextlib
from collections import Counter

import numpy as np
import pytest

import autodiff
import ir
import tracer
from autodiff import Gradient
from benchmarks.checkpoint_memory import compile_variant, make_batch, make_weights, residual_loss
from ir.transform import CommonSubexpressionElimination

MARKERS = {"grad.start_checkpoint", "grad.end_checkpoint"}


def no_checkpoint():
    return contextlib.nullcontext()


def run_adjoint(fn, *arrays, target_index=0):
    """Trace fn, add and clean up its adjoint (every float argument and captured tensor), run it:
    ((value, grads), executor stats, module)."""
    traced = tracer.trace_function(fn, arrays)
    mod = ir.transform.cleanup()(Gradient("main", target_index=target_index)(traced.mod))
    ir.verify(mod)
    ex = ir.Executor(mod)
    out = ex["main_adjoint"](*arrays, *[t.numpy() for t in traced.captured])
    return out, ex.stats, mod


def op_occurrences(fn: ir.Function) -> Counter:
    return Counter(b.value.op for b in fn.blocks[0].bindings if isinstance(b.value, ir.Call))


def assert_tree_close(a, b):
    if isinstance(a, tuple):
        assert isinstance(b, tuple) and len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            assert_tree_close(x, y)
    else:
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-6, atol=1e-7)


def compare(model, *arrays, **kwargs):
    """model(ck, *args) run with checkpoint regions and without: results agree, and the regions recompute."""
    got, stats, _ = run_adjoint(lambda *a: model(tracer.checkpoint, *a), *arrays, **kwargs)
    want, plain_stats, _ = run_adjoint(lambda *a: model(no_checkpoint, *a), *arrays, **kwargs)
    assert_tree_close(got, want)
    assert not MARKERS & set(plain_stats.op_counts)
    extra = Counter(stats.op_counts) - Counter(plain_stats.op_counts) - Counter({m: 10**9 for m in MARKERS})
    assert extra, "the checkpointed version recomputed nothing: the regions were lost"
    return Counter(stats.op_counts), Counter(plain_stats.op_counts)


def rand(*shape, seed=0):
    return np.random.default_rng(seed).uniform(-1.0, 1.0, shape).astype("float32")


# ---------------------------------------------------------------- gradients agree


@pytest.mark.parametrize("variant", ["every", "segments"])
def test_benchmark_model_gradients_agree(variant):
    weights, x = make_weights(8, 16), make_batch(32, 16)
    checkpointed = compile_variant(weights, x, variant)
    assert op_occurrences(checkpointed.mod["main"])["grad.end_checkpoint"] > 0
    loss, grads = checkpointed.step(x)
    plain_loss, plain_grads = compile_variant(weights, x, "none").step(x)
    assert_tree_close((loss, grads), (plain_loss, plain_grads))


def test_region_with_tuple_values():
    def model(ck, x, w):
        with ck():
            a, b = tracer.split(tracer.tanh(x * w), 2, axis=1)  # a tuple-valued op inside the region
            a = tracer.sin(a)
        return (a * b).sum() + tracer.exp(b).sum()  # both region outputs used later

    counts, plain = compare(model, rand(4, 6), rand(4, 6, seed=1))
    assert counts["tanh"] == plain["tanh"] + 1 and counts["split"] == plain["split"] + 1


def test_nested_and_consecutive_regions():
    def model(ck, x, w):
        with ck():
            h = tracer.tanh(x * w)
            with ck():  # nested: only the outermost region counts
                h = tracer.sin(h) * h
            h = tracer.exp(h * 0.5)
        with ck():  # consecutive: its input is the first region's output
            h = tracer.tanh(h) * x
        return (h * h).sum()

    x, w = rand(3, 5), rand(3, 5, seed=1)
    counts, plain = compare(model, x, w)
    # two regions: inputs (x, w) and (h, x); one output each
    markers = op_occurrences(tracer.trace(lambda *a: model(tracer.checkpoint, *a), x, w)["main"])
    assert markers["grad.start_checkpoint"] == 4 and markers["grad.end_checkpoint"] == 2
    assert counts["tanh"] == plain["tanh"] + 2 and counts["sin"] == plain["sin"] + 1


def test_region_output_also_returned_with_target_index():
    def model(ck, x, w):
        with ck():
            h = tracer.tanh(x * w)
            y = h * h
        return y, (y * x).sum()

    x, w = rand(2, 3), rand(2, 3, seed=1)
    compare(model, x, w, target_index=1)
    (value, grads), _, _ = run_adjoint(lambda *a: model(tracer.checkpoint, *a), x, w, target_index=1)
    np.testing.assert_allclose(value[0], np.tanh(x * w) ** 2, rtol=1e-6)


def test_region_output_returned_as_aux():
    x, w = rand(2, 3), tracer.tensor(rand(3, 3, seed=1))

    def model(ck, x):
        with ck():
            h = tracer.tanh(x @ w)
        return (h * h).mean(), h

    (loss, aux), g = autodiff.value_and_grad(lambda x: model(tracer.checkpoint, x), wrt=[w], has_aux=True)(x)
    (plain_loss, plain_aux), plain_g = autodiff.value_and_grad(lambda x: model(no_checkpoint, x), wrt=[w],
                                                               has_aux=True)(x)
    assert_tree_close((loss.numpy(), aux.numpy(), g[0].numpy()), (plain_loss.numpy(), plain_aux.numpy(),
                                                                  plain_g[0].numpy()))


def test_region_using_a_captured_weight():
    w = tracer.tensor(rand(4, 4, seed=2))
    w._name = "w"

    def model(ck, x):
        with ck():
            h = tracer.tanh(x @ w) + x
            h = tracer.tanh(h @ w)
        return h.sum()

    x = rand(3, 4)
    counts, plain = compare(model, x)
    # matmul's VJP needs h = tanh(x @ w) + x: the first matmul runs again; the region's output (the
    # second tanh) is kept through its end marker, so the second matmul is not recomputed
    assert counts["matmul"] == plain["matmul"] + 1
    g = autodiff.grad(lambda x: model(tracer.checkpoint, x), wrt=w)(x)
    plain_g = autodiff.grad(lambda x: model(no_checkpoint, x), wrt=w)(x)
    assert_tree_close(g.numpy(), plain_g.numpy())


# ---------------------------------------------------------------- what runs, and how much memory


def test_op_counts_show_one_extra_forward_of_what_the_backward_needs():
    weights, x = make_weights(8, 16), make_batch(32, 16)
    counts = {}
    for variant in ("none", "every", "segments"):
        c = compile_variant(weights, x, variant)
        c.step(x)
        counts[variant] = Counter(c.executor.stats.op_counts)
    # every block a region: tanh's VJP needs tanh's output, so h @ W and tanh run again, once per block;
    # the residual add is each region's output (kept), and nothing outside the regions runs again
    assert counts["every"] - counts["none"] == Counter(
        {"tanh": 8, "matmul": 8, "grad.start_checkpoint": 16, "grad.end_checkpoint": 8})
    assert not counts["none"] - counts["every"]
    # blocks 0-3 one region, 4-7 plain: matmul's VJP also needs the inner h_1..h_3 (adds) again
    assert counts["segments"] - counts["none"] == Counter(
        {"tanh": 4, "matmul": 4, "add": 3, "grad.start_checkpoint": 5, "grad.end_checkpoint": 1})
    assert not counts["none"] - counts["segments"]


def test_peak_bytes_fall_at_the_benchmark_size():
    weights, x = make_weights(32, 128), make_batch(2048, 128)
    peaks = {}
    for variant in ("none", "every", "segments"):
        c = compile_variant(weights, x, variant)
        c.step(x)
        first = c.executor.stats.peak_bytes
        c.step(x)
        assert c.executor.stats.peak_bytes == first  # deterministic
        peaks[variant] = first
    activation = 2048 * 128 * 4
    assert peaks["none"] > 64 * activation  # keeps h_i and tanh(h_i @ W_i) of every block
    assert peaks["every"] <= 0.60 * peaks["none"], peaks
    assert peaks["segments"] <= 0.40 * peaks["none"], peaks


# ---------------------------------------------------------------- dropout


def test_dropout_in_a_region_with_a_seed():
    def model(ck, x, w):
        with ck():
            d = tracer.dropout(x * w, 0.3, seed=7)
            h = d * tracer.tanh(d)
        return (h * x).sum()

    counts, plain = compare(model, rand(8, 8), rand(8, 8, seed=1))
    # forward, the recomputation for multiply's VJP, and dropout's own VJP (same mask from the seed)
    assert counts["nn.dropout"] == plain["nn.dropout"] + 1 == 3


def test_dropout_in_a_region_fresh_mask_per_call_same_mask_in_its_recompute():
    p = 0.5
    x = rand(16, 16) + 2.0  # never 0, so tanh(dropout(x)) == 0 exactly where dropped

    def f(x):
        with tracer.checkpoint():
            h = tracer.tanh(tracer.dropout(x, p)) * 2.0  # tanh's output is interior: recomputed for its VJP
        return h.sum(), h

    step = autodiff.value_and_grad(f, wrt=[x_t := tracer.tensor(x)], has_aux=True)
    masks = []
    for _ in range(2):
        (_, h), (g,) = step(x_t)
        h, g = h.numpy(), g.numpy()
        kept = h != 0
        assert 0.3 < kept.mean() < 0.7
        # the backward recomputed tanh(dropout(x)): the same mask as this call's forward
        t = h / 2.0
        np.testing.assert_allclose(g, 2.0 * (1 - t * t) * kept / (1 - p), rtol=1e-5, atol=1e-7)
        masks.append(kept)
    assert (masks[0] != masks[1]).any(), "seed=None must draw a fresh mask on every call"
    adjoint = step.module["main_adjoint"]
    assert op_occurrences(adjoint)["nn.dropout"] == 3  # forward, recomputation, VJP


# ---------------------------------------------------------------- the adjoint IR

TWO_REGIONS = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((3,), dtype="float32"), w1: R.Tensor((3,), dtype="float32"),
             w2: R.Tensor((3,), dtype="float32")) -> R.Tensor((), dtype="float32"):
        with R.dataflow():
            x_in: R.Tensor((3,), dtype="float32") = R.grad.start_checkpoint(x)
            w1_in: R.Tensor((3,), dtype="float32") = R.grad.start_checkpoint(w1)
            a1: R.Tensor((3,), dtype="float32") = R.multiply(x_in, w1_in)
            t1: R.Tensor((3,), dtype="float32") = R.tanh(a1)
            h1: R.Tensor((3,), dtype="float32") = R.add(x_in, t1)
            h1_out: R.Tensor((3,), dtype="float32") = R.grad.end_checkpoint(h1)
            h1_in: R.Tensor((3,), dtype="float32") = R.grad.start_checkpoint(h1_out)
            w2_in: R.Tensor((3,), dtype="float32") = R.grad.start_checkpoint(w2)
            a2: R.Tensor((3,), dtype="float32") = R.multiply(h1_in, w2_in)
            t2: R.Tensor((3,), dtype="float32") = R.tanh(a2)
            h2: R.Tensor((3,), dtype="float32") = R.add(h1_in, t2)
            h2_out: R.Tensor((3,), dtype="float32") = R.grad.end_checkpoint(h2)
            sq: R.Tensor((3,), dtype="float32") = R.multiply(h2_out, h2_out)
            loss: R.Tensor((), dtype="float32") = R.sum(sq, axis=None, keepdims=False)
            R.output(loss)
        return loss

    @R.function
    def main_adjoint(x: R.Tensor((3,), dtype="float32"), w1: R.Tensor((3,), dtype="float32"),
                     w2: R.Tensor((3,), dtype="float32")) -> R.Tuple(R.Tensor((), dtype="float32"),
                     R.Tuple(R.Tensor((3,), dtype="float32"), R.Tensor((3,), dtype="float32"))):
        with R.dataflow():
            x_in: R.Tensor((3,), dtype="float32") = R.grad.start_checkpoint(x)
            w1_in: R.Tensor((3,), dtype="float32") = R.grad.start_checkpoint(w1)
            a1: R.Tensor((3,), dtype="float32") = R.multiply(x_in, w1_in)
            t1: R.Tensor((3,), dtype="float32") = R.tanh(a1)
            h1: R.Tensor((3,), dtype="float32") = R.add(x_in, t1)
            h1_out: R.Tensor((3,), dtype="float32") = R.grad.end_checkpoint(h1)
            h1_in: R.Tensor((3,), dtype="float32") = R.grad.start_checkpoint(h1_out)
            w2_in: R.Tensor((3,), dtype="float32") = R.grad.start_checkpoint(w2)
            a2: R.Tensor((3,), dtype="float32") = R.multiply(h1_in, w2_in)
            t2: R.Tensor((3,), dtype="float32") = R.tanh(a2)
            h2: R.Tensor((3,), dtype="float32") = R.add(h1_in, t2)
            h2_out: R.Tensor((3,), dtype="float32") = R.grad.end_checkpoint(h2)
            sq: R.Tensor((3,), dtype="float32") = R.multiply(h2_out, h2_out)
            loss: R.Tensor((), dtype="float32") = R.sum(sq, axis=None, keepdims=False)
            # sum, then square (its two equal products merged by CSE: they lie outside the regions)
            loss_adjoint: R.Tensor((), dtype="float32") = R.ones(R.shape([]), dtype="float32")
            sq_adjoint: R.Tensor((3,), dtype="float32") = R.broadcast_to(loss_adjoint, R.shape([3]))
            g2: R.Tensor((3,), dtype="float32") = R.multiply(sq_adjoint, h2_out)
            h2_adjoint: R.Tensor((3,), dtype="float32") = R.add(g2, g2)
            # region 2 backward: tanh's VJP needs t2, recomputed here from the kept h1_in and w2_in
            a2_again: R.Tensor((3,), dtype="float32") = R.multiply(h1_in, w2_in)
            t2_again: R.Tensor((3,), dtype="float32") = R.tanh(a2_again)
            g3: R.Tensor((3,), dtype="float32") = R.multiply(t2_again, t2_again)
            g4: R.Tensor((3,), dtype="float32") = R.subtract(R.const(1.0, "float32"), g3)
            a2_adjoint: R.Tensor((3,), dtype="float32") = R.multiply(h2_adjoint, g4)
            g5: R.Tensor((3,), dtype="float32") = R.multiply(a2_adjoint, w2_in)
            w2_adjoint: R.Tensor((3,), dtype="float32") = R.multiply(a2_adjoint, h1_in)
            h1_adjoint: R.Tensor((3,), dtype="float32") = R.add(h2_adjoint, g5)
            # region 1 backward: its recomputation lands only now, after region 2's is done
            a1_again: R.Tensor((3,), dtype="float32") = R.multiply(x_in, w1_in)
            t1_again: R.Tensor((3,), dtype="float32") = R.tanh(a1_again)
            g6: R.Tensor((3,), dtype="float32") = R.multiply(t1_again, t1_again)
            g7: R.Tensor((3,), dtype="float32") = R.subtract(R.const(1.0, "float32"), g6)
            a1_adjoint: R.Tensor((3,), dtype="float32") = R.multiply(h1_adjoint, g7)
            w1_adjoint: R.Tensor((3,), dtype="float32") = R.multiply(a1_adjoint, x_in)
            R.output(loss, w1_adjoint, w2_adjoint)
        return (loss, (w1_adjoint, w2_adjoint))
'''


def two_regions(x, w1, w2):
    with tracer.checkpoint():
        h = x + tracer.tanh(x * w1)
    with tracer.checkpoint():
        h = h + tracer.tanh(h * w2)
    return (h * h).sum()


def two_region_adjoint():
    mod = tracer.trace(two_regions, *[tracer.spec((3,))] * 3)
    x, w1, w2 = mod["main"].params
    return Gradient("main", require_grads=[w1, w2])(mod)


def test_golden_adjoint_of_a_two_region_chain():
    after = ir.transform.cleanup()(two_region_adjoint())
    ir.verify(after)
    assert ir.structural_equal(after, ir.parse(TWO_REGIONS)), str(after)
    x, w1, w2 = rand(3), rand(3, seed=1), rand(3, seed=2)
    loss, (g1, g2) = ir.Executor(after)["main_adjoint"](x, w1, w2)
    h1 = x + np.tanh(x * w1)
    t2 = np.tanh(h1 * w2)
    dh1 = 2 * (h1 + t2) * (1 + (1 - t2 ** 2) * w2)
    np.testing.assert_allclose(g2, 2 * (h1 + t2) * (1 - t2 ** 2) * h1, rtol=1e-5)
    np.testing.assert_allclose(g1, dh1 * (1 - np.tanh(x * w1) ** 2) * x, rtol=1e-5)


def repeated(fn: ir.Function) -> Counter:
    """Ops bound more than once to the very same arguments and attributes: {op: extra copies}."""
    keys = Counter((b.value.op, tuple(map(id, b.value.args)), repr(b.value.attrs))
                   for b in fn.blocks[0].bindings if isinstance(b.value, ir.Call))
    return Counter({k[0]: 0 for k in keys}) + Counter(k[0] for k, n in keys.items() for _ in range(n - 1))


def test_cse_after_gradient_keeps_recomputations():
    raw = two_region_adjoint()["main_adjoint"]
    merged = CommonSubexpressionElimination()(two_region_adjoint())["main_adjoint"]
    cleaned = ir.transform.cleanup()(two_region_adjoint())["main_adjoint"]
    # raw: a1 and a2 (multiply) are bound again to the same arguments by their recomputation, and
    # square's VJP emits sq_adjoint * h2_out twice
    assert repeated(raw) == Counter({"multiply": 3})
    for fn in (merged, cleaned):  # only the duplicate outside the regions is merged
        assert repeated(fn) == Counter({"multiply": 2})
        assert op_occurrences(fn)["tanh"] == op_occurrences(raw)["tanh"] == 4
    weights, x = make_weights(8, 16), make_batch(32, 16)
    adjoint = compile_variant(weights, x, "every").mod["main_adjoint"]
    assert op_occurrences(adjoint)["tanh"] == 16  # 8 forward, 8 recomputed
    assert repeated(adjoint)["matmul"] == 8  # each h_i @ W_i again, with the same arguments


def test_checkpoint_sequential_traces_the_benchmark_segments():
    from nn import checkpoint_sequential

    weights = [tracer.tensor(w) for w in make_weights(8, 16)]
    blocks = [lambda h, w=w: h + tracer.tanh(h @ w) for w in weights]
    spec = tracer.spec((32, 16))
    by_hand = tracer.trace(residual_loss(weights, "segments", segment=4), spec)

    def loss(x):
        h = checkpoint_sequential(blocks, 2, x)  # two segments of 4: the first a region
        return (h * h).mean()

    sequential = tracer.trace(loss, spec)
    assert op_occurrences(sequential["main"])["grad.end_checkpoint"] == 1
    assert ir.structural_equal(sequential, by_hand), f"{sequential}\n{by_hand}"


def test_cse_still_merges_backward_duplicates_computed_from_recomputations():
    def f(x):
        with tracer.checkpoint():
            a = tracer.sin(x)
            h = a * a
        return h.sum()
    mod = tracer.trace(f, tracer.spec((4,)))
    adjoint = ir.transform.cleanup()(Gradient("main")(mod))["main_adjoint"]
    counts = op_occurrences(adjoint)
    # sin runs again for multiply's VJP; that VJP's two products g * a' are one value after CSE
    assert counts["sin"] == 2
    assert counts["multiply"] == 3  # forward a * a, the merged g * a', and sin's VJP


def test_require_grads_on_a_region_output():
    def f(x):
        with tracer.checkpoint():
            h = tracer.tanh(x * 2.0)
        return (h * h).sum()
    mod = tracer.trace(f, tracer.spec((3,)))
    bindings = mod["main"].bindings
    marker = next(b for b in bindings if isinstance(b.value, ir.Call) and b.value.op == "grad.end_checkpoint")
    inner = marker.value.args[0]  # the value inside the region that the marker passes out
    x = np.array([0.1, -0.4, 0.7], "float32")
    h = np.tanh(2 * x)
    for var in (marker.var, inner):
        after = ir.transform.cleanup()(Gradient("main", require_grads=[var, mod["main"].params[0]])(mod))
        ir.verify(after)
        _, (gh, gx) = ir.Executor(after)["main_adjoint"](x)
        np.testing.assert_allclose(gh, 2 * h, rtol=1e-6)
        np.testing.assert_allclose(gx, 2 * h * (1 - h * h) * 2, rtol=1e-5)
