"""Review findings on layers and losses: argument validation naming the layer and the argument, Embedding's
index range, LayerNorm's single axis, Flatten's shapes, and cross_entropy's class axis (against torch)."""
import numpy as np
import pytest

import autodiff
import nn
import tracer
from nn import functional as F


@pytest.mark.parametrize("kwargs, argument", [
    (dict(kernel_size=0), "kernel_size"),
    (dict(kernel_size=(3, 3, 3)), "kernel_size"),
    (dict(kernel_size=3, stride=0), "stride"),
    (dict(kernel_size=3, padding=-1), "padding"),
    (dict(kernel_size=3, padding="full"), "padding"),
    (dict(kernel_size=3, dilation=0), "dilation"),
    (dict(kernel_size=3, groups=0), "groups"),
])
def test_conv2d_constructor_names_the_bad_argument(kwargs, argument):
    with pytest.raises(ValueError, match=f"Conv2d: {argument}"):
        nn.Conv2d(4, 4, **kwargs)


@pytest.mark.parametrize("cls", [nn.MaxPool2d, nn.AvgPool2d])
@pytest.mark.parametrize("kwargs, argument", [
    (dict(kernel_size=0), "kernel_size"),
    (dict(kernel_size=(2, 2, 2)), "kernel_size"),
    (dict(kernel_size=2, stride=0), "stride"),
    (dict(kernel_size=2, padding=-1), "padding"),
    (dict(kernel_size=2, padding=2), "padding"),  # more than half the window, as torch refuses
])
def test_pool_constructor_names_the_bad_argument(cls, kwargs, argument):
    with pytest.raises(ValueError, match=f"{cls.__name__}: {argument}"):
        cls(**kwargs)


def test_pools_still_accept_what_torch_accepts():
    torch = pytest.importorskip("torch")
    x = np.arange(2 * 3 * 6 * 6, dtype="float32").reshape(2, 3, 6, 6)
    for ours, theirs in ((nn.MaxPool2d((2, 3), stride=(1, 2), padding=1), torch.nn.MaxPool2d((2, 3), (1, 2), 1)),
                         (nn.AvgPool2d(2), torch.nn.AvgPool2d(2))):
        np.testing.assert_allclose(ours(tracer.tensor(x)).numpy(), theirs(torch.tensor(x)).numpy())


def test_embedding_refuses_out_of_range_and_negative_indices():
    torch = pytest.importorskip("torch")
    e = nn.Embedding(10, 4)
    for bad in ([10], [-1], [[3, -2]]):
        with pytest.raises(IndexError):
            torch.nn.Embedding(10, 4)(torch.tensor(bad))
        with pytest.raises(IndexError, match=r"Embedding\(10, 4\).*\[0, 10\)"):
            e(np.array(bad))
    np.testing.assert_array_equal(e(np.array([0, 9])).numpy(), e.weight.numpy()[[0, 9]])


def test_embedding_checks_constant_indices_inside_a_trace_too():
    e = nn.Embedding(5, 2)
    with pytest.raises(IndexError, match="Embedding"):
        autodiff.grad(lambda w: tracer.sum(e(np.array([-1])) * w), wrt=e.weight)(e.weight)


def test_layer_norm_over_several_axes_and_a_wrong_shape():
    assert nn.LayerNorm((3, 5)).weight.shape == (3, 5)  # torch's normalized_shape: the last two axes
    assert nn.LayerNorm((5,)).weight.shape == (5,)  # a 1-tuple is the last axis: fine
    with pytest.raises(ValueError, match=r"LayerNorm\(\(5,\).*\(5, 3\)"):
        nn.LayerNorm(5)(tracer.tensor(np.zeros((5, 3), "float32")))


def test_flatten_matches_torch_on_empty_batches_and_refuses_a_missing_axis():
    torch = pytest.importorskip("torch")
    x = np.zeros((0, 2, 3), "float32")
    assert nn.Flatten()(tracer.tensor(x)).shape == tuple(torch.nn.Flatten()(torch.tensor(x)).shape) == (0, 6)
    y = np.zeros((2, 3, 4, 5), "float32")
    for start, end in ((1, -1), (0, 1), (2, 3), (-2, -1)):
        assert nn.Flatten(start, end)(tracer.tensor(y)).shape == tuple(torch.nn.Flatten(start, end)(torch.tensor(y)).shape)
    with pytest.raises(ValueError, match="Flatten"):
        nn.Flatten()(tracer.tensor(np.zeros(5, "float32")))


def test_cross_entropy_uses_the_class_axis_1_for_nd_inputs_as_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    logits = rng.standard_normal((2, 3, 4)).astype("float32")  # (N, C, d1)
    labels = rng.integers(0, 3, (2, 4))
    probs = rng.random((2, 3, 4)).astype("float32")
    tf = torch.nn.functional
    for reduction in ("mean", "sum", "none"):
        for target in (labels, probs):
            got = F.cross_entropy(tracer.tensor(logits), target, reduction=reduction).numpy()
            want = tf.cross_entropy(torch.tensor(logits), torch.tensor(target), reduction=reduction).numpy()
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_cross_entropy_refuses_label_smoothing_outside_0_1():
    assert "label_smoothing" in F.cross_entropy.__doc__
    with pytest.raises(ValueError, match="label_smoothing"):
        F.cross_entropy(tracer.tensor(np.zeros((2, 3), "float32")), np.array([0, 1]), label_smoothing=1.5)


def test_dropout_p1_drops_everything_and_zero_sized_linear_builds_as_torch():
    import autodiff
    import tracer

    x = tracer.tensor(np.ones((3, 4), "float32"))
    assert not nn.Dropout(1.0)(x).numpy().any()
    g = autodiff.grad(lambda t: tracer.dropout(t, 1.0).sum() + t.sum() * 0.0, wrt=x)(x)
    assert not g.numpy().any()
    layer = nn.Linear(0, 3)
    assert layer.weight.shape == (3, 0) and layer(tracer.tensor(np.ones((2, 0), "float32"))).shape == (2, 3)


def test_module_list_and_small_activations_as_torch():
    torch = pytest.importorskip("torch")
    blocks = nn.ModuleList([nn.Linear(3, 3) for _ in range(2)])
    blocks.append(nn.Identity())
    assert len(blocks) == 3 and isinstance(blocks[1:], nn.ModuleList)
    assert [n for n, _ in blocks.named_parameters()] == ["0.weight", "0.bias", "1.weight", "1.bias"]
    with pytest.raises(TypeError, match="no forward"):
        blocks(tracer.tensor(np.ones(3, "float32")))
    x = np.linspace(-3, 3, 7).astype("float32")
    for ours, theirs in [(nn.Sigmoid(), torch.nn.Sigmoid()), (nn.SiLU(), torch.nn.SiLU()),
                         (nn.Identity(), torch.nn.Identity())]:
        np.testing.assert_allclose(ours(tracer.tensor(x)).numpy(), theirs(torch.tensor(x)).numpy(), rtol=1e-6,
                                   atol=1e-7)
