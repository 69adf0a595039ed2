"""Review findings on layers and losses: argument validation naming the layer and the argument, Embedding's
index range, LayerNorm's single axis, Flatten's shapes, and cross_entropy's class axis (against torch)."""
import numpy as np
import pytest

import autodiff
import nn
import tracer
from nn import functional as F
from tests.nn import references as ref


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


POOL_X = np.arange(2 * 3 * 6 * 6, dtype="float32").reshape(2, 3, 6, 6)


def test_pools_accept_tuples_and_padding():
    x = POOL_X
    np.testing.assert_array_equal(nn.MaxPool2d((2, 3), stride=(1, 2), padding=1)(tracer.tensor(x)).numpy(),
                                  ref.pool2d(x, (2, 3), (1, 2), (1, 1), "max"))
    np.testing.assert_allclose(nn.AvgPool2d(2)(tracer.tensor(x)).numpy(), ref.pool2d(x, (2, 2), (2, 2), (0, 0), "avg"))


def test_pools_still_accept_what_torch_accepts():
    torch = pytest.importorskip("torch")
    x = POOL_X
    for ours, theirs in ((nn.MaxPool2d((2, 3), stride=(1, 2), padding=1), torch.nn.MaxPool2d((2, 3), (1, 2), 1)),
                         (nn.AvgPool2d(2), torch.nn.AvgPool2d(2))):
        np.testing.assert_allclose(ours(tracer.tensor(x)).numpy(), theirs(torch.tensor(x)).numpy())


BAD_INDICES = ([10], [-1], [[3, -2]])


def test_embedding_refuses_out_of_range_and_negative_indices():
    e = nn.Embedding(10, 4)
    for bad in BAD_INDICES:
        with pytest.raises(IndexError, match=r"Embedding\(10, 4\).*\[0, 10\)"):
            e(np.array(bad))
    np.testing.assert_array_equal(e(np.array([0, 9])).numpy(), e.weight.numpy()[[0, 9]])


def test_torch_refuses_the_same_embedding_indices():
    torch = pytest.importorskip("torch")
    for bad in BAD_INDICES:
        with pytest.raises(IndexError):
            torch.nn.Embedding(10, 4)(torch.tensor(bad))


def test_embedding_checks_constant_indices_inside_a_trace_too():
    e = nn.Embedding(5, 2)
    with pytest.raises(IndexError, match="Embedding"):
        autodiff.grad(lambda w: tracer.sum(e(np.array([-1])) * w), wrt=e.weight)(e.weight)


def test_layer_norm_over_several_axes_and_a_wrong_shape():
    assert nn.LayerNorm((3, 5)).weight.shape == (3, 5)  # torch's normalized_shape: the last two axes
    assert nn.LayerNorm((5,)).weight.shape == (5,)  # a 1-tuple is the last axis: fine
    with pytest.raises(ValueError, match=r"LayerNorm\(\(5,\).*\(5, 3\)"):
        nn.LayerNorm(5)(tracer.tensor(np.zeros((5, 3), "float32")))


# (start, end) -> the shape torch.nn.Flatten gives for a (2, 3, 4, 5) input
FLATTENED = {(1, -1): (2, 60), (0, 1): (6, 4, 5), (2, 3): (2, 3, 20), (-2, -1): (2, 3, 20), (0, -1): (120,)}


def test_flatten_on_empty_batches_and_a_missing_axis():
    assert nn.Flatten()(tracer.tensor(np.zeros((0, 2, 3), "float32"))).shape == (0, 6)
    y = np.arange(120, dtype="float32").reshape(2, 3, 4, 5)
    for (start, end), shape in FLATTENED.items():
        out = nn.Flatten(start, end)(tracer.tensor(y)).numpy()
        assert out.shape == shape
        np.testing.assert_array_equal(out.reshape(-1), y.reshape(-1))
    with pytest.raises(ValueError, match="Flatten"):
        nn.Flatten()(tracer.tensor(np.zeros(5, "float32")))


def test_flatten_shapes_are_torchs():
    torch = pytest.importorskip("torch")
    assert tuple(torch.nn.Flatten()(torch.zeros(0, 2, 3)).shape) == (0, 6)
    for (start, end), shape in FLATTENED.items():
        assert tuple(torch.nn.Flatten(start, end)(torch.zeros(2, 3, 4, 5)).shape) == shape


_rng = np.random.default_rng(0)
CE_LOGITS = _rng.standard_normal((2, 3, 4)).astype("float32")  # (N, C, d1)
CE_LABELS = _rng.integers(0, 3, (2, 4))
CE_PROBS = _rng.random((2, 3, 4)).astype("float32")


def _cross_entropy_ref(logits, target, reduction):
    """torch's cross_entropy with the classes on axis 1, in float64 loops."""
    x = logits.astype(np.float64)
    logp = x - np.log(np.exp(x).sum(axis=1, keepdims=True))
    per = np.zeros((x.shape[0],) + x.shape[2:])
    for n, d in np.ndindex(per.shape):
        if target.dtype.kind == "f":
            per[n, d] = -sum(target[n, c, d] * logp[n, c, d] for c in range(x.shape[1]))
        else:
            per[n, d] = -logp[n, target[n, d], d]
    return {"none": per, "sum": per.sum(), "mean": per.mean()}[reduction]


def test_cross_entropy_uses_the_class_axis_1_for_nd_inputs():
    for reduction in ("mean", "sum", "none"):
        for target in (CE_LABELS, CE_PROBS):
            got = F.cross_entropy(tracer.tensor(CE_LOGITS), target, reduction=reduction).numpy()
            np.testing.assert_allclose(got, _cross_entropy_ref(CE_LOGITS, target, reduction), rtol=1e-5, atol=1e-6)


def test_cross_entropy_uses_the_class_axis_1_for_nd_inputs_as_torch():
    torch = pytest.importorskip("torch")
    logits, labels, probs = CE_LOGITS, CE_LABELS, CE_PROBS
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


def test_module_list_and_small_activations():
    blocks = nn.ModuleList([nn.Linear(3, 3) for _ in range(2)])
    blocks.append(nn.Identity())
    assert len(blocks) == 3 and isinstance(blocks[1:], nn.ModuleList) and len(blocks[1:]) == 2
    assert blocks[1:][0] is blocks[1] and blocks[-1] is blocks[2] and list(blocks) == [blocks[0], blocks[1], blocks[2]]
    assert [n for n, _ in blocks.named_parameters()] == ["0.weight", "0.bias", "1.weight", "1.bias"]
    assert list(blocks.state_dict()) == ["0.weight", "0.bias", "1.weight", "1.bias"]
    with pytest.raises(TypeError, match="no forward"):
        blocks(tracer.tensor(np.ones(3, "float32")))
    x = np.linspace(-3, 3, 7)
    sigmoid = 1 / (1 + np.exp(-x))
    for layer, want in [(nn.Sigmoid(), sigmoid), (nn.SiLU(), x * sigmoid), (nn.Identity(), x)]:
        np.testing.assert_allclose(layer(tracer.tensor(x.astype("float32"))).numpy(), want, rtol=1e-6, atol=1e-7)


def test_small_activations_as_torch():
    torch = pytest.importorskip("torch")
    x = np.linspace(-3, 3, 7).astype("float32")
    for ours, theirs in [(nn.Sigmoid(), torch.nn.Sigmoid()), (nn.SiLU(), torch.nn.SiLU()),
                         (nn.Identity(), torch.nn.Identity())]:
        np.testing.assert_allclose(ours(tracer.tensor(x)).numpy(), theirs(torch.tensor(x)).numpy(), rtol=1e-6,
                                   atol=1e-7)
