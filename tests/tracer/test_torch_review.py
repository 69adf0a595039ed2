"""Review of issue 11's tensor methods, as a PyTorch user writes them: edge shapes."""
import numpy as np
import pytest

import autodiff
import tracer

# log(0) of an empty sum, and the VJP of that log on an empty gradient, warn in NumPy
pytestmark = [pytest.mark.filterwarnings("ignore:divide by zero"), pytest.mark.filterwarnings("ignore:invalid value")]


@pytest.mark.parametrize("dim, keepdim", [(1, False), (1, True), ((0, 1), False), (-1, True)])
def test_logsumexp_over_an_empty_axis_is_minus_inf(dim, keepdim):
    x = tracer.zeros((3, 0, 2), "float64")
    y = x.logsumexp(dim=dim, keepdim=keepdim)
    want = np.log(np.exp(np.zeros((3, 0, 2))).sum(axis=dim, keepdims=keepdim))  # -inf, NumPy warns about log(0)
    assert y.shape == want.shape and y.dtype == "float64"
    np.testing.assert_array_equal(y.numpy(), want)


def test_logsumexp_over_an_empty_axis_traced_and_against_torch():
    p = tracer.zeros((3, 0), "float64")
    value, grads = autodiff.value_and_grad(lambda w: (p.logsumexp(1).exp() * w).sum(), wrt=[p])(np.ones(3))
    assert float(value) == 0.0 and grads[0].shape == (3, 0)
    torch = pytest.importorskip("torch")
    np.testing.assert_array_equal(tracer.zeros((3, 0, 2)).logsumexp(dim=1).numpy(),
                                  torch.zeros((3, 0, 2)).logsumexp(dim=1).numpy())


def test_eager_item_assignment_of_a_wrong_shape_names_the_op_and_shapes():
    x = tracer.zeros(2, 2)
    with pytest.raises(ValueError, match=r"x\[key\] = value: value of shape \(3,\) .* x of shape \(2, 2\)"):
        x[0] = tracer.ones(3)
    np.testing.assert_array_equal(x.numpy(), np.zeros((2, 2)))


def test_chunk_of_an_empty_axis_gives_chunks_empty_pieces():
    pieces = tracer.zeros((3, 0)).chunk(3, dim=1)
    assert [p.shape for p in pieces] == [(3, 0)] * 3
    torch = pytest.importorskip("torch")
    assert [tuple(p.shape) for p in torch.zeros((3, 0)).chunk(3, dim=1)] == [p.shape for p in pieces]
