"""Every op case, forward: eager and trace+execute agree with the NumPy reference, in value and dtype."""
import numpy as np
import pytest

import ir
import tracer
from tests.cases import all_cases

CASES = all_cases()


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_eager_matches_numpy(case):
    out = case.fn(*[tracer.tensor(a) for a in case.inputs], **case.kwargs)
    expected = case.ref(*case.inputs)
    _compare(out, expected, case)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_traced_matches_numpy(case):
    mod = tracer.trace(lambda *xs: case.fn(*xs, **case.kwargs), *case.inputs)
    ir.verify(mod)
    out = ir.Executor(mod, check_types=True)["main"](*case.inputs)
    _compare(out, case.ref(*case.inputs), case)


def _compare(out, expected, case):
    if isinstance(expected, (tuple, list)):
        assert isinstance(out, (tuple, list)) and len(out) == len(expected)
        for o, e in zip(out, expected, strict=True):
            _compare(o, e, case)
        return
    got = np.asarray(out)
    expected = np.asarray(expected)
    assert got.shape == expected.shape, (got.shape, expected.shape)
    assert got.dtype == expected.dtype, (got.dtype, expected.dtype)
    np.testing.assert_allclose(got, expected, rtol=case.rtol, atol=case.atol)
