"""Issue 22 item 5: edges as torch (0-d softmax/log_softmax/cumsum/logsumexp, any/all over an empty axis,
one_hot's class checks, var/std with correction >= n, error types), eager and traced."""
import warnings

import numpy as np
import pytest

import ir
import nn.functional as F
import tracer
from tests.torch_optional import torch

ZERO_D = [("softmax", lambda m, x, d: m.softmax(x, d)), ("log_softmax", lambda m, x, d: m.log_softmax(x, d)),
          ("cumsum", lambda m, x, d: m.cumsum(x, d)), ("logsumexp", lambda m, x, d: m.logsumexp(x, d))]


@pytest.mark.parametrize("name, fn", ZERO_D, ids=[n for n, _ in ZERO_D])
@pytest.mark.parametrize("dim", [0, -1])
def test_zero_d_input_as_torch(name, fn, dim):
    a = np.array(1.5, "float32")
    want = fn(torch, torch.tensor(a), dim)
    ours = fn(tracer, tracer.tensor(a), dim)
    assert ours.shape == () and ours.dtype == "float32"
    np.testing.assert_allclose(ours.numpy(), want.numpy(), rtol=1e-6)
    np.testing.assert_allclose(ir.Executor(tracer.trace(lambda x: fn(tracer, x, dim), a))["main"](a), want.numpy())


def test_any_all_over_an_empty_axis():
    a = np.zeros((0, 3), "float32")
    for dims in (0, None):
        for op in ("any", "all"):
            want = getattr(torch.tensor(a), op)(*(() if dims is None else (dims,)))
            ours = getattr(tracer.tensor(a), op)(*(() if dims is None else (dims,)))
            assert ours.dtype == "bool" and ours.numpy().tolist() == want.numpy().tolist()


@pytest.mark.parametrize("labels, n", [([-1], 3), ([3], 3), ([0, 5], 2)])
def test_one_hot_bad_classes_raise_runtime_error(labels, n):
    with pytest.raises(RuntimeError):
        torch.nn.functional.one_hot(torch.tensor(labels), n)
    with pytest.raises(RuntimeError, match="Class values"):
        F.one_hot(tracer.tensor(labels), n)
    assert F.one_hot(tracer.tensor([0, 2])).numpy().tolist() == \
        torch.nn.functional.one_hot(torch.tensor([0, 2])).float().numpy().tolist()


@pytest.mark.parametrize("data", [[1.0, 2.0], [1.0, 1.0]])
def test_var_std_with_correction_past_the_count(data):
    for name, corr in (("var", 3), ("std", 2)):
        with pytest.warns(UserWarning):
            want = getattr(torch.tensor(data), name)(correction=corr).item()
        with pytest.warns(UserWarning, match="degrees of freedom"):
            ours = getattr(tracer.tensor(data), name)(correction=corr).item()
        assert np.isnan(ours) if np.isnan(want) else ours == want


def test_errors_use_torch_types():
    assert issubclass(ir.IRError, RuntimeError) and issubclass(ir.IRError, ValueError)
    with pytest.raises(RuntimeError):
        tracer.tensor([1, 2]).mean()
    with pytest.raises(TypeError):  # a float tensor as a slice bound, as torch
        tracer.ones((4,))[tracer.tensor(1.5):]
    with pytest.raises(TypeError):
        torch.ones(4)[torch.tensor(1.5):]
    assert tracer.ones((4,))[tracer.tensor(1):].shape == tuple(torch.ones(4)[torch.tensor(1):].shape)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(tracer.TraceError):  # a traced bound's value is unknown
            tracer.trace(lambda x, i: x[i:], np.ones(4, "float32"), np.array(1))
