"""Every op case, forward: eager and trace+execute agree with the NumPy reference, in value and dtype.

A row whose trace holds only ops that compute no new values (moves, casts, selections, comparisons)
must match NumPy bit for bit, whatever tolerance the row gives."""
import numpy as np
import pytest

import ir
import tracer
from tests.cases import all_cases

CASES = all_cases()
EXACT_OPS = {"astype", "reshape", "permute_dims", "broadcast_to", "expand_dims", "squeeze", "concat", "stack",
             "split", "take", "strided_slice", "tril", "triu", "where", "negative", "abs", "maximum", "minimum",
             "nn.relu", "max", "min", "argmax", "equal", "not_equal", "less", "less_equal", "greater",
             "greater_equal", "grad.stop_gradient", "grad.start_checkpoint", "grad.end_checkpoint", "zeros", "ones",
             "full", "zeros_like", "ones_like", "full_like"}


def _exact(mod) -> bool:
    ops = {bd.value.op for bd in mod["main"].bindings if isinstance(bd.value, ir.nodes.Call)}
    return ops <= EXACT_OPS


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_eager_matches_numpy(case):
    out = case.fn(*[tracer.tensor(a) for a in case.inputs], **case.kwargs)
    expected = case.ref(*case.inputs)
    mod = tracer.trace(lambda *xs: case.fn(*xs, **case.kwargs), *case.inputs)
    _compare(out, expected, case, _exact(mod))


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_traced_matches_numpy(case):
    mod = tracer.trace(lambda *xs: case.fn(*xs, **case.kwargs), *case.inputs)
    ir.verify(mod)
    out = ir.Executor(mod, check_types=True)["main"](*case.inputs)
    _compare(out, case.ref(*case.inputs), case, _exact(mod))


def _compare(out, expected, case, exact):
    if isinstance(expected, (tuple, list)):
        assert isinstance(out, (tuple, list)) and len(out) == len(expected)
        for o, e in zip(out, expected, strict=True):
            _compare(o, e, case, exact)
        return
    got = np.asarray(out)
    expected = np.asarray(expected)
    assert got.shape == expected.shape, (got.shape, expected.shape)
    assert got.dtype == expected.dtype, (got.dtype, expected.dtype)
    if exact:
        np.testing.assert_array_equal(got, expected)
    else:
        np.testing.assert_allclose(got, expected, rtol=case.rtol, atol=case.atol)
