"""The q/k/v gradient as one stack (ir.runtime.concat_heads): concat((reshape(p1), ..., reshape(pn)), axis=-1) with
each reshape merging trailing axes becomes reshape(stack(p, axis=k)); the same bits as the concat, on the NumPy
path too (no numba needed), in planned storage (split over two threads or not); what stays as it was."""
import numpy as np
import pytest

import ir
import tracer
from ir.runtime import concat_heads, specialize, split2, storage
from tests.ir.adjoints import weighted_adjoint

RNG = np.random.default_rng(3)


def _heads(x, proj, w):
    # a fused q/k/v projection split into heads, as attention does: the gradient of qkv is the concat
    qkv = x @ proj
    b, t, c3 = qkv.shape
    c = c3 // 3
    parts = [qkv[:, :, i * c:(i + 1) * c].reshape(b, t, 4, c // 4).permute(0, 2, 1, 3) for i in range(3)]
    q, k, v = parts
    return ((q * w) @ k.permute(0, 1, 3, 2)) @ v


def _adjoint(fn, ins):
    return ir.transform.optimize()(weighted_adjoint(fn, ins, RNG))


def _run(mod, ins, specialize_kernels=True):
    ex = ir.Executor(mod)
    ex.specialize_kernels = specialize_kernels  # False: the generic kernels, no rewrite
    f = ex["main_adjoint"]
    return [np.asarray(a) for a in _flat(f(*ins))], f


def _flat(out):
    if isinstance(out, tuple | list):
        return [a for o in out for a in _flat(o)]
    return [out]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_qkv_gradient_is_one_stack_with_the_concats_bits(monkeypatch, threads, dtype):
    monkeypatch.setattr(split2, "threads", lambda: threads)
    monkeypatch.setattr(split2, "MIN_SIZE", 0)
    monkeypatch.setattr(storage, "MIN_BYTES", 0)
    x = RNG.standard_normal((6, 8, 16)).astype(dtype)
    x[0, 0, :3] = [np.nan, np.inf, -0.0]
    ins = [x, RNG.standard_normal((16, 48)).astype(dtype), np.asarray(0.5, dtype)]
    mod = _adjoint(_heads, ins)
    assert any(b.value.op == "concat" for b in mod["main_adjoint"].bindings if hasattr(b.value, "op"))
    got, compiled = _run(mod, ins)
    want, _ = _run(mod, ins, specialize_kernels=False)
    ops = [getattr(b.value, "op", None) for b in compiled.fn.bindings]
    assert "concat" not in ops and ops.count("stack") == 1
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape and g.tobytes() == w.tobytes()
    kernels = [getattr(fn, "func", fn) for _, fn, *_ in compiled.instrs]
    assert (specialize._stack_split in kernels) == (threads > 1)
    stack = next(i for i, op in enumerate(compiled.instr_ops) if op == "stack")
    assert stack in compiled.storage  # planned: no new array each call


def test_the_rewritten_function_prints_parses_and_runs():
    ins = [RNG.standard_normal((2, 8, 16)).astype("float32"), RNG.standard_normal((16, 24)).astype("float32"),
           np.asarray(0.5, "float32")]
    mod = _adjoint(_heads, ins)
    before = ir.print_module(mod)
    got, compiled = _run(mod, ins)
    assert ir.print_module(mod) == before
    text = ir.print_module(ir.IRModule({"main_adjoint": compiled.fn}))
    assert "R.stack(" in text and "R.concat(" not in text
    again, _ = _run(ir.parse(text), ins, specialize_kernels=False)
    for a, b in zip(got, again, strict=True):
        assert np.array_equal(a, b, equal_nan=True)


def test_what_stays_as_it_was():
    a, b = RNG.standard_normal((2, 3, 4, 5)).astype("float32"), RNG.standard_normal((2, 3, 4, 5)).astype("float32")

    def rewritten(a, b):
        return tracer.concat([a.reshape(2, 3, 20), b.reshape(2, 3, 20)], axis=-1)

    def first_axis(a, b):  # a concat over another axis
        return tracer.concat([a.reshape(2, 3, 20), b.reshape(2, 3, 20)], axis=1)

    def read_elsewhere(a, b):  # a reshape also returned: it stays, and so does the concat
        r = a.reshape(2, 3, 20)
        return tracer.concat([r, b.reshape(2, 3, 20)], axis=-1), r

    def not_trailing(a, b):  # (2, 3, 4, 5) -> (6, 20) merges leading axes too
        return tracer.concat([a.reshape(6, 20), b.reshape(6, 20)], axis=-1)

    def shapes_differ(a, b):
        return tracer.concat([a.reshape(2, 3, 20), b[:, :, :2].reshape(2, 3, 10)], axis=-1)

    fn = tracer.trace(rewritten, a, b)["main"]
    new = concat_heads.rewrite(fn)
    assert [bd.value.op for bd in new.bindings] == ["stack", "reshape"]
    run = ir.Executor(ir.IRModule({"main": new}))["main"]
    assert np.array_equal(run(a, b), np.concatenate([a.reshape(2, 3, 20), b.reshape(2, 3, 20)], -1))
    for f in (first_axis, read_elsewhere, not_trailing, shapes_differ):
        fn = tracer.trace(f, a, b)["main"]
        assert concat_heads.rewrite(fn) is fn, f.__name__


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_numba_stack_gives_np_stack_bits(monkeypatch, dtype):
    pytest.importorskip("numba")
    from ir.runtime import numba_gen, numba_hook, numba_stack
    from ir.types import TensorType

    monkeypatch.setattr(numba_gen, "MIN_SIZE", 0)
    if not numba_hook.ENABLED:
        pytest.skip("TRACEGRAD_KERNELS=numpy")
    numba_hook.ready()  # numba-sync (conftest): loads here
    ms = [RNG.standard_normal((3, 4, 5, 6)).astype(dtype) for _ in range(3)]
    ms[0][0, 0, 0, :3] = [np.nan, np.inf, -0.0]
    sources = ([m.transpose(0, 2, 1, 3) for m in ms],  # attention's views: read in their arrays' order
               [np.ascontiguousarray(m.transpose(0, 2, 1, 3)) for m in ms],  # C-ordered (B, T, H, D)
               [m.transpose(0, 2, 1, 3)[:, :, :, ::-1] for m in ms])  # any other layout
    out_type = TensorType((3, 5, 3, 4, 6), dtype)
    run = numba_stack.kernel([TensorType((3, 5, 4, 6), dtype)] * 3, out_type, 2)
    assert run is not None
    for ps in sources:
        want = np.stack(ps, axis=2)
        got = run(ps)
        assert got.tobytes() == want.tobytes()
        out = np.full(out_type.shape, np.nan, dtype)
        assert run(ps, out=out) is out and out.tobytes() == want.tobytes()
    assert numba_stack.kernel([TensorType((3, 5, 4, 6), dtype)] * 3, out_type, 1) is None  # another axis
    assert numba_stack.kernel([TensorType((3, 5, 4, 6), "int32")] * 3, TensorType((3, 5, 3, 4, 6), "int32"), 2) is None


def test_compiled_step_takes_the_numba_stack(monkeypatch):
    pytest.importorskip("numba")
    from ir.runtime import numba_gen, numba_hook, numba_stack

    if not numba_hook.ENABLED:
        pytest.skip("TRACEGRAD_KERNELS=numpy")
    monkeypatch.setattr(numba_gen, "MIN_SIZE", 0)
    ins = [RNG.standard_normal((6, 8, 16)).astype("float32"), RNG.standard_normal((16, 48)).astype("float32"),
           np.asarray(0.5, "float32")]
    mod = _adjoint(_heads, ins)
    got, compiled = _run(mod, ins)
    want, _ = _run(mod, ins, specialize_kernels=False)
    assert numba_stack._run in [getattr(fn, "func", fn) for _, fn, *_ in compiled.instrs]
    for g, w in zip(got, want, strict=True):
        assert g.tobytes() == w.tobytes()
