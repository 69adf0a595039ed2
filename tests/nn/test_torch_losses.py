"""Loss modules and functions against torch (float64, values and input gradients), and their own checks."""
import numpy as np
import pytest

import autodiff
import nn
import tracer
from nn import functional as F

rng = np.random.default_rng(0)
LOGITS, LABELS = rng.standard_normal((6, 4)), np.array([0, 3, 1, -100, 2, 3])
LOGITS_3D, LABELS_3D = rng.standard_normal((3, 4, 5)), rng.integers(0, 4, (3, 5))
PROBS = np.exp(LOGITS) / np.exp(LOGITS).sum(1, keepdims=True)
W = np.array([0.5, 2.0, 1.0, 1.5])
PRED, TARGET = rng.standard_normal((5, 3)) * 2, rng.standard_normal((5, 3))
P01, T01 = 1 / (1 + np.exp(-PRED)), rng.uniform(size=(5, 3))


def _ce(**kw):
    return lambda m: (m.CrossEntropyLoss(**kw), (LOGITS, LABELS))


# name: (make (module namespace) -> (loss module, (input, target)))
CASES = {
    "ce": _ce(),
    "ce_weight": lambda m: (m.CrossEntropyLoss(weight=W if m is nn else _t(W)), (LOGITS, LABELS)),
    "ce_smoothing": _ce(label_smoothing=0.2),
    "ce_weight_smoothing": lambda m: (m.CrossEntropyLoss(weight=W if m is nn else _t(W), label_smoothing=0.1),
                                      (LOGITS, LABELS)),
    "ce_weight_smoothing_sum": lambda m: (m.CrossEntropyLoss(weight=W if m is nn else _t(W), label_smoothing=0.1,
                                                             reduction="sum"), (LOGITS, LABELS)),
    "ce_smoothing_none_ignore_1": lambda m: (m.CrossEntropyLoss(label_smoothing=0.3, reduction="none",
                                                                ignore_index=1), (LOGITS, np.abs(LABELS) % 4)),
    "ce_3d_weight_smoothing": lambda m: (m.CrossEntropyLoss(weight=W if m is nn else _t(W), label_smoothing=0.2),
                                         (LOGITS_3D, LABELS_3D)),
    "ce_probs_weight_smoothing": lambda m: (m.CrossEntropyLoss(weight=W if m is nn else _t(W), label_smoothing=0.2),
                                            (LOGITS, PROBS)),
    "nll_weight": lambda m: (m.NLLLoss(weight=W if m is nn else _t(W)), (np.log(PROBS), LABELS)),
    "nll_none": lambda m: (m.NLLLoss(reduction="none"), (np.log(PROBS), LABELS)),
    "mse": lambda m: (m.MSELoss(), (PRED, TARGET)),
    "l1_sum": lambda m: (m.L1Loss(reduction="sum"), (PRED, TARGET)),
    "smooth_l1": lambda m: (m.SmoothL1Loss(beta=0.7), (PRED, TARGET)),
    "smooth_l1_beta0": lambda m: (m.SmoothL1Loss(beta=0.0, reduction="none"), (PRED, TARGET)),
    "huber": lambda m: (m.HuberLoss(delta=1.5), (PRED, TARGET)),
    "bce_logits": lambda m: (m.BCEWithLogitsLoss(pos_weight=W[:3] if m is nn else _t(W[:3])), (PRED, T01)),
    "bce": lambda m: (m.BCELoss(weight=W[:3] if m is nn else _t(W[:3])), (P01, T01)),
    "kl_batchmean": lambda m: (m.KLDivLoss(reduction="batchmean"), (np.log(PROBS), np.where(PROBS > 0.3, 0.0, PROBS))),
    "kl_log_target": lambda m: (m.KLDivLoss(reduction="sum", log_target=True), (np.log(PROBS), np.log(PROBS[::-1]))),
}


def _t(a):
    import torch
    return torch.tensor(a)


@pytest.mark.parametrize("name", CASES)
def test_loss_matches_torch(name):
    torch = pytest.importorskip("torch")
    ours, (x, y) = CASES[name](nn)
    theirs, _ = CASES[name](torch.nn)
    xt = tracer.tensor(x)
    value, grad = autodiff.value_and_grad(lambda a: ours(a, y).sum(), wrt=xt)(xt)
    tx = torch.tensor(x, requires_grad=True)
    want = theirs(tx, torch.tensor(y))
    want.sum().backward()
    np.testing.assert_allclose(ours(x, y).numpy(), want.detach().numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(float(value), want.sum().item(), rtol=1e-10)
    np.testing.assert_allclose(np.asarray(grad), tx.grad.numpy(), rtol=1e-9, atol=1e-12)


def test_weighted_cross_entropy_by_hand():
    logp = LOGITS - np.log(np.exp(LOGITS).sum(1, keepdims=True))
    keep = LABELS != -100
    picked = -logp[keep, LABELS[keep]] * W[LABELS[keep]]
    got = F.cross_entropy(LOGITS, LABELS, weight=W).item()
    np.testing.assert_allclose(got, picked.sum() / W[LABELS[keep]].sum(), rtol=1e-12)


def test_loss_arguments_are_checked():
    with pytest.raises(ValueError, match="CrossEntropyLoss: reduction"):
        nn.CrossEntropyLoss(reduction="avg")
    with pytest.raises(ValueError, match="reduction"):
        nn.MSELoss(reduction="batchmean")
    assert nn.KLDivLoss(reduction="batchmean").reduction == "batchmean"
    with pytest.raises(ValueError, match=r"weight must have shape \(4,\)"):
        F.nll_loss(LOGITS, LABELS, weight=np.ones(3))
    with pytest.raises(ValueError, match="binary_cross_entropy: target of shape"):
        F.binary_cross_entropy(P01, T01[:2])
    with np.errstate(divide="ignore"):  # log(0), clamped at -100 as torch
        assert nn.BCELoss()(np.array([0.0, 1.0]), np.array([1.0, 0.0])).item() == 100.0
