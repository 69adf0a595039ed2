"""The backward chains as numba row kernels (ir.runtime.vjp_chains, ir.runtime.numba_vjp): each chain is found and
becomes one `fused` binding whose reference kernel gives the chain's values; float32 within 1e-6 of float64;
NaN as NumPy's; edge shapes (rows of one, one row, gamma over two axes, strided inputs, masks); what stays."""
import numpy as np
import pytest

import autodiff
import ir
import tracer
from ir.ops.fused import evaluate_unfused
from tests.ir.adjoints import weighted_adjoint
from tracer.nn_functions import apply

numba = pytest.importorskip("numba")
from ir.runtime import numba_gen, numba_hook, vjp_chains  # noqa: E402 - after the skip

pytestmark = pytest.mark.skipif(not numba_hook.ENABLED, reason="TRACEGRAD_KERNELS=numpy")
RNG = np.random.default_rng(7)
CAUSAL = np.triu(np.ones((8, 8), bool), 1)


@pytest.fixture(autouse=True)
def _small_arrays_too(monkeypatch):
    monkeypatch.setattr(numba_gen, "MIN_SIZE", 0)  # the kernels on the tests' small arrays


def _adjoint(fn, ins):
    return weighted_adjoint(fn, ins, RNG)


def _run(mod, ins, specialize=True):
    ex = ir.Executor(mod)
    ex.specialize_kernels = specialize  # False: the generic NumPy kernels, no rewrite
    f = ex["main_adjoint"]
    return _flat(f(*ins)), f


def _flat(out):
    if isinstance(out, tuple | list):
        return [a for o in out for a in _flat(o)]
    return [np.asarray(out)]


def _chains(compiled):
    return sorted(p[0] for b in compiled.fn.bindings
                  if getattr(b.value, "op", None) == "fused" and (p := vjp_chains._plan(b.value)) is not None)


def _error(got, want):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    scale = np.abs(want).max()
    return float(np.abs(got - want).max() / scale) if scale > 0 else float(np.abs(got).max())


def check(fn, ins, chains, tol=1e-6):
    """fn's gradients with the numba chains: within tol of float64, and the chains made as named (None: the
    chain may also have been simplified into another form and stay NumPy's)."""
    mod = _adjoint(fn, ins)
    got, compiled = _run(mod, ins)
    if chains is not None:
        assert _chains(compiled) == sorted(chains)
    ins64 = [a.astype(np.float64) if a.dtype == np.float32 else a for a in ins]
    want, compiled64 = _run(_adjoint(fn, ins64), ins64, specialize=False)
    assert _chains(compiled64) == []
    plain, _ = _run(mod, ins, specialize=False)
    for g, w, p in zip(got, want, plain, strict=True):
        assert g.dtype == np.float32 and g.shape == w.shape
        assert _error(g, w) <= max(tol, 2 * _error(p, w)), (_error(g, w), _error(p, w))
    return compiled


def _ln(x, gamma, beta):
    return tracer.layer_norm(x, gamma, beta)


def _gelu(x):
    return tracer.gelu(x, approximate="tanh")


def _attention(s):
    return tracer.softmax(tracer.where(tracer.tensor(CAUSAL), tracer.tensor(np.float32(-np.inf)), s), axis=-1)


def f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def test_layer_norm_dx_and_dgamma():
    check(_ln, [f32(4, 8, 32), f32(32), f32(32)], ["layer_norm_dgamma", "layer_norm_dx"])


def test_gelu_tanh_vjp_and_large_arguments():
    x = f32(16, 64) * 4
    x[0, :6] = [0.0, -0.0, 30.0, -30.0, 1e-4, -1e-4]
    check(_gelu, [x], ["gelu_tanh_vjp"])


def test_gelu_forward_kernel_within_1e6_of_float64_elementwise():
    # the nn.gelu binding runs as x * sigmoid(2u): relative to float64 elementwise, the negative tail included
    x = np.concatenate([np.linspace(-12, 12, 4001), [0.0, -0.0, 1e-30, -1e-30, 3e38, -3e38]]).astype(np.float32)
    call = tracer.trace(_gelu, x)["main"].bindings[0].value
    run = vjp_chains.kernel(call)
    assert run is not None
    got = run(x)
    d = x.astype(np.float64)
    want = d / (1 + np.exp(-2 * np.sqrt(2 / np.pi) * (d + 0.044715 * d ** 3)))
    fin = np.isfinite(want) & (np.abs(want) > 1e-37)
    assert np.all(np.abs(got[fin] - want[fin]) <= 1e-6 * np.abs(want[fin]))
    special = np.array([np.nan, np.inf, -np.inf], np.float32)
    mod = tracer.trace(_gelu, special)
    ex = ir.Executor(mod)
    ex.specialize_kernels = False  # NumPy's kernel
    numpy_values = ex["main"](special)
    assert np.array_equal(vjp_chains.kernel(mod["main"].bindings[0].value)(special), numpy_values, equal_nan=True)
    assert vjp_chains.kernel(tracer.trace(lambda x: tracer.gelu(x), x)["main"].bindings[0].value) is None


