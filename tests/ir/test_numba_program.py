"""The whole-function numba program (ir.runtime.numba_program): same values, gradients, structure and dtypes as
the executor's per-op NumPy path (float64 to 1e-12, float32 no further from float64 than NumPy's float32 path
or 1e-6), NaN/inf as NumPy, broadcasting edge shapes, small nn models (cross-entropy with integer targets,
ignore_index, MSE), and the fallbacks (an op it does not emit, a large array, an argument that is not
C-contiguous, a target out of range)."""
import os
import subprocess
import sys

import numpy as np
import pytest

import autodiff
import ir
import nn
import tracer
from autodiff import Gradient
from benchmarks.step_speed import make_problem, tracegrad_step
from nn import functional as F

numba = pytest.importorskip("numba")
from ir.runtime import numba_hook, numba_program  # noqa: E402 - after the skip

pytestmark = [pytest.mark.skipif(not numba_hook.ENABLED, reason="TRACEGRAD_KERNELS=numpy"),
              # the MLP step is made anew per dtype and path, on purpose
              pytest.mark.filterwarnings("ignore::autodiff.StepRemadeWarning")]


@pytest.fixture(autouse=True)
def _at_once(monkeypatch):
    monkeypatch.setattr(numba_program, "HOT_CALLS", 1)  # the program from the executor's generated call on
    monkeypatch.setattr(numba_program, "TRIAL_CALLS", 0)  # and it keeps the slot (the timed trial: tests below)


def _flat(out):
    if isinstance(out, tuple | list):
        return [a for o in out for a in _flat(o)]
    return [out]


def _structure(out):
    if isinstance(out, tuple | list):
        return (type(out).__name__, [_structure(o) for o in out])
    return (type(out).__name__, out.shape, out.dtype.name)


def _served(call, step_of):
    """call()'s result once a call of it runs the program (installed, and the peak bytes of these arguments
    counted again after the install: the interpreter ran that call), or after a few calls when none serves."""
    for _ in range(6):
        call()
        step = step_of()
        if step.program is not None and step._peaks:
            break
    return call()


def _calls(f, args):
    return _served(lambda: f(*args), lambda: f)


def _executor(mod, name, program):
    numba_program.ENABLED = program
    try:
        fn = ir.Executor(mod)[name]
        fn.source  # noqa: B018 - the generated function (and the program) is made now, under this switch
    finally:
        numba_program.ENABLED = True
    return fn


def _both(mod, args, name="main"):
    """(program's results, NumPy path's results) of `name`, each after three calls; the program must serve."""
    new, old = _executor(mod, name, True), _executor(mod, name, False)
    got, want = _calls(new, args), _calls(old, args)
    assert new.program is not None, "the program should serve this function"
    assert old.program is None
    assert _structure(got) == _structure(want)
    return _flat(got), _flat(want)


def _error(got, want):
    """max |got - want| / max |want| over finite values; inf where the NaN/inf positions disagree."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    fin = np.isfinite(want)
    if not np.array_equal(got[~fin], want[~fin], equal_nan=True) or not np.isfinite(got[fin]).all():
        return np.inf
    scale = np.abs(want[fin]).max() if fin.any() else 0.0
    return float(np.abs(got[fin] - want[fin]).max() / scale) if scale > 0 else float(np.abs(got[fin]).max())


def _check(fn, *inputs, grad=True):
    """fn traced on float64 and float32 inputs, forward and (grad) adjoint: the program against the NumPy path."""
    for adjoint in (False, True) if grad else (False,):
        results = {}
        for dtype in ("float64", "float32"):
            ins = [np.asarray(a, dtype) if np.asarray(a).dtype.kind == "f" else np.asarray(a) for a in inputs]
            mod = tracer.trace(_scalarized(fn, dtype) if adjoint else fn, *ins)
            name = "main"
            if adjoint:
                params = [p for p in mod["main"].params if p.type.is_float]
                mod = ir.transform.cleanup()(Gradient("main", require_grads=params)(mod))
                name = "main_adjoint"
            results[dtype] = _both(mod, ins, name)
        (got64, want64), (got32, want32) = results["float64"], results["float32"]
        for g, w in zip(got64, want64, strict=True):
            assert _error(g, w) <= 1e-12, (adjoint, g, w)
        for g32, w32, w64 in zip(got32, want32, want64, strict=True):
            assert g32.dtype == w32.dtype
            mine, numpys = _error(g32, w64), _error(w32, w64)
            assert mine <= max(1e-6, 2 * numpys), (adjoint, mine, numpys)


def _scalarized(fn, dtype):
    """sum(out_i * w_i) with fixed weights (array constants of the program): one vector-Jacobian product each."""
    def loss(*xs):
        outs = _flat(fn(*xs))
        rng = np.random.default_rng(2)
        total = None
        for o in outs:
            term = (o * tracer.tensor(rng.uniform(0.5, 1.5, o.shape).astype(dtype))).sum()
            total = term if total is None else total + term
        return total
    return loss


RNG = np.random.default_rng(0)


def _r(*shape, lo=-2.0, hi=2.0):
    return RNG.uniform(lo, hi, shape)


def _mlp_step(dtype):
    """benchmarks' tiny MLP 64-64-64-10 at batch 32: value_and_grad of the one-hot cross-entropy."""
    params, x, oh = make_problem([64, 64, 64, 10], 32)
    vg = tracegrad_step([p.astype(dtype) for p in params])
    return vg, x.astype(dtype), oh.astype(dtype)


