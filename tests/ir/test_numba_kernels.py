"""numba kernels (ir.runtime.numba_*): float32 results against float64 on the op table, forward and adjoint,
with fusion on and off; NaN/inf as NumPy; the kernel files and their cache; TRACEGRAD_KERNELS=numpy.

`python -m tests.ir.test_numba_kernels` measures the whole op table (the tests take a subset)."""
import os
import subprocess
import sys

import numpy as np
import pytest

import ir
import tracer
from autodiff import Gradient
from ir.transform.fuse import ELEMENTWISE, FuseElementwise
from tests.autodiff.test_vjp_cases import scalarized
from tests.cases import all_cases

numba = pytest.importorskip("numba")
from ir.runtime import numba_composite, numba_gen, numba_hook  # noqa: E402 - after the skip

pytestmark = pytest.mark.skipif(not numba_hook.ENABLED, reason="TRACEGRAD_KERNELS=numpy")
FUSE = FuseElementwise(force=True)
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COVERED = ELEMENTWISE | {"nn.softmax", "nn.log_softmax", "nn.layer_norm"}
SUBSET = ("gelu", "softmax", "layer_norm", "sigmoid", "tanh", "exp", "where", "maximum", "relu", "divide")


def _float32_cases():
    return [c for c in all_cases() if set(c.ops) & COVERED
            and any(np.asarray(a).dtype == np.float32 for a in c.inputs)
            and all(np.asarray(a).dtype.kind in "fb" for a in c.inputs)]


def _flat(out):
    if isinstance(out, tuple | list):
        return [a for o in out for a in _flat(o)]
    return [np.asarray(out)]


def _error(got, want):
    """max |got - want| / max |want| over the finite values; inf where NaN/inf positions disagree."""
    got, want = got.astype(np.float64), np.asarray(want, np.float64)
    fin = np.isfinite(want)
    if not np.array_equal(got[~fin], want[~fin], equal_nan=True) or not np.isfinite(got[fin]).all():
        return np.inf
    scale = np.abs(want[fin]).max() if fin.any() else 0.0
    return float(np.abs(got[fin] - want[fin]).max() / scale) if scale > 0 else float(np.abs(got[fin]).max())


def _run(mod, name, args, numba_on, specialize=True):
    saved = numba_gen.MIN_SIZE
    numba_gen.MIN_SIZE = 0 if numba_on else 1 << 62
    try:
        ex = ir.Executor(mod)
        ex.specialize_kernels = specialize
        return _flat(ex[name](*args))
    finally:
        numba_gen.MIN_SIZE = saved


def errors(case, fused: bool, adjoint: bool):
    """(numba's error, NumPy's error) of the float32 case against float64, per the `_error` measure."""
    ins32 = [np.asarray(a) for a in case.inputs]
    ins64 = [a.astype(np.float64) if a.dtype.kind == "f" else a for a in ins32]
    if adjoint:
        def build(ins):
            mod = tracer.trace(scalarized(case, ins), *ins)
            params = [p for p in mod["main"].params if p.type.is_float]
            return ir.transform.cleanup()(Gradient("main", require_grads=params)(mod))
        name = "main_adjoint"
    else:
        def build(ins):
            return tracer.trace(lambda *xs: case.fn(*xs, **case.kwargs), *ins)
        name = "main"
    mod32 = FUSE(build(ins32)) if fused else build(ins32)
    want = _run(build(ins64), name, ins64, numba_on=False, specialize=False)
    got = _run(mod32, name, ins32, numba_on=True)
    plain = _run(mod32, name, ins32, numba_on=False)
    return (max(_error(g, w) for g, w in zip(got, want, strict=True)),
            max(_error(g, w) for g, w in zip(plain, want, strict=True)))


CASES = [c for c in _float32_cases() if any(s in c.name for s in SUBSET)][:24]


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "unfused"])
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_float32_within_1e6_of_float64_or_numpy(case, fused):
    for adjoint in (False, True) if case.grad else (False,):
        mine, numpy_err = errors(case, fused, adjoint)
        assert mine <= max(1e-6, 2 * numpy_err), (case.name, adjoint, mine, numpy_err)


def test_subset_reaches_the_numba_kernels():
    # a test of kernels that never ran could not fail: the subset must have made chain and row kernels
    assert len(CASES) >= 10
    assert numba_gen.chain_runner.cache_info().currsize > 0 or _made_one()


def _made_one():
    x = np.ones((4, 8), np.float32)
    return numba_gen.chain_runner("exp(x0)", numba_gen.signature((x,))) is not None


def _chain(expr, *xs):
    run = numba_gen.chain_runner(expr, numba_gen.signature(xs))
    assert run is not None, expr
    return run(xs)