def test_masked_softmax_and_its_vjp():
    # the forward's where + softmax, and the backward's softmax VJP with the where of the mask after it
    check(_attention, [f32(2, 3, 8, 8)], ["masked_softmax_fill", "softmax_vjp_fill"])


def test_softmax_vjp_bare_and_a_mask_that_keeps():
    def keep(s):
        return tracer.softmax(tracer.where(tracer.tensor(~CAUSAL), s, tracer.tensor(np.float32(-1e4))), axis=-1)
    check(lambda s: tracer.softmax(s, axis=-1), [f32(6, 16)], ["softmax_vjp"])
    check(keep, [f32(3, 8, 8)], ["masked_softmax_keep", "softmax_vjp_keep"])


def test_a_full_shape_mask():
    mask = RNG.random((4, 8, 8)) < 0.3
    mask[..., 0] = False  # no row wholly masked

    def fn(s):
        return tracer.softmax(tracer.where(tracer.tensor(mask), tracer.tensor(np.float32(-np.inf)), s), axis=-1)
    check(fn, [f32(4, 8, 8)], ["masked_softmax_fill", "softmax_vjp_fill"])


def test_rows_of_one_and_one_row():
    check(_ln, [f32(6, 1), f32(1), f32(1)], None)  # a mean over one element: the 1/n factors fold away
    check(_ln, [f32(1, 64), f32(64), f32(64)], ["layer_norm_dgamma", "layer_norm_dx"])
    check(lambda s: tracer.softmax(s, axis=-1), [f32(9, 1)], ["softmax_vjp"])
    check(lambda s: tracer.softmax(s, axis=-1), [f32(1, 33)], ["softmax_vjp"])


def test_layer_norm_over_two_axes_gamma_broadcast_over_rows():
    def fn(x, gamma, beta):
        return apply("nn.layer_norm", [x, gamma, beta], axes=[-2, -1], epsilon=1e-5)
    check(fn, [f32(5, 4, 6), f32(4, 6), f32(4, 6)], ["layer_norm_dgamma", "layer_norm_dx"])


def test_strided_inputs():
    # gradients arrive as strided views (a transpose in the chain), and the arguments themselves are views
    def fn(x, gamma, beta):
        return tracer.permute_dims(_ln(tracer.permute_dims(x, [1, 0, 2]), gamma, beta), [1, 0, 2])
    x = np.ascontiguousarray(f32(24, 3, 16).transpose(1, 0, 2))
    check(fn, [x, f32(16), f32(16)], ["layer_norm_dgamma", "layer_norm_dx"])
    mod = _adjoint(_gelu, [f32(8, 16)])
    base = f32(16, 8)
    got, compiled = _run(mod, [base.T])
    assert _chains(compiled) == ["gelu_tanh_vjp"]
    want, _ = _run(mod, [np.ascontiguousarray(base.T)], specialize=False)
    assert _error(got[0], want[0]) < 1e-6


def test_nan_and_inf_where_numpy_has_them():
    x = f32(4, 16) * 3
    x[1, 3] = np.nan
    x[2, 5] = np.inf
    for fn, ins in ((_ln, [x, f32(16), f32(16)]), (_gelu, [x]), (lambda s: tracer.softmax(s, axis=-1), [x]),
                    (_attention, [np.tile(x[:, None, :8], (1, 8, 1))])):
        mod = _adjoint(fn, ins)
        got, compiled = _run(mod, ins)
        assert _chains(compiled)
        plain, _ = _run(mod, ins, specialize=False)
        for g, p in zip(got, plain, strict=True):
            assert np.array_equal(np.isnan(g), np.isnan(p)) and np.array_equal(np.isinf(g), np.isinf(p))
            fin = np.isfinite(p)
            assert np.allclose(g[fin], p[fin], rtol=1e-4, atol=1e-5 * np.abs(p[fin]).max(initial=1))


