"""Every differentiable op case through the whole pipeline (trace, Gradient, clean-up, execute),
against float64 central finite differences of the traced forward function."""
import numpy as np
import pytest

import ir
import tracer
from autodiff import Gradient
from tests.cases import all_cases

CASES = [c for c in all_cases() if c.grad]
EPS = 1e-6


def _as64(a):
    a = np.asarray(a)
    return a.astype("float64") if a.dtype.kind == "f" else a


def scalarized(case, inputs):
    """sum(out_i * w_i) with fixed random w_i: checks one vector-Jacobian product per output."""
    rng = np.random.default_rng(1)
    probe = case.fn(*[tracer.tensor(a) for a in inputs], **case.kwargs)
    outs = probe if isinstance(probe, (tuple, list)) else [probe]
    weights = [rng.uniform(0.5, 1.5, o.shape) for o in outs]

    def loss(*xs):
        out = case.fn(*xs, **case.kwargs)
        out = out if isinstance(out, (tuple, list)) else [out]
        total = None
        for o, w in zip(out, weights, strict=True):
            term = (tracer.astype(o, "float64") * tracer.tensor(w)).sum()
            total = term if total is None else total + term
        return total
    return loss


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_gradient_matches_finite_differences(case):
    inputs = [_as64(a) for a in case.inputs]
    mod = tracer.trace(scalarized(case, inputs), *inputs)
    float_params = [p for p in mod["main"].params if p.type.is_float]
    after = ir.transform.cleanup()(Gradient("main", require_grads=float_params)(mod))
    ir.verify(after)
    ex = ir.Executor(after, check_types=True)  # inference of every backward op agrees with its kernel
    value, grads = ex["main_adjoint"](*inputs)
    forward = ex["main"]
    np.testing.assert_allclose(value, forward(*inputs), rtol=1e-12)
    float_inputs = [i for i, a in enumerate(inputs) if a.dtype.kind == "f"]
    assert len(grads) == len(float_inputs)
    for i, g in zip(float_inputs, grads, strict=True):
        assert g.shape == inputs[i].shape and g.dtype == inputs[i].dtype, (g.shape, inputs[i].shape)
        numeric = np.zeros_like(inputs[i])
        for idx in np.ndindex(inputs[i].shape):
            plus = [a.copy() for a in inputs]
            minus = [a.copy() for a in inputs]
            plus[i][idx] += EPS
            minus[i][idx] -= EPS
            numeric[idx] = (forward(*plus) - forward(*minus)) / (2 * EPS)
        np.testing.assert_allclose(g, numeric, rtol=1e-5, atol=1e-7, err_msg=f"gradient of input {i}")
