"""Review of issue 11's nn side, as a PyTorch user writes it: loss modules given tracer tensors for
weight/pos_weight, and the layers in compiled steps."""
import numpy as np
import pytest

import nn
import tracer

RNG = np.random.default_rng(0)
X = RNG.standard_normal((6, 5))
Y = np.array([0, 1, 4, 2, 1, 3])
W = np.abs(RNG.standard_normal(5)) + 0.1


@pytest.mark.parametrize("make", [
    lambda w: nn.CrossEntropyLoss(weight=w),
    lambda w: nn.NLLLoss(weight=w),
])
def test_loss_module_keeps_a_tensor_weight(make):
    # a weight given as a tracer.Tensor (torch's habit: torch.tensor([...])) used to be dropped silently
    from_tensor, from_array = make(tracer.tensor(W)), make(W)
    assert from_tensor.weight is not None
    np.testing.assert_allclose(from_tensor(tracer.tensor(X), Y).numpy(), from_array(tracer.tensor(X), Y).numpy())
    unweighted = make(None)(tracer.tensor(X), Y).numpy()
    assert not np.allclose(from_tensor(tracer.tensor(X), Y).numpy(), unweighted)


def test_bce_modules_keep_tensor_weight_and_pos_weight():
    p, t = RNG.uniform(0.05, 0.95, (4, 3)), RNG.uniform(0, 1, (4, 3))
    w, pw = np.array([0.5, 1.0, 2.0]), np.array([1.0, 2.0, 3.0])
    bce = nn.BCELoss(weight=tracer.tensor(w), reduction="none")(tracer.tensor(p), tracer.tensor(t)).numpy()
    np.testing.assert_allclose(bce, -w * (t * np.log(p) + (1 - t) * np.log(1 - p)))
    logits = tracer.tensor(np.log(p / (1 - p)))
    m = nn.BCEWithLogitsLoss(weight=tracer.tensor(w), pos_weight=tracer.tensor(pw), reduction="none")
    np.testing.assert_allclose(m(logits, tracer.tensor(t)).numpy(),
                               -w * (pw * t * np.log(p) + (1 - t) * np.log(1 - p)), rtol=1e-10)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_weighted_losses_match_torch(reduction):
    torch = pytest.importorskip("torch")
    y = Y.copy()
    y[-1] = -100
    pairs = [
        (nn.CrossEntropyLoss(weight=tracer.tensor(W), label_smoothing=0.2, reduction=reduction),
         torch.nn.CrossEntropyLoss(weight=torch.tensor(W), label_smoothing=0.2, reduction=reduction), y),
        (nn.NLLLoss(weight=tracer.tensor(W), ignore_index=1, reduction=reduction),
         torch.nn.NLLLoss(weight=torch.tensor(W), ignore_index=1, reduction=reduction), Y),
    ]
    for ours, theirs, labels in pairs:
        np.testing.assert_allclose(ours(tracer.tensor(X), labels).numpy(),
                                   theirs(torch.tensor(X), torch.tensor(labels)).numpy(), rtol=1e-10)


@pytest.mark.parametrize("make, shape", [
    (lambda: nn.GroupNorm(2, 4), (3, 4, 5)),
    (lambda: nn.LayerNorm(4), (3, 4)),
    (lambda: nn.LayerNorm(4, elementwise_affine=False), (3, 4)),
    (lambda: nn.BatchNorm1d(4, affine=False), (3, 4)),
    (lambda: nn.BatchNorm1d(4, affine=False, track_running_stats=False), (3, 4)),
])
def test_norm_layers_take_float64_after_model_to_float64(make, shape):
    # model.to("float64") used to leave these layers checking their input against float32
    model = nn.Sequential(make()).to("float64")
    x = RNG.standard_normal(shape)
    y = model(x)
    assert y.dtype == "float64"
    axes = tuple(range(1, len(shape))) if not isinstance(model[0], nn.BatchNorm1d) else (0,)
    if isinstance(model[0], nn.GroupNorm):
        g = x.reshape(3, 2, -1)
        want = ((g - g.mean(2, keepdims=True)) / np.sqrt(g.var(2, keepdims=True) + 1e-5)).reshape(shape)
    else:
        want = (x - x.mean(axes, keepdims=True)) / np.sqrt(x.var(axes, keepdims=True) + 1e-5)
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-10)
    with pytest.raises(TypeError, match="float32 does not match the layer's weight dtype float64"):
        model(x.astype("float32"))


def test_embedding_padding_idx_row_is_zero_and_gets_no_gradient():
    import autodiff
    e = nn.Embedding(5, 3, padding_idx=-4, dtype="float64")  # -4 is row 1, as torch counts it
    assert e.padding_idx == 1 and np.all(e.weight.numpy()[1] == 0) and "padding_idx=1" in repr(e)
    e.weight._data[1] = 2.0  # a loaded row keeps its values and still gets no gradient
    idx = np.array([[0, 1, 2], [1, 4, 1]])
    out = e(idx)
    np.testing.assert_array_equal(out.numpy()[0, 1], [2.0, 2.0, 2.0])
    _, (g,) = autodiff.value_and_grad(lambda i: (e(i) ** 2).sum(), wrt=[e.weight])(idx)
    want = np.zeros((5, 3))
    np.add.at(want, idx.ravel(), 2 * e.weight.numpy()[idx.ravel()])
    want[1] = 0
    np.testing.assert_allclose(np.asarray(g), want)
    with pytest.raises(ValueError, match="Embedding: padding_idx must be an int in"):
        nn.Embedding(5, 3, padding_idx=5)


def test_embedding_padding_idx_matches_torch():
    torch = pytest.importorskip("torch")
    import autodiff
    theirs = torch.nn.Embedding(5, 3, padding_idx=1).double()
    ours = nn.Embedding(5, 3, padding_idx=1, dtype="float64")
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    idx = np.array([[0, 1, 2], [1, 4, 1]])
    _, (g,) = autodiff.value_and_grad(lambda i: (ours(i) ** 2).sum(), wrt=[ours.weight])(idx)
    (theirs(torch.tensor(idx)) ** 2).sum().backward()
    np.testing.assert_allclose(np.asarray(g), theirs.weight.grad.numpy())