def test_nan_inf_and_signed_zero_as_numpy():
    x = np.array([[np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-30, -1e-30, 88.7, 89.0, -104.0, 20.0, -0.3]] * 4,
                 np.float32)
    with np.errstate(all="ignore"):
        for expr, ref in [("exp(x0)", np.exp), ("tanh(x0)", np.tanh), ("nn.relu(x0)", lambda a: np.maximum(a, 0)),
                          ("maximum(x0, const(0.0, 'float32'))", lambda a: np.maximum(a, np.float32(0))),
                          ("sigmoid(x0)", lambda a: 1 / (1 + np.exp(-a.astype(np.float64)))),
                          ("divide(x0, x0)", lambda a: a / a), ("log(x0)", np.log), ("sqrt(x0)", np.sqrt)]:
            got = _chain(expr, x)
            want = np.asarray(ref(x)).astype(np.float32)
            np.testing.assert_allclose(got, want, rtol=2e-7, atol=1e-37, err_msg=expr)
            assert np.array_equal(np.signbit(got[np.isfinite(got)]), np.signbit(want[np.isfinite(got)])), expr


def test_broadcast_forms_and_fallbacks():
    rng = np.random.default_rng(0)
    full, row = rng.standard_normal((3, 4, 5)).astype(np.float32), rng.standard_normal((5,)).astype(np.float32)
    col, tile = rng.standard_normal((3, 4, 1)).astype(np.float32), rng.standard_normal((4, 5)).astype(np.float32)
    s = np.float32(2.0).reshape(())
    got = _chain("add(multiply(x0, x1), subtract(x2, divide(x3, x4)))", full, row, col, tile, s)
    np.testing.assert_allclose(got, full * row + (col - tile / s), rtol=1e-6)
    middle = np.ones((3, 1, 5), np.float32)  # a broadcast over a middle axis: NumPy's program runs it
    assert numba_gen.chain_runner("add(x0, x1)", numba_gen.signature((full, middle))) is None
    half = full.astype(np.float16)
    assert numba_gen.chain_runner("exp(x0)", numba_gen.signature((half,))) is None


def test_into_writes_the_dying_input_and_parallel_form_agrees():
    x = np.linspace(-3, 3, numba_gen.PARALLEL_SIZE * 2, dtype=np.float32).reshape(256, -1)
    want = np.tanh(x) * x
    expr = "multiply(tanh(x0), x0)"
    run = numba_gen.chain_runner(expr, numba_gen.signature((x,)))
    module = sys.modules[run.keywords["kernel"].py_func.__module__]
    both = np.empty_like(x), np.empty_like(x)
    module.serial(x, both[0])
    module.parallel(x, both[1])  # the prange form, whatever this process's thread count picks
    assert np.array_equal(both[0], both[1])
    got = numba_hook.into((x,), expr, 0)
    assert got is x
    np.testing.assert_allclose(got, want, rtol=2e-7, atol=1e-7)
    np.testing.assert_array_equal(got, both[0])


def test_thread_count_follows_blas_and_one_thread_runs_serial_kernels():
    code = ("import os, numba, numpy as np; from ir.runtime import numba_gen as g, numba_threads as t;"
            "x = np.ones((512, 512), np.float32); run = g.chain_runner('exp(x0)', g.signature((x,)));"
            "print(t.threads(), run.keywords['kernel'].py_func.__name__, numba.config.NUMBA_NUM_THREADS,"
            "'OMP_WAIT_POLICY' in os.environ)")
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("NUMBA_", "OMP_", "OPENBLAS_", "MKL_", "GOMP_"))}
    rows = []
    for extra in ({"OPENBLAS_NUM_THREADS": "1"}, {"OMP_NUM_THREADS": "2", "NUMBA_NUM_THREADS": "1"},
                  {"OMP_NUM_THREADS": "2"}):
        env = {**clean, **extra, "PYTHONPATH": ROOT}
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=ROOT,
                             check=True)
        rows.append(out.stdout.split())
    assert rows[0][:2] == ["1", "serial"] and rows[1][:2] == ["1", "serial"]
    n, name, limit, left = rows[2]
    assert int(n) == min(2, int(limit)) and name == ("parallel" if int(n) > 1 else "serial")
    assert left == "False"  # the pool's wait policy is not left in the environment


def test_row_kernels_against_numpy():
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((64, 300)) * 10).astype(np.float32)  # above numba_gen.MIN_SIZE elements
    g, b = rng.standard_normal(300).astype(np.float32), rng.standard_normal(300).astype(np.float32)
    t = ir.TensorType(x.shape, "float32")
    for op, attrs, args, ref in [
            ("nn.softmax", {"axis": -1}, (x,), lambda: np.exp(x - x.max(-1, keepdims=True)) /
             np.exp(x - x.max(-1, keepdims=True)).sum(-1, keepdims=True)),
            ("nn.log_softmax", {"axis": 1}, (x,), lambda: x - x.max(-1, keepdims=True) - np.log(
                np.exp(x - x.max(-1, keepdims=True)).sum(-1, keepdims=True))),
            ("nn.layer_norm", {"axes": (-1,), "epsilon": 1e-5}, (x, g, b), lambda: (x - x.mean(-1, keepdims=True))
             / np.sqrt(x.var(-1, keepdims=True) + 1e-5) * g + b)]:
        types = [ir.TensorType(a.shape, "float32") for a in args]
        run = numba_composite.composite(op, types, t, attrs)
        np.testing.assert_allclose(run(*args), ref(), rtol=2e-6, atol=2e-6, err_msg=op)
    assert numba_composite.composite("nn.softmax", [t], t, {"axis": 0}) is None  # not the last axis: NumPy


