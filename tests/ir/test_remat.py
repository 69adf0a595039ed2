"""ir.transform.remat: a kept activation is recomputed for the backward pass when that lowers the peak
and extends no lifetime; ReLU's mask is read from its output. Values never change."""
import numpy as np

import ir
import tracer
from ir.transform import DeadCodeElimination, RecomputeActivations, ReluMask
from tests.ir.adjoints import adjoint as _adjoint
from tests.ir.adjoints import ops as _ops


def _mlp(x, w1, w2, w3):
    h = tracer.gelu(x @ w1, approximate="tanh")
    h = tracer.gelu(h @ w2, approximate="tanh")
    return (h @ w3).sum()


def _args(seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype("float32") for s in [(256, 64), (64, 512), (512, 512), (512, 8)]]


def _run(mod, args):
    ex = ir.Executor(mod)
    out = ex["main_adjoint"](*args)
    return out, ex.stats.peak_bytes


def test_gelu_outputs_are_recomputed_and_the_peak_falls():
    args = _args()
    mod = _adjoint(_mlp, *args)
    new = RecomputeActivations(min_bytes=1)(mod)
    ir.verify(new)
    # the first layer's activation waits across the second layer's forward and backward; the last one's
    # weight gradient comes right after the forward (a gap under MIN_GAP): kept
    assert _ops(new["main_adjoint"]).count("nn.gelu") == _ops(mod["main_adjoint"]).count("nn.gelu") + 1
    assert ir.structural_equal(ir.parse(str(new)), new)
    (v0, g0), peak0 = _run(mod, args)
    (v1, g1), peak1 = _run(new, args)
    assert peak1 < peak0  # one (256, 512) activation per layer not kept across the step
    assert v1.tobytes() == v0.tobytes()
    for a, b in zip(g1, g0, strict=True):
        assert a.tobytes() == b.tobytes()  # the same op on the same input: the same bits


def test_small_activations_and_inputs_that_die_early_are_left_alone():
    args = _args()
    mod = _adjoint(_mlp, *args)
    big = RecomputeActivations(min_bytes=1 << 30)(mod)
    assert _ops(big["main_adjoint"]) == _ops(mod["main_adjoint"])
    # exp's VJP reads its output, not its input: the input dies in the forward pass, nothing to gain
    x = np.ones((256, 512), "float32")
    mod = _adjoint(lambda x, w: (tracer.tanh(x @ w) * 2).sum(), x, np.eye(512, dtype="float32"))
    assert _ops(RecomputeActivations(min_bytes=1)(mod)["main_adjoint"]).count("tanh") == 1


def test_relu_mask_from_the_output_lets_the_input_die():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((64, 32)).astype("float32")
    x[0, :4] = [np.nan, -0.0, 0.0, -np.inf]
    w1, w2 = rng.standard_normal((32, 256)).astype("float32"), rng.standard_normal((256, 4)).astype("float32")
    mod = _adjoint(lambda x, w1, w2: (tracer.relu(x @ w1) @ w2).sum(), x, w1, w2)
    new = DeadCodeElimination()(ReluMask()(mod))
    relu_var = next(b.var for b in new["main_adjoint"].bindings if b.value.op == "nn.relu")
    mask = next(b.value for b in new["main_adjoint"].bindings if b.value.op == "less_equal")
    assert mask.args[0] is relu_var
    with np.errstate(invalid="ignore"):
        (v0, g0), peak0 = _run(mod, [x, w1, w2])
        (v1, g1), peak1 = _run(new, [x, w1, w2])
    assert peak1 <= peak0
    for a, b in zip(g1, g0, strict=True):
        np.testing.assert_array_equal(a, b)


def test_layer_norm_outputs_are_recomputed_with_their_small_parameters():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((512, 256)).astype("float32")
    ws = [rng.standard_normal((256, 256)).astype("float32") * 0.1 for _ in range(3)]
    g, b = np.ones(256, "float32"), np.zeros(256, "float32")

    def fn(x, w1, w2, w3, g, b):
        h = tracer.layer_norm(x @ w1, g, b) @ w2
        return (tracer.layer_norm(h, g, b) @ w3).sum()
    mod = _adjoint(fn, x, *ws, g, b)
    new = RecomputeActivations(min_bytes=1)(mod)
    assert _ops(new["main_adjoint"]).count("nn.layer_norm") > _ops(mod["main_adjoint"]).count("nn.layer_norm")
    (v0, g0), peak0 = _run(mod, [x, *ws, g, b])
    (v1, g1), peak1 = _run(new, [x, *ws, g, b])
    assert peak1 < peak0
    for a, c in zip(g1, g0, strict=True):
        assert a.tobytes() == c.tobytes()
