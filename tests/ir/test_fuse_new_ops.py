"""Issue 22's elementwise ops join the fusion set: a chain of them becomes one `fused` binding that gives the
unfused values (including domain edges: NaN, inf, 0, -0.0) and the same gradients."""
import numpy as np
import pytest

import autodiff
import ir
import tracer
from ir.transform.fuse import ELEMENTWISE, FuseElementwise, fusion

FUSE = FuseElementwise(force=True)
NEW_OPS = frozenset({
    "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "erf", "erfc", "erfinv", "log2",
    "log10", "log1p", "expm1", "exp2", "atan2", "hypot", "copysign", "log_add_exp", "xlogy", "fmax", "fmin",
    "mod", "floor_mod", "floor_divide", "heaviside", "sign", "trunc", "floor", "ceil", "round", "clamp",
    "lgamma", "digamma", "polygamma"})


def test_issue22_ops_are_in_the_one_fusion_set():
    assert NEW_OPS <= ELEMENTWISE


def _chain(x, y):
    """A tree of the new ops (each intermediate read once, so one chain); x and y are read many times."""
    a = tracer.tan(x * 0.5) + tracer.asinh(y) - tracer.atan2(x, y)
    b = tracer.hypot(a, y) * tracer.copysign(tracer.erf(x), y) + tracer.logaddexp(x, y)
    c = tracer.fmax(tracer.fmin(b, tracer.expm1(y)), tracer.log1p(tracer.abs(x))) + tracer.sign(y)
    d = tracer.heaviside(c, tracer.trunc(x)) + tracer.exp2(tracer.sinh(y * 0.25)) * tracer.floor(x * 3.0)
    return tracer.cosh(d * 0.1) + tracer.log2(tracer.abs(y)) * tracer.fmod(x, 1.5) + tracer.lgamma(tracer.abs(x))


def _composites(x, y):
    """frac and nan_to_num are built from IR ops that read their input twice: their pieces fuse, the input
    read twice is where one chain ends and the next begins."""
    return tracer.frac(x * 1.7) + tracer.nan_to_num(tracer.log2(tracer.abs(y)), neginf=-5.0)


def _ops(fn):
    return [b.value.op for b in fn.bindings if isinstance(b.value, ir.Call)]


EDGES = np.array([0.3, -1.2, 0.0, -0.0, 2.5, np.inf, -np.inf, np.nan, 1e-30, -7.0], "float32")
OTHER = np.array([1.1, 0.0, -0.0, -2.0, np.nan, 3.0, -np.inf, 0.5, 4.0, np.inf], "float32")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_chain_of_new_ops_fuses_into_one_binding_with_the_unfused_values(dtype):
    x, y = EDGES.astype(dtype), OTHER.astype(dtype)
    mod = tracer.trace(_chain, x, y)
    fused = FUSE(mod)
    ir.verify(fused)
    assert ir.structural_equal(ir.parse(str(fused)), fused)
    before, after = _ops(mod["main"]), _ops(fused["main"])
    assert len(set(before) & NEW_OPS) >= 12  # the chain really is made of the new ops
    assert after == ["fused"], after  # every op of the chain in one binding
    with np.errstate(all="ignore"):
        want = ir.Executor(mod)["main"](x, y)
        got = ir.Executor(fused, check_types=True)["main"](x, y)
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7, equal_nan=True)


def test_composites_of_new_ops_fuse_around_their_shared_input():
    mod = tracer.trace(_composites, EDGES, OTHER)
    fused = FUSE(mod)
    ops = _ops(fused["main"])
    # x * 1.7, read by frac's subtract and trunc, is a one-op chain and stays; everything else fuses
    assert ops.count("fused") == 2 and not set(ops) & NEW_OPS and len(ops) < len(_ops(mod["main"])) - 5
    with np.errstate(all="ignore"):
        want = ir.Executor(mod)["main"](EDGES, OTHER)
        got = ir.Executor(fused, check_types=True)["main"](EDGES, OTHER)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7, equal_nan=True)


def test_gradients_with_fusion_on_equal_the_unfused_ones():
    rng = np.random.default_rng(0)
    x, y = rng.uniform(0.2, 2.0, 6), rng.uniform(0.2, 2.0, 6)
    step = autodiff.value_and_grad(lambda a, b: _chain(a, b).sum(), argnums=(0, 1))
    with fusion(False):
        v0, g0 = step(tracer.tensor(x), tracer.tensor(y))
    with fusion(True):
        step = autodiff.value_and_grad(lambda a, b: _chain(a, b).sum(), argnums=(0, 1))
        v1, g1 = step(tracer.tensor(x), tracer.tensor(y))
        assert "fused" in step.stats.op_counts
    np.testing.assert_allclose(v1.numpy(), v0.numpy(), rtol=1e-12)
    for a, b in zip(g1, g0, strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12)
