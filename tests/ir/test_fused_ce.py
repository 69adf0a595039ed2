"""The soft-target cross-entropy chain as one op (ir.runtime.cross_entropy): values against the unfused chain,
and the chains it must leave alone."""
from __future__ import annotations

import numpy as np
import pytest

import autodiff
import ir
import tracer
from ir.runtime import cross_entropy


def _run(fn, *arrays, fused=True):
    mod = tracer.trace(fn, *[tracer.spec(a.shape, str(a.dtype)) for a in arrays])
    ex = ir.Executor(mod)
    ex.specialize_kernels = fused  # off: the generic kernels and no rewrite
    compiled = ex["main"]
    compiled(*arrays)  # the interpreter's call, then the generated function's
    return compiled, compiled(*arrays)


def _ops(compiled):
    return [b.value.op for b in compiled.fn.bindings if hasattr(b.value, "op")]


def _soft_ce(z, t):
    return -(t * tracer.log_softmax(z)).sum(axis=1).mean()


def _data(dtype, shape=(8, 5), seed=0):
    rng = np.random.default_rng(seed)
    z = (rng.standard_normal(shape) * 3).astype(dtype)
    t = rng.random(shape).astype(dtype)  # rows need not sum to 1
    return z, t


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("form", ["t_first", "p_first", "axis_last", "mean_axis0"])
def test_fused_chain_equals_unfused(dtype, form):
    fns = {"t_first": _soft_ce,
           "p_first": lambda z, t: -(tracer.log_softmax(z) * t).sum(axis=1).mean(),
           "axis_last": lambda z, t: -(t * tracer.log_softmax(z)).sum(axis=-1).mean(),
           "mean_axis0": lambda z, t: -(t * tracer.log_softmax(z)).sum(axis=1).mean(axis=0)}
    z, t = _data(dtype)
    fused, got = _run(fns[form], z, t)
    plain, want = _run(fns[form], z, t, fused=False)
    assert "nn.cross_entropy_with_logits" in _ops(fused) and "mean" not in _ops(fused)
    assert "nn.cross_entropy_with_logits" not in _ops(plain)
    assert got.shape == () and got.dtype == dtype
    np.testing.assert_allclose(got, want, rtol=1e-6 if dtype == "float32" else 1e-14)
    logp = z - z.max(1, keepdims=True)
    logp = logp - np.log(np.exp(logp).sum(1, keepdims=True))
    np.testing.assert_allclose(got, -(t * logp).sum() / len(z), rtol=1e-5 if dtype == "float32" else 1e-12)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_step_gradients_with_the_fused_chain(dtype):
    """value_and_grad through the rewritten adjoint: the loss and the logits' gradient (softmax * rowsum(t) - t) / N."""
    z, t = _data(dtype, (6, 4), seed=1)
    vg = autodiff.value_and_grad(_soft_ce, argnums=0)
    value, grad = vg(z, t)
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    want = (p * t.sum(1, keepdims=True) - t) / len(z)
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(np.asarray(grad), want, rtol=tol, atol=tol)
    np.testing.assert_allclose(float(value), -(t * np.log(p)).sum() / len(z), rtol=tol)


def test_torch_agrees():
    from tests.torch_optional import torch
    z, t = _data("float64", (5, 7), seed=2)
    _, got = _run(_soft_ce, z, t)
    want = -(torch.tensor(t) * torch.log_softmax(torch.tensor(z), dim=1)).sum(dim=1).mean()
    np.testing.assert_allclose(got, want.item(), rtol=1e-12)


EXCLUDED = {
    # a row sum also returned: the chain's intermediate must exist
    "intermediate_read": (lambda z, t: ((s := (t * tracer.log_softmax(z)).sum(axis=1)), -s.mean()), (8, 5), (8, 5)),
    "three_d": (lambda z, t: -(t * tracer.log_softmax(z)).sum(axis=-1).mean(), (2, 4, 5), (2, 4, 5)),
    "broadcast_target": (lambda z, t: -(t * tracer.log_softmax(z)).sum(axis=1).mean(), (8, 5), (5,)),
    "sum_axis0": (lambda z, t: -(t * tracer.log_softmax(z)).sum(axis=0).mean(), (8, 5), (8, 5)),
    "keepdims": (lambda z, t: -(t * tracer.log_softmax(z)).sum(axis=1, keepdims=True).mean(), (8, 5), (8, 5)),
    "no_negative": (lambda z, t: (t * tracer.log_softmax(z)).sum(axis=1).mean(), (8, 5), (8, 5)),
}


@pytest.mark.parametrize("name", sorted(EXCLUDED))
def test_excluded_chains_stay_unfused_and_correct(name):
    fn, zs, ts = EXCLUDED[name]
    rng = np.random.default_rng(3)
    z, t = rng.standard_normal(zs), rng.random(ts)
    fused, got = _run(fn, z, t)
    _, want = _run(fn, z, t, fused=False)
    assert "nn.cross_entropy_with_logits" not in _ops(fused)
    for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,),
                    strict=True):
        np.testing.assert_array_equal(g, w)


def test_float16_and_empty_are_left_alone():
    for z, t in (_data("float16"), (np.zeros((0, 3)), np.zeros((0, 3)))):
        mod = tracer.trace(_soft_ce, tracer.spec(z.shape, str(z.dtype)), tracer.spec(t.shape, str(t.dtype)))
        assert cross_entropy.rewrite(mod["main"]) is mod["main"]
