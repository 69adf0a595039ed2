"""ir/runtime/fused_cuda.py: the CUDA source of fused chains, checked on a CPU.

The fake CuPy (tests/fake_cupy.py) runs a generated body as Python over NumPy, so each op's C formula
is compared here with the op's own NumPy kernel, on values that include 0, -0.0, large magnitudes,
infinities and NaN. tests/test_cuda.py and benchmarks/gpu_check.py run the real kernels on a GPU."""
import numpy as np
import pytest

from ir.ops.fused import Const, Leaf, Node, evaluate_unfused, expr_text
from ir.runtime import fused_cuda
from ir.transform.fuse import ELEMENTWISE
from tests import fake_cupy

SPECIAL = np.array([-np.inf, -40.0, -3.5, -1.0, -0.25, -0.0, 0.0, 0.25, 1.0, 2.0, 3.5, 40.0, np.inf, np.nan])
UNARY = ["negative", "abs", "exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid", "nn.relu", "nn.silu",
         "nn.log_sigmoid"]
BINARY = ["add", "subtract", "multiply", "divide", "power", "maximum", "minimum"]
COMPARE = ["less", "less_equal", "greater", "greater_equal", "equal", "not_equal"]
# issue 22's ops (floor_divide and floor_mod follow NumPy's npy_divmod step by step, so they are compared too)
UNARY_22 = ["tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "erf", "erfc", "erfinv",
            "log2", "log10", "log1p", "expm1", "exp2", "sign", "trunc", "floor", "ceil", "lgamma"]
BINARY_22 = ["atan2", "hypot", "copysign", "log_add_exp", "xlogy", "fmax", "fmin", "mod", "floor_mod",
             "floor_divide", "heaviside"]


def _chains():
    """(id, expr, dtypes) for every form: each op alone on each float dtype, and a few longer chains."""
    x0, x1, x2 = Leaf(0), Leaf(1), Leaf(2)
    rows = []
    for dtype in ("float32", "float64"):
        for op in UNARY + UNARY_22:
            rows.append((f"{op}-{dtype}", Node(op, (x0,), {}), (dtype,)))
        for decimals in (0, 2, -1):
            rows.append((f"round{decimals}-{dtype}", Node("round", (Node("multiply", (x0, Const(1.37, dtype)), {}),),
                                                        {"decimals": decimals}), (dtype,)))
        rows.append((f"clamp-{dtype}", Node("clamp", (x0, x1, x2), {}), (dtype,) * 3))
        for approximate in ("none", "tanh"):
            rows.append((f"gelu-{approximate}-{dtype}", Node("nn.gelu", (x0,), {"approximate": approximate}), (dtype,)))
        for op in BINARY + BINARY_22 + COMPARE:
            rows.append((f"{op}-{dtype}", Node(op, (x0, x1), {}), (dtype, dtype)))
        rows.append((f"where-{dtype}", Node("where", (x2, x0, x1), {}), (dtype, dtype, "bool")))
        other = "float64" if dtype == "float32" else "float32"
        rows.append((f"astype-{dtype}", Node("astype", (x0,), {"dtype": other}), (dtype,)))
        rows.append((f"astype-bool-{dtype}", Node("astype", (x0,), {"dtype": "bool"}), (dtype,)))
        rows.append((f"consts-{dtype}", Node("where", (Node("less", (x0, Const(0.0, dtype)), {}), Const(float("-inf"),
                    dtype), Node("multiply", (x0, Const(0.1, dtype)), {})), {}), (dtype,)))
    rows.append(("relu-bool", Node("nn.relu", (x0,), {}), ("bool",)))
    rows.append(("or-bool", Node("maximum", (x0, x1), {}), ("bool", "bool")))
    rows.append(("astype-int64", Node("add", (Node("astype", (x0,), {"dtype": "float32"}), x1), {}),
                 ("int64", "float32")))
    gelu_backward = Node("add", (x0, Node("multiply", (Node("multiply", (x1, Node("exp", (Node(
        "multiply", (Const(-0.5, "float32"), Node("multiply", (x1, x1), {})), {}),), {})), {}),
        Const(0.3989422917366028, "float32")), {})), {})
    rows.append(("gelu-backward-chain", gelu_backward, ("float32", "float32")))
    rows.append(("broadcast-chain", Node("multiply", (Node("sigmoid", (x0,), {}), Node("tanh", (x1,), {})), {}),
                 ("float32", "float32")))
    return [(name, expr_text(node), dtypes) for name, node, dtypes in rows]


