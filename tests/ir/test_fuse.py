"""Elementwise fusion: fused bindings print and parse, equal the unfused path, respect checkpoint
regions and lifetimes; the op table's forward and gradient cases pass with fusion on."""
import numpy as np
import pytest

import ir
import tracer
from autodiff import Gradient
from ir.ops import fused as fused_mod
from ir.runtime import fused_cpu
from ir.transform.fuse import FuseElementwise, fusion
from tests.autodiff.test_vjp_cases import CASES as GRAD_CASES
from tests.autodiff.test_vjp_cases import test_gradient_matches_finite_differences as gradient_case
from tests.cases import all_cases

FUSE = FuseElementwise(force=True)
CASES = all_cases()


def _ops(fn):
    return [b.value.op for b in fn.bindings if isinstance(b.value, ir.Call)]


def _flat(out):
    return [np.asarray(o) for o in out] if isinstance(out, tuple | list) else [np.asarray(out)]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_forward_case_fused_equals_unfused(case):
    mod = tracer.trace(lambda *xs: case.fn(*xs, **case.kwargs), *case.inputs)
    fused = FUSE(mod)
    ir.verify(fused)
    assert ir.structural_equal(ir.parse(str(fused)), fused)
    want = _flat(ir.Executor(mod)["main"](*case.inputs))
    got = _flat(ir.Executor(fused, check_types=True)["main"](*case.inputs))
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("case", GRAD_CASES, ids=[c.name for c in GRAD_CASES])
def test_gradient_case_with_fusion_on(case):
    with fusion(True):
        gradient_case(case)


def _step_module(fn, *specs):
    """The cleaned-up step, unfused whatever TRACEGRAD_FUSE says (the tests fuse it themselves)."""
    mod = tracer.trace(fn, *specs)
    params = [p for p in mod["main"].params if p.type.is_float]
    with fusion(False):
        return ir.transform.cleanup()(Gradient("main", require_grads=params)(mod))


def _gelu_layer_norm_loss(x, w, b):
    h = tracer.gelu(x @ w + b, approximate="tanh")
    mu = h.mean(axis=-1, keepdims=True)
    d = h - mu
    y = d / tracer.sqrt((d * d).mean(axis=-1, keepdims=True) + 1e-5)
    return tracer.softmax(y, axis=-1).sum() + tracer.relu(y).sum()


