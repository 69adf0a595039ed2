"""nn.functional against NumPy (and torch.nn.functional), eager and traced."""
import numpy as np
import pytest

import tracer
from nn import functional as F
from tests.nn import references as ref
from tests.nn.helpers import both

rng = np.random.default_rng(1)
LOGITS = rng.standard_normal((6, 5)).astype("float32") * 3
LABELS = np.array([0, 4, 2, 2, 1, 3])


def _log_softmax(x):
    return np.log(ref.softmax(x.astype("float64")))


def _ce(logits, labels, ignore_index=-100, reduction="mean"):
    logp = _log_softmax(logits)
    keep = labels != ignore_index
    losses = np.where(keep, -logp[np.arange(len(labels)), np.where(keep, labels, 0)], 0.0)
    if reduction == "none":
        return losses
    return losses.sum() / keep.sum() if reduction == "mean" else losses.sum()


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_matches_numpy(reduction):
    for out in both(lambda x, y: F.cross_entropy(x, y, reduction=reduction), LOGITS, LABELS):
        np.testing.assert_allclose(out, _ce(LOGITS, LABELS, reduction=reduction), rtol=1e-5, atol=1e-6)


def test_cross_entropy_ignore_index_and_nll_loss():
    labels = LABELS.copy()
    labels[[1, 3]] = -1
    out = F.cross_entropy(LOGITS, labels, ignore_index=-1)
    np.testing.assert_allclose(np.asarray(out), _ce(LOGITS, labels, ignore_index=-1), rtol=1e-5)
    logp = F.log_softmax(LOGITS)
    np.testing.assert_allclose(np.asarray(F.nll_loss(logp, LABELS)), _ce(LOGITS, LABELS), rtol=1e-5)


def test_cross_entropy_with_probabilities():
    probs = ref.softmax(rng.standard_normal((6, 5))).astype("float32")
    expected = -(probs * _log_softmax(LOGITS)).sum(-1).mean()
    for out in both(F.cross_entropy, LOGITS, probs):
        np.testing.assert_allclose(out, expected, rtol=1e-5)
    with pytest.raises(ValueError, match="probabilities"):
        F.cross_entropy(LOGITS, probs[:, :3])


def test_bad_reduction_is_rejected():
    with pytest.raises(ValueError, match="reduction"):
        F.mse_loss(LOGITS, LOGITS, reduction="avg")
    with pytest.raises(ValueError, match="reduction"):
        F.cross_entropy(LOGITS, LABELS, reduction="max")


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_loss(reduction):
    target = rng.standard_normal(LOGITS.shape).astype("float32")
    sq = (LOGITS - target) ** 2
    expected = {"mean": sq.mean(), "sum": sq.sum(), "none": sq}[reduction]
    for out in both(lambda a, b: F.mse_loss(a, b, reduction=reduction), LOGITS, target):
        np.testing.assert_allclose(out, expected, rtol=1e-5)


def test_activations_softmax_linear_layer_norm():
    x = LOGITS
    w, b = rng.standard_normal((3, 5)).astype("float32"), rng.standard_normal(3).astype("float32")
    cases = [
        (F.relu, np.maximum(x, 0)), (F.gelu, ref.gelu(x)), (F.tanh, np.tanh(x)),
        (F.softmax, ref.softmax(x)), (F.log_softmax, _log_softmax(x)),
        (lambda t: F.softmax(t, axis=0), ref.softmax(x, axis=0)),
        (lambda t: F.linear(t, w, b), ref.linear(x, w, b)),
        (lambda t: F.layer_norm(t), ref.layer_norm(x, 1.0, 0.0)),
    ]
    for fn, expected in cases:
        for out in both(fn, x):
            np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)


def test_one_hot():
    out = F.one_hot(np.array([2, 0, 1]), 4)
    np.testing.assert_array_equal(np.asarray(out), np.eye(4, dtype="float32")[[2, 0, 1]])


def test_dropout_functional():
    x = np.ones((100, 100), "float32")
    np.testing.assert_array_equal(np.asarray(F.dropout(x, 0.5, training=False)), x)
    a, b = F.dropout(x, 0.5, seed=3), F.dropout(x, 0.5, seed=3)
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert abs(float((np.asarray(a) == 0).mean()) - 0.5) < 0.05


def test_matches_torch_functional():
    torch = pytest.importorskip("torch")
    tf = torch.nn.functional
    t, y = torch.tensor(LOGITS), torch.tensor(LABELS)
    np.testing.assert_allclose(np.asarray(F.cross_entropy(LOGITS, LABELS)), tf.cross_entropy(t, y).numpy(),
                               rtol=1e-5)
    labels = LABELS.copy()
    labels[0] = -100
    np.testing.assert_allclose(np.asarray(F.cross_entropy(LOGITS, labels, reduction="sum")),
                               tf.cross_entropy(t, torch.tensor(labels), reduction="sum").numpy(), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(F.gelu(LOGITS)), tf.gelu(t).numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(F.gelu(LOGITS, approximate="tanh")),
                               tf.gelu(t, approximate="tanh").numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(F.mse_loss(LOGITS, LOGITS * 0.5)), tf.mse_loss(t, t * 0.5).numpy(),
                               rtol=1e-5)


def test_functions_accept_tensors_and_arrays():
    assert isinstance(F.relu(np.ones(3, "float32")), tracer.Tensor)
    assert F.softmax(tracer.ones((2, 3))).shape == (2, 3)