CHAINS = _chains()


def _inputs(dtypes, broadcast=False):
    rng = np.random.default_rng(0)
    out = []
    for k, d in enumerate(dtypes):
        if d == "bool":
            out.append(rng.random(SPECIAL.size) > 0.5)
        elif d == "int64":
            out.append(np.arange(SPECIAL.size, dtype="int64") - 5)
        else:
            values = np.roll(SPECIAL, 3 * k) if k else SPECIAL
            out.append(values.astype(d))
    if broadcast:
        out = [a[:, None] if k == 0 else a[None, :5] for k, a in enumerate(out)]
    return out


def test_every_fusable_op_has_a_cuda_form_or_is_listed_as_falling_back():
    missing = sorted(ELEMENTWISE - set(fused_cuda.FORMS) - fused_cuda.FALLBACK)
    assert not missing, f"ops that FuseElementwise fuses without a CUDA form: {missing}"
    assert not set(fused_cuda.FORMS) & fused_cuda.FALLBACK


@pytest.mark.parametrize("name, expr, dtypes", CHAINS, ids=[c[0] for c in CHAINS])
def test_generated_body_computes_what_the_numpy_kernels_compute(monkeypatch, name, expr, dtypes):
    cp = fake_cupy.install(monkeypatch)
    xs = _inputs(dtypes, broadcast=name.startswith("broadcast"))
    with np.errstate(all="ignore"):
        want = evaluate_unfused(np, expr, xs)
        got = fused_cuda.run(cp, [cp.asarray(x) for x in xs], expr)
    assert got is not None and fake_cupy.COUNTS["kernel"] == 1, fused_cuda.FAILED
    got = got.get()
    assert got.dtype == want.dtype and got.shape == want.shape
    tol = 2e-6 if want.dtype == np.float32 else 1e-13
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol, equal_nan=True, err_msg=expr)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))


def test_source_is_typed_cached_and_named_by_structure():
    src = fused_cuda.kernel_source("exp(negative(x0))", ("float32",))
    assert src.operation.splitlines() == ["float t0 = (-x0);", "float t1 = expf(t0);", "y = t1;"]
    assert fused_cuda.kernel_source("exp(negative(x0))", ("float64",)).operation.splitlines()[1] == \
        "double t1 = exp(t0);"
    assert fused_cuda.kernel_source("exp(negative(x0))", ("float32",)) is src  # lru_cache
    assert src.name != fused_cuda.kernel_source("exp(negative(x0))", ("float64",)).name
    assert "#define tg_where" in src.preamble


@pytest.mark.parametrize("expr, dtypes", [("exp(x0)", ("float16",)), ("add(x0, x1)", ("int64", "int64")),
                                          ("divide(x0, x1)", ("int32", "int32"))])
def test_chains_without_a_cuda_form_fall_back_op_by_op(monkeypatch, expr, dtypes):
    cp = fake_cupy.install(monkeypatch)
    assert fused_cuda.kernel_source(expr, dtypes) is None
    xs = [cp.asarray(np.arange(1, 4).astype(d)) for d in dtypes]
    from ir.runtime.fused_cpu import _fused_kernel
    out = _fused_kernel(cp, xs, expr)  # the op-by-op path, still on the device
    assert type(out) is fake_cupy.ndarray and fake_cupy.COUNTS["kernel"] == 0
    np.testing.assert_array_equal(out.get(), evaluate_unfused(np, expr, [x.get() for x in xs]))


def test_a_kernel_that_fails_warns_once_and_runs_op_by_op(monkeypatch):
    cp = fake_cupy.install(monkeypatch)

    class Broken(fake_cupy.ElementwiseKernel):
        def __call__(self, *args):
            raise RuntimeError("CompileException: nvrtc error")
    monkeypatch.setattr(cp, "ElementwiseKernel", Broken)
    monkeypatch.setattr(fused_cuda, "FAILED", {})
    fused_cuda._kernel.cache_clear()
    from ir.runtime.fused_cpu import _fused_kernel
    x = cp.asarray(np.array([0.5, 1.5], "float32"))
    with pytest.warns(RuntimeWarning, match="fused CUDA kernel .* failed"):
        out = _fused_kernel(cp, [x], "tanh(exp(x0))")
    np.testing.assert_allclose(out.get(), np.tanh(np.exp([0.5, 1.5])).astype("float32"), rtol=1e-6)
    assert ("tanh(exp(x0))", ("float32",)) in fused_cuda.FAILED
    fused_cuda._kernel.cache_clear()