def _step_results(dtype, program):
    numba_program.ENABLED = program
    try:
        vg, x, oh = _mlp_step(dtype)
        step_of = lambda: next(iter(vg.cache.values()))[0].step  # noqa: E731
        value, grads = _served(lambda: vg(x, oh), step_of)
    finally:
        numba_program.ENABLED = True
    step = step_of()
    return [value.numpy()] + [g.numpy() for g in grads], step


def test_tiny_mlp_step_as_numpy():
    want64, old = _step_results("float64", False)
    got64, new = _step_results("float64", True)
    assert old.program is None and new.program is not None
    for g, w in zip(got64, want64, strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype
        assert _error(g, w) <= 1e-12
    want32, _ = _step_results("float32", False)
    got32, _ = _step_results("float32", True)
    assert got32[0].shape == () and got32[0].dtype == np.float32
    for g, w32, w64 in zip(got32, want32, want64, strict=True):
        assert g.dtype == np.float32
        assert _error(g, w64) <= max(1e-6, 2 * _error(w32, w64))


def test_tiny_mlp_peak_bytes_counts_the_program():
    vg, x, oh = _mlp_step("float32")
    step_of = lambda: next(iter(vg.cache.values()))[0].step  # noqa: E731
    _served(lambda: vg(x, oh), step_of)
    step = step_of()
    assert step.program is not None
    args = x.nbytes + oh.nbytes + sum(w.nbytes for w in vg.leaves)
    results = 4 + sum(w.nbytes for w in vg.leaves)  # the loss and one gradient per weight
    assert vg.stats.peak_bytes == args + step.program.own_peak
    assert step.program.own_peak >= results


def test_elementwise_broadcasting_and_reductions():
    _check(lambda a, b, c: (tracer.exp(a) * b - c / (1.0 + tracer.tanh(a) ** 2)).sum(axis=1, keepdims=True),
           _r(3, 4), _r(1, 4), _r(3, 1, lo=1.0, hi=2.0))
    _check(lambda a, b: tracer.maximum(a, b).mean(axis=0) + tracer.minimum(a, 0.5).sum(),
           _r(5, 1, 3), _r(4, 1))
    _check(lambda a: tracer.where(a > 0.3, tracer.sigmoid(a), tracer.log(a * a + 1.0)).mean(), _r(2, 3, 4))


def test_softmax_reshape_permute_and_astype():
    _check(lambda a: tracer.softmax(a, dim=-1) * tracer.log_softmax(a, dim=-1), _r(4, 7))
    _check(lambda a, b: tracer.reshape(tracer.permute_dims(a, (2, 0, 1)), (4, 6)) @ b, _r(2, 3, 4), _r(6, 5))
    _check(lambda a, b: (a.T @ b).sum(), _r(6, 3), _r(6, 2))
    _check(lambda a: tracer.astype(tracer.astype(a, "float64") * 2.0, "float32") + 1.0, _r(3, 3), grad=False)
    _check(lambda a: tracer.broadcast_to(a, (3, 2, 4)) * 2.0, _r(2, 1))


def test_flat_loops_and_hoisted_polynomials_under_short_rows():
    # rows shorter than SHORT_ROW: the float32 polynomials over full-shape arrays get a flat loop of their own,
    # the rest of the expression (a broadcast read) its loop nest; without a broadcast read, one flat loop
    x = np.array([[np.nan, 1.0, -2.0, 90.0, -90.0], [np.inf, -np.inf, 0.0, -0.0, 1e-30]] * 3)
    col = _r(6, 1)

    def f(a, c):
        return (tracer.exp(a) * c - tracer.tanh(a) + tracer.sigmoid(a) * c, tracer.exp(a) + a * 2.0,
                F.gelu(a) * c)
    with np.errstate(all="ignore"):
        for dtype in ("float64", "float32"):
            a, c = x.astype(dtype), col.astype(dtype)
            mod = tracer.trace(f, a, c)
            if dtype == "float32":
                text = numba_program.source(mod["main"])[0]
                assert "exp32(" in text and ".reshape(30)" in text
            got, want = _both(mod, [a, c])
            for g, w in zip(got, want, strict=True):
                assert np.array_equal(np.isnan(g), np.isnan(w)), (g, w)
                assert _error(g, w) <= (1e-12 if dtype == "float64" else 1e-6), (g, w)
    _check(lambda a, c: (tracer.exp(a) * c).sum() + tracer.tanh(a * c).mean(), _r(6, 5), _r(6, 1))


def test_zero_dim_and_size_one_shapes():
    _check(lambda a, b: a * b + tracer.exp(b), _r(), _r(1, 1))
    _check(lambda a, b: (a - b).sum(axis=0), _r(1, 5), _r(3, 1))
    _check(lambda a: a.sum(), _r(1))


def test_nan_and_inf_as_numpy():
    x = np.array([[np.nan, 1.0, -2.0], [np.inf, -np.inf, 0.0], [3.0, -0.0, 1e-30], [-50, -80, -np.inf]])

    def f(a):
        return (tracer.relu(a), tracer.maximum(a, 0.0), tracer.exp(a), tracer.log(a), tracer.softmax(a, dim=-1),
                tracer.log_softmax(a, dim=-1), a.sum(axis=1), tracer.sigmoid(a), tracer.tanh(a), a / a)
    with np.errstate(all="ignore"):
        for dtype in ("float64", "float32"):
            a = x.astype(dtype)
            got, want = _both(tracer.trace(f, a), [a])
            for g, w in zip(got, want, strict=True):
                assert np.array_equal(np.isnan(g), np.isnan(w)), (g, w)
                assert np.array_equal(np.isinf(g) & (g > 0), np.isinf(w) & (w > 0)), (g, w)
                assert _error(g, w) <= (1e-12 if dtype == "float64" else 1e-6), (g, w)


def test_unsupported_op_and_large_array_fall_back():
    for fn, x in [(lambda a: tracer.cumsum(a, 0) * 2.0, _r(4, 3)),  # an op the generator does not emit
                  (lambda a: tracer.exp(a) + 1.0, _r(numba_program.MAX_SIZE + 1))]:  # larger than MAX_SIZE
        mod = tracer.trace(fn, x)
        new, old = _executor(mod, "main", True), _executor(mod, "main", False)
        assert new.program is None
        np.testing.assert_array_equal(_calls(new, [x]), _calls(old, [x]))
    # at the size limit the program still serves
    x = _r(numba_program.MAX_SIZE)
    got, want = _both(tracer.trace(lambda a: tracer.exp(a) + 1.0, x), [x])
    assert _error(got[0], want[0]) <= 1e-12


def test_argument_not_c_contiguous_runs_the_python_function():
    a = _r(4, 3)
    mod = tracer.trace(lambda x: tracer.exp(x) * 2.0, a)
    new = _executor(mod, "main", True)
    _calls(new, [a])
    assert new.program is not None
    strided = np.asfortranarray(a)
    np.testing.assert_allclose(_calls(new, [strided]), np.exp(a) * 2.0, rtol=1e-15)


def test_returned_constant_view_and_argument_are_as_numpy():
    c = np.arange(6.0).reshape(2, 3)
    mod = tracer.trace(lambda x: (x, tracer.reshape(tracer.tensor(c), (3, 2)) + 0.0, x * 2.0), _r(2, 3))
    x = _r(2, 3)
    got, want = _both(mod, [x])
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)