def test_kernel_files_in_the_cache_directory(tmp_path):
    code = ("import numpy as np; from ir.runtime import numba_gen as g; x = np.ones((8, 8), np.float32);"
            "print(float(g.chain_runner('exp(x0)', g.signature((x,)))((x,))[0, 0]))")
    env = {**os.environ, "TRACEGRAD_CACHE": str(tmp_path), "PYTHONPATH": ROOT}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=ROOT, check=True)
    assert abs(float(out.stdout) - np.e) < 1e-6
    files = sorted(p.name for p in (tmp_path / "kernels").iterdir())
    assert any(f.startswith("chain_") and f.endswith(".py") for f in files)
    assert any(p.suffix == ".nbi" for p in (tmp_path / "kernels" / "__pycache__").iterdir())  # numba's cache


def test_tracegrad_kernels_numpy_gives_the_plain_path():
    code = ("import ir; from ir.ops.registry import get_op; from ir.runtime import fused_cpu, numba_hook;"
            "print(numba_hook.ENABLED, get_op('fused').kernel is fused_cpu._fused_kernel)")
    env = {**os.environ, "TRACEGRAD_KERNELS": "numpy", "PYTHONPATH": ROOT}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.split() == ["False", "True"]
    assert ir.ops.registry.get_op("fused").kernel is not ir.runtime.fused_cpu._fused_kernel  # here: numba's


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_sgd_update_as_a_numba_loop_gives_numpys_bits(dtype, monkeypatch):
    import nn
    from ir.runtime import numba_optim
    from nn import optim

    calls = []
    monkeypatch.setattr(numba_optim, "MIN_SIZE", 0)  # a small weight through the loop too
    real, real_all = numba_optim.sgd, numba_optim.sgd_all  # plain SGD takes sgd_all (all parameters in one call)
    monkeypatch.setattr(numba_optim, "sgd", lambda *a, **k: calls.append(real(*a, **k)) or calls[-1])
    monkeypatch.setattr(numba_optim, "sgd_all", lambda *a, **k: calls.append(real_all(*a, **k)) or calls[-1])
    rng = np.random.default_rng(3)
    w0 = rng.standard_normal((33, 17)).astype(dtype)
    grads = [rng.standard_normal((33, 17)).astype(dtype) for _ in range(3)]
    grads[2][0, :3] = [np.nan, np.inf, 0.0]
    configs = [(optim.SGD, dict(lr=0.1)), (optim.SGD, dict(lr=0.1, momentum=0.9, dampening=0.2, weight_decay=0.01)),
               (optim.SGD, dict(lr=0.1, momentum=0.9, nesterov=True, maximize=True))]
    for cls, kw in configs:
        out = []
        for on in (True, False):
            monkeypatch.setattr(numba_hook, "ENABLED", on)
            w = nn.Parameter(w0.copy())
            opt = cls([w], **kw)
            for g in grads:
                opt.step([g])
            out.append((w.numpy().copy(), [np.asarray(v).copy() for v in opt.state[0].values() if hasattr(v, "shape")]))
        (a, sa), (b, sb) = out
        np.testing.assert_array_equal(a, b, err_msg=f"{cls.__name__} {kw}")
        for x, y in zip(sa, sb, strict=True):
            np.testing.assert_array_equal(x, y, err_msg=f"{cls.__name__} {kw} state")
    # on: every step through a numba loop; off: the momentum configurations ask numba's loop, which declines,
    # while plain SGD goes straight to NumPy's ufuncs (Optimizer._update_all)
    assert calls.count(True) == 3 * len(configs) and calls.count(False) == 3 * (len(configs) - 1)


if __name__ == "__main__":  # the whole op table: the largest error of each kind
    worst = {}
    for case in _float32_cases():
        for fused in (False, True):
            for adjoint in (False, True) if case.grad else (False,):
                try:
                    mine, plain = errors(case, fused, adjoint)
                except Exception as e:  # noqa: BLE001 - a report, not a test
                    print("skipped", case.name, type(e).__name__, e)
                    continue
                key = ("fused" if fused else "unfused", "adjoint" if adjoint else "forward")
                worst.setdefault(key, []).append((mine, plain, case.name))
    for key, rows in sorted(worst.items()):
        over = [r for r in rows if r[0] > max(1e-6, 2 * r[1])]
        top = max(rows)
        print(key, f"{len(rows)} cases; largest numba error {top[0]:.2e} ({top[2]}, NumPy f32 {top[1]:.2e});",
              f"over max(1e-6, 2x NumPy's): {[(f'{a:.1e}', f'{b:.1e}', n) for a, b, n in over]}")
