"""Embedding, EmbeddingBag and the remaining losses against torch: values and gradients (inputs and weights),
float32 and float64, eagerly, in value_and_grad and with backward()."""
import numpy as np
import pytest

import autodiff
import nn
import tracer
from nn import functional as F

from .torch_compare import TOL, assert_module_matches

rng = np.random.default_rng(0)
IDX = np.array([[1, 4, 0], [4, 4, 2]])
FLAT, OFFSETS = np.array([1, 4, 0, 4, 4, 2, 3]), np.array([0, 2, 2, 5])

EMB = {  # name: (ours(dtype), torch's(tnn, dtype), inputs)
    "embedding_padding": (lambda d: nn.Embedding(5, 3, padding_idx=4, dtype=d),
                          lambda t, d: t.Embedding(5, 3, padding_idx=4, dtype=d), [IDX]),
    "embedding_max_norm": (lambda d: nn.Embedding(5, 3, max_norm=1.0, dtype=d),
                           lambda t, d: t.Embedding(5, 3, max_norm=1.0, dtype=d), [IDX]),
    "embedding_freq": (lambda d: nn.Embedding(5, 3, scale_grad_by_freq=True, dtype=d),
                       lambda t, d: t.Embedding(5, 3, scale_grad_by_freq=True, dtype=d), [IDX]),
    "bag_mean_2d": (lambda d: nn.EmbeddingBag(5, 3, dtype=d), lambda t, d: t.EmbeddingBag(5, 3, dtype=d), [IDX]),
    "bag_sum_offsets_empty": (lambda d: nn.EmbeddingBag(5, 3, mode="sum", dtype=d),
                              lambda t, d: t.EmbeddingBag(5, 3, mode="sum", dtype=d), [FLAT, OFFSETS]),
    "bag_max_padding": (lambda d: nn.EmbeddingBag(5, 3, mode="max", padding_idx=4, dtype=d),
                        lambda t, d: t.EmbeddingBag(5, 3, mode="max", padding_idx=4, dtype=d), [FLAT, OFFSETS]),
    "bag_mean_last_offset": (lambda d: nn.EmbeddingBag(5, 3, include_last_offset=True, padding_idx=0, dtype=d),
                             lambda t, d: t.EmbeddingBag(5, 3, include_last_offset=True, padding_idx=0, dtype=d),
                             [FLAT, np.array([0, 3, 7])]),
}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", EMB)
def test_embedding_matches_torch(name, dtype):
    torch = pytest.importorskip("torch")
    ours, theirs, inputs = EMB[name]
    assert_module_matches(torch, lambda: ours(dtype), lambda: theirs(torch.nn, getattr(torch, dtype)), inputs, dtype)


def test_per_sample_weights_from_pretrained_and_reprs():
    torch = pytest.importorskip("torch")
    table = rng.standard_normal((5, 3))
    psw = rng.uniform(0.5, 2, FLAT.shape)
    ours = nn.EmbeddingBag.from_pretrained(tracer.tensor(table), mode="sum", freeze=False)
    theirs = torch.nn.EmbeddingBag.from_pretrained(torch.tensor(table), mode="sum", freeze=False)
    p, tp = tracer.tensor(psw, requires_grad=True), torch.tensor(psw, requires_grad=True)
    ours(FLAT, OFFSETS, p).sum().backward()
    want = theirs(torch.tensor(FLAT), torch.tensor(OFFSETS), tp)
    want.sum().backward()
    np.testing.assert_allclose(ours(FLAT, OFFSETS, psw).numpy(), want.detach().numpy(), **TOL["float64"])
    np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), **TOL["float64"])
    np.testing.assert_allclose(ours.weight.grad.numpy(), theirs.weight.grad.numpy(), **TOL["float64"])
    frozen = nn.Embedding.from_pretrained(tracer.tensor(table), padding_idx=1)
    assert not frozen.weight.requires_grad and frozen.embedding_dim == 3
    for a, b in [(nn.Embedding(5, 3, padding_idx=0, max_norm=1.0), torch.nn.Embedding(5, 3, padding_idx=0, max_norm=1.0)),
                 (nn.EmbeddingBag(5, 3, mode="max", padding_idx=1), torch.nn.EmbeddingBag(5, 3, mode="max", padding_idx=1)),
                 (nn.CTCLoss(), torch.nn.CTCLoss()), (nn.TripletMarginLoss(), torch.nn.TripletMarginLoss())]:
        assert repr(a) == repr(b)
    assert nn.Embedding(5, 3, padding_idx=2).weight.numpy()[2].tolist() == [0.0, 0.0, 0.0]