def test_program_counts_calls_before_it_is_made(monkeypatch):
    monkeypatch.setattr(numba_program, "HOT_CALLS", 4)
    x = _r(3, 5)
    fn = ir.Executor(tracer.trace(lambda a: tracer.tanh(a) * 3.0, x))["main"]
    served = []
    for _ in range(6):
        fn(x)
        served.append(fn.program is not None)
    # call 1 interprets (counting peak bytes); calls 2-5 run the counting Python function, whose 4th count
    # makes the program
    assert served == [False, False, False, False, True, True]


def test_source_is_one_njit_function_in_the_kernel_cache():
    x = _r(3, 4)
    mod = tracer.trace(lambda a: tracer.exp(a).sum(axis=0), x)
    fn = _executor(mod, "main", True)
    _calls(fn, [x])
    text = fn.program.source
    assert text.count("@njit(") == 1 and "cache=True" in text
    from ir.runtime.numba_gen import kernel_dir
    assert any(p.read_text() == text for p in kernel_dir().glob("program_*.py"))


def _model_results(program, loss_of, y, dtype="float32"):
    """value and gradients of loss_of(model(x), y) for a small tanh/relu MLP made from fixed weights."""
    numba_program.ENABLED = program
    try:
        rng = np.random.default_rng(3)
        model = nn.Sequential(nn.Linear(20, 32), nn.Tanh(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 5))
        for p in model.parameters():
            p.data = tracer.tensor(rng.normal(0, 0.3, p.shape).astype(dtype))
        x = tracer.tensor(rng.normal(size=(16, 20)).astype(dtype))
        vg = autodiff.value_and_grad(lambda x, y: loss_of(model(x), y), wrt=list(model.parameters()))
        step_of = lambda: next(iter(vg.cache.values()))[0].step  # noqa: E731
        value, grads = _served(lambda: vg(x, y), step_of)
    finally:
        numba_program.ENABLED = True
    step = step_of()
    assert (step.program is not None) == program
    return [value.numpy()] + [g.numpy() for g in grads], vg, x