def test_the_fused_binding_means_its_chain():
    # the IR stays standard: each fused binding's reference kernel (the chain op by op) gives the kernel's values
    seen = set()
    for fn, ins in ((_ln, [f32(4, 8, 32), f32(32), f32(32)]), (_gelu, [f32(16, 64)]), (_attention, [f32(2, 8, 8)])):
        _, compiled = _run(_adjoint(fn, ins), ins)
        for b in compiled.fn.bindings:
            plan = vjp_chains._plan(b.value) if getattr(b.value, "op", None) == "fused" else None
            if plan is None:
                continue
            seen.add(plan[0])
            xs = tuple(f.data if isinstance(f, ir.Constant) else RNG.standard_normal(f.type.shape).astype(np.float32)
                       for f in b.value.args[0].fields)
            got = vjp_chains.kernel(b.value)(xs)
            assert _error(got, evaluate_unfused(np, b.value.attrs["expr"], xs)) < 1e-5, plan[0]
    assert seen == {"layer_norm_dx", "layer_norm_dgamma", "gelu_tanh_vjp", "masked_softmax_fill", "softmax_vjp_fill"}


def test_what_stays_as_it_was(monkeypatch):
    # float64, arrays below numba_gen.MIN_SIZE, and chains whose intermediates are read elsewhere
    mod = _adjoint(_ln, [f32(4, 32).astype(np.float64), np.ones(32), np.zeros(32)])
    assert _chains(_run(mod, [np.ones((4, 32)), np.ones(32), np.zeros(32)])[1]) == []
    monkeypatch.setattr(numba_gen, "MIN_SIZE", 1 << 20)
    ins = [f32(4, 32), f32(32), f32(32)]
    assert _chains(_run(_adjoint(_ln, ins), ins)[1]) == []
    monkeypatch.setattr(numba_gen, "MIN_SIZE", 0)

    y, g = RNG.random((4, 16), np.float32), f32(4, 16)

    def chain(y, g):
        return y * (g - tracer.sum(g * y, axis=-1, keepdims=True))

    def read_elsewhere(y, g):  # the row sum is returned too: the chain keeps its bindings
        s = tracer.sum(g * y, axis=-1, keepdims=True)
        return y * (g - s), s

    def other_axis(y, g):
        return y * (g - tracer.sum(g * y, axis=0, keepdims=True))

    def two_axes(y, g):  # a sum over both axes is no softmax VJP (the kernel sums rows)
        return y * (g - tracer.sum(g * y, axis=(0, 1), keepdims=True))
    fn = tracer.trace(chain, y, g)["main"]
    assert [b.value.op for b in vjp_chains.rewrite(fn).bindings] == ["fused"]
    for f in (read_elsewhere, other_axis, two_axes):
        fn = tracer.trace(f, y, g)["main"]
        assert vjp_chains.rewrite(fn) is fn


def test_the_rewritten_function_prints_parses_and_runs_as_standard_ir():
    # the module given to the executor is not changed; the function it runs prints as R.fused bindings, parses
    # back, and the parsed text run by the generic kernels (no numba) gives the same gradients
    ins = [f32(4, 8, 32), f32(32), f32(32)]
    mod = _adjoint(_ln, ins)
    before = ir.print_module(mod)
    got, compiled = _run(mod, ins)
    assert _chains(compiled) and ir.print_module(mod) == before
    text = ir.print_module(ir.IRModule({"main_adjoint": compiled.fn}))
    assert text.count("R.fused(") == 2
    again, _ = _run(ir.parse(text), ins, specialize=False)
    for a, b in zip(got, again, strict=True):
        assert _error(a, b) < 1e-5


def test_gpt_gradients_against_the_numpy_path(monkeypatch):
    # examples/train_gpt.py's GPT (tanh GELU, 2 blocks): 5 layer norms, 2 attentions, 2 MLPs
    from examples.train_gpt import GPT
    from nn import functional as F

    model = GPT(16, 8, 32, 2, 2)
    for block in model.blocks:
        block.mlp[1].approximate = "tanh"
    ids = np.random.default_rng(0).integers(0, 16, (4, 9))
    x, y = ids[:, :-1], ids[:, 1:]

    def loss_numba(x, y):
        return F.cross_entropy(model(x).reshape(-1, 16), y.reshape(-1))

    def loss_numpy(x, y):  # another function: a step of its own, made with the NumPy kernels
        return F.cross_entropy(model(x).reshape(-1, 16), y.reshape(-1))
    fast = autodiff.value_and_grad(loss_numba, wrt=list(model.parameters()))
    v1, g1 = fast(x, y)
    assert _chains(fast.last.step) == sorted(["layer_norm_dx", "layer_norm_dgamma"] * 5
                                             + ["masked_softmax_fill", "softmax_vjp_fill", "gelu_tanh_vjp"] * 2)
    monkeypatch.setattr(numba_hook, "ENABLED", False)
    plain = autodiff.value_and_grad(loss_numpy, wrt=list(model.parameters()))
    v2, g2 = plain(x, y)
    assert _chains(plain.last.step) == []
    assert abs(float(np.asarray(v1)) - float(np.asarray(v2))) <= 1e-6 * abs(float(np.asarray(v2)))
    for a, b in zip(g1, g2, strict=True):
        assert _error(np.asarray(a), np.asarray(b)) < 1e-4