def test_max_norm_renormalises_the_weight_in_place_in_a_compiled_step_as_eagerly():
    eager, compiled = nn.Embedding(5, 3, max_norm=0.5, dtype="float64"), nn.Embedding(5, 3, max_norm=0.5, dtype="float64")
    compiled.load_state_dict(eager.state_dict())
    eager(IDX)
    autodiff.value_and_grad(lambda i: compiled(i).sum(), wrt=compiled.parameters())(IDX)
    np.testing.assert_allclose(compiled.weight.numpy(), eager.weight.numpy(), rtol=1e-12)
    norms = np.linalg.norm(eager.weight.numpy()[[0, 1, 2, 4]], axis=1)
    assert (norms <= 0.5 + 1e-6).all()  # the looked-up rows; row 3 (not looked up) is left as it was


X1, X2 = rng.standard_normal((4, 5)), rng.standard_normal((4, 5))
SIGN = np.array([1.0, -1.0, 1.0, -1.0])
LABELS = np.array([0, 3, 4, 1])
LOSSES = {  # name: (module args (F namespace, torch?) -> module, inputs)
    "cosine_embedding": (lambda m, T: m.CosineEmbeddingLoss(margin=0.2), [X1, X2, SIGN]),
    "margin_ranking_sum": (lambda m, T: m.MarginRankingLoss(0.5, reduction="sum"), [X1[:, 0], X2[:, 0], SIGN]),
    "triplet_swap": (lambda m, T: m.TripletMarginLoss(margin=2.0, swap=True), [X1, X2, X1 * 0.5 + 0.3]),
    "triplet_p1_none": (lambda m, T: m.TripletMarginLoss(p=1, reduction="none"), [X1, X2, -X1]),
    "hinge_embedding": (lambda m, T: m.HingeEmbeddingLoss(margin=0.7), [X1[:, 0], SIGN]),
    "multilabel_soft_margin": (lambda m, T: m.MultiLabelSoftMarginLoss(weight=T(np.linspace(0.5, 2, 5))),
                               [X1, (X2 > 0).astype(float)]),
    "multi_margin_p2_weight": (lambda m, T: m.MultiMarginLoss(p=2, margin=0.8, weight=T(np.linspace(0.5, 2, 5))),
                               [X1, LABELS]),
    "multi_margin_none": (lambda m, T: m.MultiMarginLoss(reduction="none"), [X1, LABELS]),
    "poisson_full": (lambda m, T: m.PoissonNLLLoss(full=True), [X1, np.abs(X2) * 3]),
    "poisson_not_log": (lambda m, T: m.PoissonNLLLoss(log_input=False), [np.abs(X1) + 0.1, np.abs(X2) * 3]),
    "gaussian_full": (lambda m, T: m.GaussianNLLLoss(full=True), [X1, X2, np.abs(X2) + 1e-7]),
    "gaussian_per_sample_var": (lambda m, T: m.GaussianNLLLoss(reduction="sum"), [X1, X2, np.abs(X1[:, 0]) + 0.1]),
    "soft_margin": (lambda m, T: m.SoftMarginLoss(), [X1 * 30, np.sign(X2)]),
    "bce_logits_large_pos_weight": (lambda m, T: m.BCEWithLogitsLoss(pos_weight=T(np.linspace(0.5, 2, 5))),
                                    [X1 * 200, (X2 > 0).astype(float)]),
    "ce_probability_targets_smoothing": (lambda m, T: m.CrossEntropyLoss(label_smoothing=0.3),
                                         [X1, np.exp(X2) / np.exp(X2).sum(1, keepdims=True)]),
    "kl_log_target": (lambda m, T: m.KLDivLoss(reduction="batchmean", log_target=True), [X1, -np.abs(X2)]),
    "huber": (lambda m, T: m.HuberLoss(delta=0.5, reduction="sum"), [X1, X2]),
}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", LOSSES)
def test_loss_matches_torch(name, dtype):
    torch = pytest.importorskip("torch")
    make, inputs = LOSSES[name]
    inputs = [a.astype(dtype) if a.dtype.kind == "f" else a for a in inputs]
    ours = make(nn, lambda a: a.astype(dtype))
    theirs = make(torch.nn, lambda a: torch.tensor(a.astype(dtype)))
    # differentiated: every float input but the target (the last input; for gaussian_nll the target and var's)
    floats = [0, 2] if "gaussian" in name else [0, 1, 2] if "triplet" in name else list(range(len(inputs) - 1))
    targs = [torch.tensor(a, requires_grad=i in floats) for i, a in enumerate(inputs)]
    want = theirs(*targs)
    want.sum().backward()
    tol = TOL[dtype]
    got = ours(*inputs)
    np.testing.assert_allclose(got.numpy(), want.detach().numpy(), **tol)
    args = [tracer.tensor(a) for a in inputs]
    _, grads = autodiff.value_and_grad(lambda *a: ours(*a).sum(), wrt=[args[i] for i in floats])(*args)
    leaves = [tracer.tensor(a, requires_grad=i in floats) for i, a in enumerate(inputs)]
    ours(*leaves).sum().backward()
    for k, i in enumerate(floats):
        np.testing.assert_allclose(np.asarray(grads[k]), targs[i].grad.numpy(), **tol, err_msg=f"input {i}")
        np.testing.assert_allclose(leaves[i].grad.numpy(), targs[i].grad.numpy(), **tol, err_msg=f"input {i}")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_ctc_loss_matches_torch(dtype):
    torch = pytest.importorskip("torch")
    T_, N, C = 6, 3, 5
    x = rng.standard_normal((T_, N, C)).astype(dtype)
    targets = np.array([[1, 2, 2], [3, 3, 1], [4, 1, 1]])
    in_len, tgt_len = [6, 5, 2], [3, 2, 0]
    flat = np.concatenate([t[:k] for t, k in zip(targets, tgt_len, strict=True)])
    for reduction, zero_inf, tg in [("mean", False, targets), ("sum", True, flat), ("none", False, targets)]:
        tx = torch.tensor(x, requires_grad=True)
        want = torch.nn.CTCLoss(blank=0, reduction=reduction, zero_infinity=zero_inf)(
            tx.log_softmax(2), torch.tensor(tg), torch.tensor(in_len), torch.tensor(tgt_len))
        want.sum().backward()
        loss = nn.CTCLoss(reduction=reduction, zero_infinity=zero_inf)
        xt = tracer.tensor(x)
        value, grad = autodiff.value_and_grad(
            lambda a, loss=loss, tg=tg: loss(tracer.log_softmax(a, axis=2), tg, in_len, tgt_len).sum(), wrt=xt)(xt)
        np.testing.assert_allclose(float(value), want.sum().item(), **TOL[dtype])
        np.testing.assert_allclose(np.asarray(grad), tx.grad.numpy(), **TOL[dtype], err_msg=reduction)
    # torch's gradient with respect to a leaf of log-probabilities, and an impossible alignment
    lp = torch.tensor(x).log_softmax(2).numpy()
    tl = torch.tensor(lp, requires_grad=True)
    torch.nn.functional.ctc_loss(tl, torch.tensor(targets), [6, 5, 4], [3, 3, 2], reduction="sum").backward()
    leaf = tracer.tensor(lp, requires_grad=True)
    F.ctc_loss(leaf, targets, [6, 5, 4], [3, 3, 2], reduction="sum").backward()
    np.testing.assert_allclose(leaf.grad.numpy(), tl.grad.numpy(), **TOL[dtype])
    short = F.ctc_loss(lp[:, :1], np.array([[1, 1, 1]]), [2], [3], reduction="none")  # needs 5 steps, has 2
    assert np.isinf(short.numpy()).all()
    assert F.ctc_loss(lp[:, :1], np.array([[1, 1, 1]]), [2], [3], zero_infinity=True).item() == 0.0


def test_loss_errors_name_the_cause():
    with pytest.raises(ValueError, match="var is of incorrect size"):
        F.gaussian_nll_loss(X1, X2, np.ones(3))
    with pytest.raises(ValueError, match="negative"):
        F.gaussian_nll_loss(X1, X2, -np.ones_like(X1))
    with pytest.raises(ValueError, match="only p == 1 and p == 2"):
        nn.MultiMarginLoss(p=3)
    with pytest.raises(NotImplementedError, match="per_sample_weights is only supported for mode='sum'"):
        nn.EmbeddingBag(5, 3)(FLAT, OFFSETS, np.ones(7))
    with pytest.raises(ValueError, match="offsets has to be None"):
        nn.EmbeddingBag(5, 3)(IDX, OFFSETS)
    with pytest.raises(ValueError, match="reduction"):
        nn.SoftMarginLoss(reduction="avg")
    assert nn.MarginRankingLoss(size_average=False).reduction == "sum"