@pytest.mark.parametrize("loss", ["cross_entropy", "cross_entropy_ignore", "cross_entropy_sum", "mse"])
def test_small_nn_models_as_numpy(loss):
    rng = np.random.default_rng(4)
    targets = rng.integers(0, 5, 16)
    if loss == "cross_entropy_ignore":
        targets[[2, 7]] = -100
    loss_of = {"cross_entropy": F.cross_entropy, "cross_entropy_ignore": F.cross_entropy,
               "cross_entropy_sum": lambda p, t: F.cross_entropy(p, t, reduction="sum"), "mse": F.mse_loss}[loss]
    soft = rng.normal(size=(16, 5))
    results = {}
    for dtype in ("float64", "float32"):
        y = tracer.tensor(soft.astype(dtype)) if loss == "mse" else tracer.tensor(targets)
        results[dtype] = [_model_results(program, loss_of, y, dtype)[0] for program in (True, False)]
        for g, w in zip(*results[dtype], strict=True):
            assert g.dtype == w.dtype and g.shape == w.shape
    for g, w in zip(*results["float64"], strict=True):
        assert _error(g, w) <= 1e-12, loss
    for g32, w32, w64 in zip(*results["float32"], results["float64"][1], strict=True):
        assert _error(g32, w64) <= max(1e-6, 2 * _error(w32, w64)), loss


def test_target_out_of_range_raises_the_numpy_paths_error():
    targets = np.arange(16) % 5
    _, vg, x = _model_results(True, F.cross_entropy, tracer.tensor(targets))
    bad = targets.copy()
    bad[3] = 7
    with pytest.raises(IndexError, match="target 7 out of range for 5 classes"):
        vg(x, tracer.tensor(bad))


TIERED = """
import numpy as np, ir, tracer
from ir.runtime import numba_hook
x = np.linspace(-1, 1, 12).reshape(3, 4)
fn = ir.Executor(tracer.trace(lambda a: tracer.tanh(a) * 2.0 - a, x))["main"]
want = np.tanh(x) * 2.0 - x
for _ in range(3):
    assert np.allclose(fn(x), want, rtol=1e-15)
served = [fn.program is not None]
assert numba_hook.wait(300)
for _ in range(3):
    assert np.allclose(fn(x), want, rtol=1e-15)
served.append(fn.program is not None)
print(served)
"""