@pytest.mark.parametrize("rows", [8, 512])  # 512 x 96: large arrays through the program
def test_gelu_layer_norm_softmax_step_fuses_and_agrees(rows):
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s).astype("float32") for s in [(rows, 32), (32, 96), (96,)]]
    mod = _step_module(_gelu_layer_norm_loss, *args)
    fused = FUSE(mod)
    ir.verify(fused)
    adj = fused["main_adjoint"]
    assert "fused" in _ops(adj) and "tanh" not in _ops(adj)  # GELU and its VJP each became part of a chain
    assert len(_ops(adj)) < len(_ops(mod["main_adjoint"])) - 10
    assert ir.structural_equal(ir.parse(str(fused)), fused)
    want = ir.Executor(mod)["main_adjoint"](*args)
    got = ir.Executor(fused, check_types=True)["main_adjoint"](*args)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5)
    for g, w in zip(got[1], want[1], strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


def test_large_chain_inplace_and_unfused_agree():
    rng = np.random.default_rng(1)
    xs = [rng.standard_normal((300, 257)).astype("float32"), rng.standard_normal((257,)).astype("float32")]
    keep = [x.copy() for x in xs]
    expr = ('where(greater(x0, const(0.0, "float32")), nn.gelu(add(x0, x1), approximate="tanh"), '
            'multiply(sigmoid(x1), maximum(x0, negative(x1))))')
    want = fused_mod.evaluate_unfused(np, expr, xs)
    got = fused_cpu._fused_kernel(np, xs, expr)  # in place through NumPy: the same ufuncs, bit for bit
    assert got.dtype == np.float32 and got.shape == (300, 257)
    np.testing.assert_array_equal(got, want)
    for x, k in zip(xs, keep, strict=True):
        np.testing.assert_array_equal(x, k)  # inputs are never written


def test_inplace_never_writes_into_an_input():
    x = np.random.default_rng(2).standard_normal((256, 256)).astype("float32")
    before = x.copy()
    out = fused_cpu._fused_kernel(np, [x], 'exp(astype(x0, dtype="float32"))')
    np.testing.assert_array_equal(x, before)
    np.testing.assert_array_equal(out, np.exp(before))


def test_fused_text_round_trips_and_bad_expr_is_named():
    text = '''
@R.function
def main(x: R.Tensor((2, 3), "float32"), y: R.Tensor((3,), "float32")):
    with R.dataflow():
        z: R.Tensor((2, 3), "float32") = R.fused((x, y), expr="exp(add(x0, multiply(x1, const(2.0, 'float32'))))")
        R.output(z)
    return z
'''
    mod = ir.parse(text)
    x = np.ones((2, 3), "float32")
    y = np.arange(3, dtype="float32")
    np.testing.assert_allclose(ir.Executor(mod)["main"](x, y), np.exp(x + 2 * y), rtol=1e-6)
    with pytest.raises(ir.IRError, match="fused.*x2"):
        ir.parse(text.replace("x1, const", "x2, const"))
    with pytest.raises(ir.IRError, match="add.*broadcast"):
        ir.parse(text.replace("R.Tensor((3,)", "R.Tensor((4,)"))


def test_never_fuses_across_a_checkpoint_marker():
    def f(x):
        y = x.exp()
        with tracer.checkpoint():
            h = (x * 3.0).tanh()
        return (y * 2.0 + h).sum()
    mod = _step_module(f, tracer.spec((4, 5)))
    for name in ("main", "main_adjoint"):
        fn = FUSE(mod)[name]
        ops = _ops(fn)
        assert ops.count("grad.start_checkpoint") == _ops(mod[name]).count("grad.start_checkpoint")
        assert "exp" in ops  # y = exp(x) before the region is not moved past the region into its consumer


def test_a_chain_does_not_keep_bigger_inputs_alive_across_other_work():
    def f(x, w1, w2, w3):
        y = x @ w1 + x @ w2  # both products die at the add
        z = (x @ w3).sum()  # other work in between
        return y.exp().sum() + z
    specs = [tracer.spec(s) for s in [(64, 64), (64, 64), (64, 64), (64, 64)]]
    mod = tracer.trace(f, *specs)
    ops = _ops(FUSE(mod)["main"])
    assert "add" in ops and ops.count("exp") == 1
    # with nothing in between the chain is taken
    mod2 = tracer.trace(lambda x, w1, w2: (x @ w1 + x @ w2).exp().sum(), *specs[:3])
    assert "fused" in _ops(FUSE(mod2)["main"])


def test_switch_is_off_by_default_and_toggles_cleanup():
    mod = tracer.trace(lambda x: (x * 2.0 + 1.0).exp(), tracer.spec((4,)))
    with fusion(False):
        assert "fused" not in _ops(ir.transform.cleanup()(mod)["main"])
    with fusion(True):
        assert _ops(ir.transform.cleanup()(mod)["main"]) == ["fused"]


REUSE_TEXT = '''
@R.function
def main(x: R.Tensor((64, 8), "float32"), w: R.Tensor((8, 64), "float32")):
    with R.dataflow():
        a: R.Tensor((64, 64), "float32") = R.matmul(x, w)
        y: R.Tensor((64, 64), "float32") = R.fused((a,), expr="exp(multiply(x0, const(0.5, 'float32')))")
        z: R.Tensor((64, 64), "float32") = R.multiply(y, a)
        r: R.Tensor((64, 64), "float32") = R.add(y, z)
        R.output(r)
    return r
'''


def test_buffer_reuse_applies_to_fused_results_and_inputs():
    from ir.runtime.reuse import plan_reuse
    mod = ir.parse(REUSE_TEXT)
    fn = mod["main"]
    plan = {fn.bindings[i].var.name: (ufunc, v.name) for i, (ufunc, v) in plan_reuse(fn).items()}
    # a (a matmul's, read by the fused op without keeping it) dies at z; y (the fused result) dies at r
    assert plan == {"z": ("multiply", "a"), "r": ("add", "y")}
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal((64, 8)).astype("float32"), rng.standard_normal((8, 64)).astype("float32")
    ex = ir.Executor(mod)
    got = ex["main"](x, w)
    a = x @ w
    y = np.exp(a * np.float32(0.5))
    np.testing.assert_allclose(got, y * a + y, rtol=1e-5)
    tile = 64 * 64 * 4
    assert ex.stats.peak_bytes == 2 * tile  # a and y at most (z in a's buffer, r in y's)
    ex_off = ir.Executor(mod)
    ex_off.reuse_buffers = False
    ex_off["main"](x, w)
    assert ex_off.stats.peak_bytes == 3 * tile


GELU_VJP = ("multiply(x0, add(multiply(const(0.5, 'float32'), add(const(1.0, 'float32'), x1)), "
            "multiply(multiply(const(0.5, 'float32'), x2), multiply(subtract(const(1.0, 'float32'), multiply(x1, x1)), "
            "multiply(const(0.7978845834732056, 'float32'), add(const(1.0, 'float32'), "
            "multiply(const(0.13414500653743744, 'float32'), x3)))))))")


def test_program_holds_few_temporaries_and_equals_unfused_bit_for_bit():
    rng = np.random.default_rng(4)
    xs = [rng.standard_normal((300, 257)).astype("float32") for _ in range(4)]
    xs[2] = np.ascontiguousarray(xs[2].T).T  # a non-contiguous input
    prog = fused_cpu._program(GELU_VJP, tuple((x.shape, x.dtype) for x in xs))
    temporaries = prog.n_registers - len(xs) - len(prog.constants)
    assert temporaries == 2  # 13 sub-ops, heaviest argument first: two arrays held at once (unfused: one per op)
    got = fused_cpu._fused_kernel(np, xs, GELU_VJP)
    np.testing.assert_array_equal(got, fused_mod.evaluate_unfused(np, GELU_VJP, xs))
    # broadcast and 0-d inputs, a comparison into a bool temporary, float64
    ys = [rng.standard_normal((64, 33)), rng.standard_normal((33,)), np.asarray(0.25)]
    expr = "where(less(multiply(x0, x2), x1), exp(add(x0, x1)), negative(multiply(x1, x2)))"
    got = fused_cpu._fused_kernel(np, ys, expr)
    assert got.dtype == np.float64 and got.shape == (64, 33)
    np.testing.assert_array_equal(got, fused_mod.evaluate_unfused(np, expr, ys))
    assert not any(np.may_share_memory(got, y) for y in ys)


def test_fused_runs_into_a_dying_input_and_equals_the_kernel():
    from ir.runtime.reuse import plan_fused_reuse
    rng = np.random.default_rng(5)
    args = [rng.standard_normal(s).astype("float32") for s in [(512, 32), (32, 96), (96,)]]
    fused = FUSE(_step_module(_gelu_layer_norm_loss, *args))
    fn = fused["main_adjoint"]
    plan = plan_fused_reuse(fn)
    assert plan  # the adjoint's chains read values that die there
    values = {}
    ex = ir.Executor(fused)

    def snapshot(vals, mem):  # each value as it is made (later ops may write into a dead one's buffer)
        values.update((k, np.array(v)) for k, v in enumerate(vals) if k not in values and isinstance(v, np.ndarray))
    ex["main_adjoint"].observer = snapshot
    ex["main_adjoint"](*args)
    slots = ex["main_adjoint"].slot
    for i, (run, var) in plan.items():
        call = fn.bindings[i].value
        assert fused_cpu.leaf_count(call.attrs["expr"], [f for f in call.args[0].fields].index(var)) == 1
        xs = [values[slots[f]].copy() if isinstance(f, ir.Var) else f.data for f in call.args[0].fields]
        want = ir.get_op("fused").kernel(np, xs, call.attrs["expr"])
        keep = [x.copy() for x in xs]
        got = run(tuple(xs))
        np.testing.assert_array_equal(got, want)
        k = [f for f in call.args[0].fields].index(var)
        for j, (x, before) in enumerate(zip(xs, keep, strict=True)):
            if j != k:
                np.testing.assert_array_equal(x, before)  # only the dying input is written
    # an input the chain reads twice is never overwritten
    twice = ir.parse(REUSE_TEXT.replace("exp(multiply(x0, const(0.5, 'float32')))", "multiply(x0, exp(x0))"))
    assert plan_fused_reuse(twice["main"]) == {}


@pytest.mark.parametrize("expr", ["x0", 'const(1.0, "float32")'])
def test_a_fused_expr_without_an_op_is_refused_when_parsed(expr):
    text = ('@R.function\ndef main(x: R.Tensor((4,), "float32")):\n    with R.dataflow():\n'
            f"        lv = R.fused((x,), expr={expr!r})\n        R.output(lv)\n    return lv\n")
    with pytest.raises(ir.IRError, match="fused: expr must apply at least one op"):
        ir.parse(text)
