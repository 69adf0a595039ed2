"""Review of the memory_budget surface: budget spellings, has_aux, frozen parameters, a parsed module."""
import numpy as np
import pytest

import autodiff
import ir
import nn
import tracer
from autodiff.planner import parse_budget
from benchmarks.checkpoint_memory import make_batch, make_weights


def test_budget_spellings():
    assert parse_budget("64MiB") == parse_budget(" 64 MiB ") == parse_budget("64mib") == 64 * 2**20
    assert parse_budget("64 MB") == 64 * 10**6 and parse_budget(64) == 64 and parse_budget(64.9) == 64
    assert parse_budget("1e6") == parse_budget("1E6 B") == parse_budget(1e6) == 10**6
    assert parse_budget("1.5e3 kB") == 1_500_000 and parse_budget(np.int64(100)) == 100


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf"), np.float64("nan"), "nan", "inf"])
def test_a_budget_that_is_not_a_finite_size_says_so(bad):
    with pytest.raises(ValueError, match="memory budget .* (finite|is not a size)"):
        parse_budget(bad)


@pytest.mark.parametrize("bad", [-5, -5.0, "-64MiB", "-1 kB", 0, "0 B", "0.4"])
def test_a_budget_below_one_byte_is_refused_as_such(bad):
    with pytest.raises(ValueError, match="memory budget must be at least 1 byte"):
        parse_budget(bad)


def residual(weights):
    def loss(x):
        h = x
        for w in weights:
            h = h + tracer.tanh(h @ w)
        return (h * h).mean(), h.sum()
    return loss


def test_a_budget_with_has_aux():
    weights = [tracer.tensor(w) for w in make_weights(8, 32)]
    x = make_batch(128, 32)
    plain = autodiff.value_and_grad(residual(weights), wrt=weights, has_aux=True)
    (value, aux), grads = plain(x)
    budget = int(0.6 * plain.stats.peak_bytes)
    step = autodiff.value_and_grad(residual(weights), wrt=weights, has_aux=True, memory_budget=budget)
    (v2, a2), g2 = step(x)
    assert step.stats.peak_bytes <= budget
    assert "R.grad.start_checkpoint" in step.module.script()
    np.testing.assert_allclose(v2.numpy(), value.numpy(), rtol=1e-6)
    np.testing.assert_allclose(a2.numpy(), aux.numpy(), rtol=1e-6)
    for a, b in zip(g2, grads, strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-7)


def test_a_budget_with_frozen_parameters():
    params = [nn.Parameter(w) for w in make_weights(8, 32)]
    for p in params[:4]:
        p.requires_grad_(False)
    x = make_batch(128, 32)
    loss = (lambda f: lambda x: f(x)[0])(residual(params))
    plain = autodiff.value_and_grad(loss, wrt=params)
    value, grads = plain(x)
    budget = int(0.85 * plain.stats.peak_bytes)  # the lowest reachable is 0.74
    step = autodiff.value_and_grad(loss, wrt=params, memory_budget=budget)
    v2, g2 = step(x)
    assert step.stats.peak_bytes <= budget
    assert g2[:4] == [None] * 4 == grads[:4]
    for a, b in zip(g2[4:], grads[4:], strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-7)


def test_a_parsed_module_plans_and_shows_no_unknown_sources():
    def f(x):
        for _ in range(6):
            x = x + tracer.tanh(x)
        return (x * x).sum()

    parsed = ir.parse(str(tracer.trace(f, tracer.spec((256,)))))
    planned = autodiff.plan_checkpoints(parsed, 7000)
    assert "R.grad.start_checkpoint" in str(planned)
    step = autodiff.Gradient("main")(planned)
    text = step.script(show_source=True)
    assert "#" not in text.split("class Module:")[1]  # no locations: no source comments, forward or adjoint
    assert ir.structural_equal(ir.parse(text), step)