def test_tiered_start_makes_the_program_with_numbas_load(tmp_path):
    # numba loading in the background (TRACEGRAD_KERNELS unset): the first calls run NumPy's path, the program is
    # made on the loading thread, and the executor's re-make of the function installs it without HOT_CALLS calls
    env = {**os.environ, "TRACEGRAD_CACHE": str(tmp_path)}
    env.pop("TRACEGRAD_KERNELS", None)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = subprocess.run([sys.executable, "-c", TIERED], env=env, cwd=root, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[False, True]"


def test_generated_locals_never_shadow_the_modules_names():
    # a local named like a global of the module (f32, f64, np, math, exp32, K0...) broke a program: the counter
    # that names locals reached 32 at a "flat" view once. Sources are checked for every count up to 80 locals.
    import ast

    from ir.runtime.numba_emit import source
    reserved = {"f32", "f64", "np", "math", "njit", "Array", "exp32", "exp_reduced", "sigmoid32", "tanh32",
                "boolean", "float32", "float64", "int32", "int64"}
    for k in range(20):
        def f(a, b, k=k):
            for _ in range(k):
                a = tracer.exp(a) * b
            return a.sum(axis=0)
        mod = tracer.trace(f, _r(3, 4), _r(3, 4))
        text = source(mod["main"])[0]
        tree = ast.parse(text)
        names = {t.id for node in ast.walk(tree) if isinstance(node, ast.Assign) for t in node.targets
                 if isinstance(t, ast.Name)}
        assert not names & (reserved | {f"K{i}" for i in range(100)}), (k, names & reserved)


def _case_functions():
    """(case, adjoint) pairs of the op case table whose function the program serves, a subset by name."""
    from tests.cases import all_cases
    words = ("softmax", "sum", "mean", "where", "maximum", "matmul", "broadcast", "reshape", "permute", "nll",
             "cross_entropy", "sigmoid", "tanh", "divide", "astype", "full", "ones")
    return [c for c in all_cases() if any(w in c.name for w in words)
            and all(np.asarray(a).dtype.kind in "fbi" for a in c.inputs)][:40]


@pytest.mark.parametrize("case", _case_functions(), ids=lambda c: c.name)
def test_case_table_as_numpy(case):
    from tests.autodiff.test_vjp_cases import scalarized
    ins = [np.asarray(a) for a in case.inputs]
    for adjoint in (False, True) if case.grad else (False,):
        if adjoint:
            mod = tracer.trace(scalarized(case, ins), *ins)
            params = [p for p in mod["main"].params if p.type.is_float]
            mod = ir.transform.cleanup()(Gradient("main", require_grads=params)(mod))
            name = "main_adjoint"
        else:
            mod = tracer.trace(lambda *xs: case.fn(*xs, **case.kwargs), *ins)
            name = "main"
        if numba_program.refusal(mod[name]) is not None:
            continue
        with np.errstate(all="ignore"):
            got, want = _both(mod, ins, name)
        # float32 anywhere rounds like float32 (a float64 loss over a float32 tanh differs as float32 does)
        tol = 1e-12 if all(a.dtype != np.float32 for a in ins) else 2e-6
        for g, w in zip(got, want, strict=True):
            assert g.dtype == w.dtype and g.shape == w.shape
            assert _error(g, w) <= tol, (case.name, adjoint)


def test_generic_kernels_switch_keeps_the_per_op_path():
    x = _r(3, 4)
    ex = ir.Executor(tracer.trace(lambda a: tracer.exp(a) * 2.0, x))
    ex.specialize_kernels = False  # every op through its generic kernel: a reference path, no program
    fn = ex["main"]
    np.testing.assert_allclose(_calls(fn, [x]), np.exp(x) * 2.0, rtol=1e-15)
    assert fn.program is None


class _Timed:
    """A stand-in for the program's numba function or the per-op function, taking `delay` seconds a call."""

    def __init__(self, name, delay):
        self.name, self.delay, self.calls = name, delay, 0

    def __call__(self, *args):
        import time

        self.calls += 1
        time.sleep(self.delay)
        return self.name


@pytest.mark.parametrize("program_faster", [True, False])
def test_trial_keeps_the_faster_form(monkeypatch, program_faster):
    monkeypatch.setattr(numba_program, "TRIAL_CALLS", 3)

    class Compiled:
        program = None
        _peaks: dict = {}  # noqa: RUF012 - a stand-in
        _fast = None

    class Program:
        kernel, arrays, source = _Timed("program", 0.0 if program_faster else 0.004), (), f"src{program_faster}"

    python = _Timed("python", 0.004 if program_faster else 0.0)
    compiled = Compiled()
    compiled._fast = numba_program._install(compiled, Program(), "src", python)
    trial = compiled._fast[1]
    x = np.zeros(3)
    assert [trial(x) for _ in range(6)] == ["program", "python"] * 3  # alternating, timed
    assert compiled._fast[1] is not trial  # decided
    assert compiled._fast[1](x) == ("program" if program_faster else "python")
    assert (compiled.program is not None) == program_faster
    assert (Program.source in numba_program._slower) != program_faster  # a slower program is not made again
