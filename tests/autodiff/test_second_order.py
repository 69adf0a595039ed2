"""grad composes: a grad called inside a traced function records its adjoint there, so it can be
differentiated again (second derivatives, Hessian-vector products, gradient penalties)."""
import numpy as np
import pytest

import autodiff
import ir
import tracer
from tests.cases import all_cases

EPS = 1e-6


def derivative(f):
    """x -> d/dx sum(f(x)), itself traceable."""
    return lambda t: autodiff.grad(lambda u: f(u).sum(), wrt=t)(t)


def test_second_and_third_derivatives():
    x = tracer.tensor(np.array([0.3, -1.2, 2.0]))
    np.testing.assert_allclose(derivative(derivative(tracer.sin))(x).numpy(), -np.sin(x.numpy()), rtol=1e-12)
    third = derivative(derivative(derivative(lambda t: t ** 4.0)))
    np.testing.assert_allclose(third(x).numpy(), 24 * x.numpy(), rtol=1e-10)


def test_grad_inside_a_trace_records_the_adjoint_inline():
    mod = tracer.trace(derivative(lambda y: tracer.tanh(y) * y), tracer.spec((3,), "float64"))
    ir.verify(mod)
    ops = [b.value.op for b in mod["main"].bindings if isinstance(b.value, ir.Call)]
    # the forward once (one tanh, one multiply), then its backward (the product rule's multiplies)
    assert ops.count("tanh") == 1 and ops.count("multiply") >= 3
    x = np.array([0.5, -0.1, 1.5])
    t = np.tanh(x)
    np.testing.assert_allclose(ir.Executor(mod)["main"](x), t + x * (1 - t * t), rtol=1e-12)


def _mlp_loss(w1, w2, x):
    return (tracer.tanh(x @ w1) @ w2).sum() ** 2.0


def test_hessian_vector_product_of_an_mlp_matches_finite_differences():
    rng = np.random.default_rng(0)
    w1 = tracer.tensor(rng.normal(size=(4, 5)) * 0.5)
    w2 = tracer.tensor(rng.normal(size=(5, 2)) * 0.5)
    x = rng.normal(size=(3, 4))
    v1, v2 = rng.normal(size=(4, 5)), rng.normal(size=(5, 2))
    gradient = autodiff.grad(lambda x: _mlp_loss(w1, w2, x), wrt=[w1, w2])

    def directional(x):
        g1, g2 = gradient(x)
        return (g1 * tracer.tensor(v1)).sum() + (g2 * tracer.tensor(v2)).sum()
    h1, h2 = autodiff.grad(directional, wrt=[w1, w2])(x)

    def grad_at(shift):
        a = tracer.tensor(w1.numpy() + shift * v1)
        b = tracer.tensor(w2.numpy() + shift * v2)
        return [g.numpy() for g in autodiff.grad(lambda x: _mlp_loss(a, b, x), wrt=[a, b])(x)]
    plus, minus = grad_at(EPS), grad_at(-EPS)
    np.testing.assert_allclose(h1.numpy(), (plus[0] - minus[0]) / (2 * EPS), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(h2.numpy(), (plus[1] - minus[1]) / (2 * EPS), rtol=1e-5, atol=1e-7)


def test_gradient_penalty_with_aux_and_unused_leaves():
    """WGAN-GP's penalty (|d critic / dx| - 1)^2, differentiated with respect to the critic's weights."""
    rng = np.random.default_rng(1)
    x = rng.normal(size=(4, 3))
    unused = tracer.tensor(np.ones(2))

    def penalty(w):
        def critic(y):
            return tracer.tanh(y @ w).sum()
        xs = tracer.tensor(x)
        (value, aux), (gx, gu) = autodiff.value_and_grad(lambda y, spare=unused: (critic(y), y * 2.0),
                                                         wrt=[xs, unused], has_aux=True)(xs)
        assert aux.shape == (4, 3) and gu is None  # aux comes back; a leaf fn holds but never reads: None
        norm = tracer.sqrt((gx * gx).sum(axis=1))
        return ((norm - 1.0) ** 2.0).mean() + 0.0 * value
    assert autodiff.gradcheck(penalty, tracer.tensor(rng.normal(size=(3, 1))))


# At a tie (max/min with equal entries) the first derivative jumps, so there is no second one to check.
SECOND = [c for c in all_cases() if c.grad and "ties" not in c.name]


@pytest.mark.parametrize("case", SECOND, ids=[c.name for c in SECOND])
def test_every_rule_is_differentiable_again(case):
    """The VJP rules emit differentiable IR: a directional second derivative of every case agrees
    with finite differences of its first derivative."""
    inputs = [np.asarray(a).astype("float64") if np.asarray(a).dtype.kind == "f" else np.asarray(a)
              for a in case.inputs]
    rng = np.random.default_rng(2)
    floats = [i for i, a in enumerate(inputs) if a.dtype.kind == "f"]
    directions = {i: rng.normal(size=inputs[i].shape) for i in floats}
    weights = None

    def first(*xs):
        nonlocal weights
        out = case.fn(*xs, **case.kwargs)
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        if weights is None:
            weights = [np.random.default_rng(3).uniform(0.5, 1.5, o.shape) for o in outs]
        return sum((tracer.astype(o, "float64") ** 2.0 * tracer.tensor(w)).sum() for o, w in zip(outs, weights,
                                                                                                 strict=True))

    def directional(*xs):
        wrt = [xs[i] for i in floats]
        grads = autodiff.grad(first, wrt=wrt)(*xs)
        # an input the case never reads (x[...] = v overwrites it) has gradient None: zero here
        return sum((g * tracer.tensor(directions[i])).sum() for g, i in zip(grads, floats, strict=True)
                   if g is not None)

    tensors = [tracer.tensor(a) for a in inputs]
    hvp = autodiff.grad(directional, wrt=[tensors[i] for i in floats])(*tensors)

    def gradient_at(shift):
        shifted = [tracer.tensor(a + shift * directions[i]) if i in directions else tracer.tensor(a)
                   for i, a in enumerate(inputs)]
        return autodiff.grad(first, wrt=[shifted[i] for i in floats])(*shifted)
    plus, minus = gradient_at(EPS), gradient_at(-EPS)
    for h, p, m in zip(hvp, plus, minus, strict=True):
        if h is None or p is None:  # an input never read: None from both
            assert h is None and p is None and m is None
            continue
        np.testing.assert_allclose(h.numpy(), (p.numpy() - m.numpy()) / (2 * EPS), rtol=1e-4, atol=1e-6)