def test_parallel_forms_agree_with_the_serial_ones(monkeypatch):
    # more than one thread runs the prange kernels (ir.runtime.numba_threads): the same values row for row
    from ir.runtime import numba_vjp

    cases = ((_ln, [f32(4, 8, 32), f32(32), f32(32)]), (_gelu, [f32(16, 64)]), (_attention, [f32(2, 3, 8, 8)]))
    for fn, ins in cases:
        mod = _adjoint(fn, ins)
        serial, _ = _run(mod, ins)
        monkeypatch.setattr(numba_vjp, "use_parallel", lambda size, rows=False: True)
        parallel, compiled = _run(mod, ins)
        monkeypatch.undo()
        monkeypatch.setattr(numba_gen, "MIN_SIZE", 0)
        assert _chains(compiled)
        for a, b in zip(serial, parallel, strict=True):
            assert np.array_equal(a, b, equal_nan=True)


def test_dgamma_column_blocks_give_the_same_bits():
    # layer_norm_dgamma's column blocks (one per thread in its prange form): each column's float64 additions in
    # row order however the columns are split, so serial and parallel agree bit for bit; within 1e-6 of float64
    from ir.runtime import numba_vjp

    module = numba_vjp._module()

    def run(x, g, kernel, blocks):
        acc = np.zeros(x.shape[1])
        kernel(x, g, 1e-5, np.empty((x.shape[0], 2)), acc, blocks)
        return acc
    forms = ((module.layer_norm_dgamma_serial, 3), (module.layer_norm_dgamma_parallel, 2),
             (module.layer_norm_dgamma_parallel, 40))
    x, g = f32(300, 40) * 3 + 1, f32(300, 40)
    one = run(x, g, module.layer_norm_dgamma_serial, 1)
    for kernel, blocks in forms:
        assert np.array_equal(run(x, g, kernel, blocks), one)
    x64 = x.astype(np.float64)
    c = x64 - x64.mean(-1, keepdims=True)
    want = (g * (c / np.sqrt((c * c).mean(-1, keepdims=True) + 1e-5))).sum(0)
    assert _error(one, want) < 1e-12
    g[9, 3], g[11, 5] = np.nan, np.inf
    one = run(x, g, module.layer_norm_dgamma_serial, 1)
    assert np.isnan(one[3]) and np.isinf(one[5]) and np.isfinite(np.delete(one, [3, 5])).all()
    for kernel, blocks in forms:
        assert np.array_equal(run(x, g, kernel, blocks), one, equal_nan=True)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_take_backward_loop_gives_add_at_bits(dtype):
    # the embedding gradient: np.add.at's additions in its order, so the same bits (repeats, -0.0, NaN, inf,
    # negative indices, the wrap and clip modes); an index out of range raises as the kernel does
    from ir.ops.registry import get_op

    reference = get_op("grad.take_backward").kernel
    data = RNG.standard_normal((6, 40, 8)).astype(dtype) * RNG.choice([1, 1e-30, 1e30], (6, 40, 8)).astype(dtype)
    data[0, :5] = -0.0
    data[1, 2, 3], data[2, 4, 5] = np.nan, np.inf
    for mode, low, high in (("fast", -10, 10), ("wrap", -30, 30), ("clip", -30, 30)):
        indices = RNG.integers(low, high, (6, 40))
        call = tracer.trace(lambda g, i, mode=mode: apply("grad.take_backward", [g, i], shape=(10, 8), axis=0,
                                                          mode=mode), data, indices)["main"].bindings[-1].value
        run = vjp_chains.kernel(call)
        assert run is not None
        got, want = run(data, indices), reference(np, data, indices, shape=(10, 8), axis=0, mode=mode)
        assert got.dtype == want.dtype and np.array_equal(got.view(np.uint8), want.view(np.uint8)), mode
    with pytest.raises(IndexError, match="out of range"):
        vjp_chains.kernel(call.__class__(call.op, call.args, {**call.attrs, "mode": "fast"}, call.type))(
            data, np.full((6, 40), 10))


def test_row_kernels_count_row_weight_against_the_parallel_size(monkeypatch):
    from ir.runtime import numba_threads

    monkeypatch.setattr(numba_threads, "threads", lambda: 2)
    monkeypatch.setattr(numba_threads, "ROW_WEIGHT", 2)
    size = numba_threads.PARALLEL_SIZE // 2
    assert numba_threads.use_parallel(size, rows=True) and not numba_threads.use_parallel(size)
    monkeypatch.setattr(numba_threads, "threads", lambda: 1)
    assert not numba_threads.use_parallel(size * 4, rows=True)
