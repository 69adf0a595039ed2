"""Errors that name the user's layer (issue 24 item 4): a shape mistake in a layer of a model says which module
(its repr), where it is in the model (named_modules' dotted name), the input's shape, what was expected and the
likely fix; the exception type stays the op's (IRError, a ValueError and RuntimeError, for the ops), the op's own
error is the __cause__, and a compiled step (value_and_grad) and the loss.backward() path raise the same message
as an eager call. Each mistake is checked to be one in torch too."""
import numpy as np
import pytest

import autodiff
import nn
import tracer
from ir import IRError
from tests.torch_optional import torch

TORCH_ERRORS = (RuntimeError, ValueError, IndexError, TypeError)


def _x(shape, dtype="float32"):
    return np.random.default_rng(0).standard_normal(shape).astype(dtype) if dtype.startswith("float") else \
        np.random.default_rng(0).integers(0, 3, shape).astype(dtype)


# id: (build(nn_namespace) -> model, input shape, input dtype, exception type, path, words the message has)
LAYER_CASES = {
    "linear_missing_flatten": (
        lambda n: n.Sequential(n.ReLU(), n.Tanh(), n.Linear(64, 32)), (32, 8, 8), "float32", IRError, "model.2",
        ["Linear(in_features=64, out_features=32, bias=True) at model.2 (model: Sequential)", "(32, 8, 8)",
         "in_features=64", "nn.Flatten()", "x.flatten(1) gives (32, 64)", "op-level message: matmul: x1 of shape (32, 8, 8)"]),
    "linear_wrong_in_features": (
        lambda n: n.Sequential(n.Linear(10, 60), n.ReLU(), n.Linear(64, 32)), (5, 10), "float32", IRError,
        "model.2", ["input of shape (5, 60)", "expected in_features=64", "nn.Linear(60, 32)"]),
    "conv2d_channels": (
        lambda n: n.Sequential(n.Conv2d(1, 4, 3), n.ReLU(), n.Conv2d(8, 4, 3)), (2, 1, 9, 9), "float32", IRError,
        "model.2", ["Conv2d(8, 4, kernel_size=(3, 3)", "input of shape (2, 4, 7, 7) has 4 channels on axis 1, expected in_channels=8",
                    "Conv2d(4, 4, ...)"]),
    "conv2d_channels_last": (
        lambda n: n.Sequential(n.Conv2d(3, 4, 3)), (2, 8, 8, 3), "float32", IRError, "model.0",
        ["input of shape (2, 8, 8, 3) has 8 channels", "channels-last", "x.permute(0, 3, 1, 2)"]),
    "conv2d_missing_channel_axis": (
        lambda n: n.Sequential(n.Conv2d(1, 4, 3)), (8, 8), "float32", RuntimeError, "model.0",
        ["has 2 dimensions, expected 4 (N, C, H, W) or 3 unbatched", "x.unsqueeze(-3)"]),
    "conv2d_input_too_small": (
        lambda n: n.Sequential(n.Conv2d(3, 4, 5)), (2, 3, 3, 3), "float32", IRError, "model.0",
        ["spatial size (3, 3)", "smaller than the (dilated) kernel (5, 5)"]),
    "conv1d_channels": (
        lambda n: n.Sequential(n.Conv1d(3, 8, 3)), (2, 4, 16), "float32", IRError, "model.0",
        ["Conv1d(3, 8", "has 4 channels on axis 1, expected in_channels=3", "(N, C, L"]),
    "conv3d_channels": (
        lambda n: n.Sequential(n.Conv3d(2, 4, 1)), (1, 3, 2, 2, 2), "float32", IRError, "model.0",
        ["Conv3d(2, 4", "has 3 channels on axis 1, expected in_channels=2"]),
    "conv_transpose2d_channels": (
        lambda n: n.Sequential(n.ConvTranspose2d(3, 8, 3)), (2, 4, 5, 5), "float32", RuntimeError, "model.0",
        ["ConvTranspose2d(3, 8", "has 4 channels on axis 1, expected in_channels=3"]),
    "embedding_float_indices": (
        lambda n: n.Sequential(n.Embedding(10, 4)), (2, 3), "float32", TypeError, "model.0",
        ["Embedding(10, 4) at model.0", "indices of dtype float32", "x.long()"]),
    "layer_norm_shape": (
        lambda n: n.Sequential(n.Linear(4, 8), n.LayerNorm(16)), (2, 4), "float32", ValueError, "model.1",
        ["does not end in normalized_shape=(16,)", "input of shape (2, 8)", "nn.LayerNorm((8,))"]),
    "layer_norm_channels_first": (
        lambda n: n.Sequential(n.LayerNorm(3)), (2, 3, 4, 4), "float32", ValueError, "model.0",
        ["holds (3,) on axis 1", "x.permute(0, 2, 3, 1)", "nn.GroupNorm(1, 3)"]),
    "batch_norm_channels": (
        lambda n: n.Sequential(n.Conv2d(1, 8, 3), n.BatchNorm2d(16)), (2, 1, 6, 6), "float32", ValueError,
        "model.1", ["BatchNorm2d(16", "has 8 channels on axis 1, expected num_features=16", "BatchNorm2d(8)"]),
    "batch_norm_dims": (
        lambda n: n.Sequential(n.BatchNorm2d(4)), (2, 4), "float32", ValueError, "model.0",
        ["is 2-d, expected 4-d", "nn.BatchNorm1d(4)"]),
}


def _tracegrad_error(model, x):
    with pytest.raises(Exception) as info:
        model(x)
    return info.value


@pytest.mark.parametrize("case", list(LAYER_CASES))
def test_a_layer_error_names_the_layer_its_path_the_shape_and_the_fix(case):
    build, shape, dtype, kind, path, words = LAYER_CASES[case]
    model = build(nn)
    x = _x(shape, dtype)
    error = _tracegrad_error(model, x)
    assert type(error) is not Exception and isinstance(error, kind), repr(error)
    message = str(error)
    assert f" at {path} (model: Sequential): " in message
    for w in words:
        assert w in message, (w, message)
    # the op's own error stays reachable (when an op raised it; LayerNorm and BatchNorm check themselves)
    if error.__cause__ is not None:
        assert type(error.__cause__) is type(error) and str(error.__cause__) != message
    # the same call is a mistake in torch too
    with pytest.raises(TORCH_ERRORS):
        build(torch.nn)(torch.from_numpy(x))


@pytest.mark.parametrize("case", list(LAYER_CASES))
def test_a_compiled_step_and_loss_backward_raise_the_eager_message(case):
    build, shape, dtype, kind, path, words = LAYER_CASES[case]
    model = build(nn)
    x = _x(shape, dtype)
    eager = str(_tracegrad_error(model, x))
    step = autodiff.value_and_grad(lambda x: tracer.sum(model(x)), wrt=list(model.parameters()))
    with pytest.raises(kind) as compiled:
        step(x)
    assert str(compiled.value) == eager
    with pytest.raises(kind) as backward:  # the torch loop: the forward records, backward() never comes
        tracer.sum(model(tracer.tensor(x))).backward()
    assert str(backward.value) == eager


def test_the_path_is_the_dotted_name_from_the_outermost_module_called():
    model = nn.Transformer(d_model=16, nhead=2, num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=32)
    model.encoder.layers[0].linear1 = nn.Linear(17, 32)
    src, tgt = _x((5, 2, 16)), _x((3, 2, 16))
    with pytest.raises(IRError) as info:
        model(src, tgt)
    assert "Linear(in_features=17, out_features=32, bias=True) at model.encoder.layers.0.linear1 (model: " \
           "Transformer)" in str(info.value)
    assert "make this nn.Linear(16, 32)" in str(info.value)
    with pytest.raises(IRError) as inner:  # called on a part, the path starts there
        model.encoder(src)
    assert "at model.layers.0.linear1 (model: TransformerEncoder)" in str(inner.value)


def test_a_layer_called_alone_has_no_path_and_hooks_keep_the_message():
    layer = nn.Linear(64, 32)
    with pytest.raises(IRError) as alone:
        layer(_x((4, 8, 8)))
    assert str(alone.value).startswith("Linear(in_features=64, out_features=32, bias=True): input of shape (4, 8, 8)")
    model = nn.Sequential(layer)
    seen = []
    layer.register_forward_pre_hook(lambda m, args: seen.append(args[0].shape))
    with pytest.raises(IRError) as hooked:
        model(_x((4, 8, 8)))
    assert seen == [(4, 8, 8)] and " at model.0 (model: Sequential): " in str(hooked.value)


def test_a_layer_the_model_does_not_register_is_named_without_a_path():
    class Holder(nn.Module):
        def __init__(self):
            super().__init__()
            self.hidden = [nn.Linear(3, 2)]  # a plain list: not a submodule

        def forward(self, x):
            return self.hidden[0](x)

    with pytest.raises(IRError) as info:
        Holder()(_x((2, 5)))
    assert str(info.value).startswith("Linear(in_features=3, out_features=2, bias=True): input of shape (2, 5)")


def test_errors_that_are_not_shape_mistakes_pass_through_unchanged():
    layer = nn.Linear(4, 2)
    with pytest.raises(TypeError, match="input dtype float64 does not match"):
        layer(np.zeros((2, 4), "float64"))
    with pytest.raises(ValueError, match=r"^Flatten: start_dim 3"):
        nn.Sequential(nn.Flatten(3))(np.zeros((2, 4), "float32"))


def test_an_index_out_of_range_keeps_the_ops_message_eager_and_compiled():
    """Found only when a compiled step runs, after every module call returned: the op's message (which names
    the layer or op, the index and the range) is the one both ways raise, with no path added eagerly either."""
    model = nn.Sequential(nn.Embedding(10, 4), nn.Flatten(), nn.Linear(8, 3))
    step = autodiff.value_and_grad(lambda i: tracer.sum(model(i)), wrt=list(model.parameters()))
    step(np.array([[1, 2]]))
    for bad in ([[1, 10]], [[1, -1]]):
        with pytest.raises(IndexError) as eager:
            model(np.array(bad))
        with pytest.raises(IndexError) as compiled:
            step(np.array(bad))
        assert str(eager.value) == str(compiled.value) == \
            f"Embedding(10, 4): index {bad[0][1]} is out of range [0, 10)"
    criterion = nn.CrossEntropyLoss()
    logits = tracer.tensor(_x((4, 10)))
    loss_step = autodiff.value_and_grad(lambda a, t: criterion(a, t), wrt=logits)
    loss_step(logits, np.array([0, 1, 2, 3]))
    with pytest.raises(IndexError) as eager:
        criterion(logits, np.array([0, 1, 2, 10]))
    with pytest.raises(IndexError) as compiled:
        loss_step(logits, np.array([0, 1, 2, 10]))
    assert str(eager.value) == str(compiled.value) == "nll_loss: target 10 out of range for 10 classes " \
        "(ignore_index=-100)"
    with pytest.raises(IndexError):
        torch.nn.Embedding(10, 4)(torch.from_numpy(np.array([[1, 10]])))
    with pytest.raises(IndexError):
        torch.nn.CrossEntropyLoss()(torch.from_numpy(_x((4, 10))), torch.from_numpy(np.array([0, 1, 2, 10])))


# id: (build(nn_namespace) -> loss, input, target, exception type, words the message has)
LOSS_CASES = {
    "ce_target_extra_axis": (lambda n: n.CrossEntropyLoss(), _x((4, 10)), _x((4, 1), "int64"), IRError,
                             ["CrossEntropyLoss(): input of shape (4, 10)", "target of shape (4, 1)",
                              "target.squeeze(1)"]),
    "ce_batch_sizes": (lambda n: n.CrossEntropyLoss(), _x((4, 10)), _x((3,), "int64"), IRError,
                       ["the batch sizes differ (4 and 3)"]),
    "ce_one_hot": (lambda n: n.CrossEntropyLoss(), _x((4, 3)), np.eye(3, dtype="int64")[[0, 1, 2, 0]], IRError,
                   ["looks one-hot", "target.argmax(dim=1)"]),
    "ce_float_indices": (lambda n: n.CrossEntropyLoss(), _x((4, 10)), np.array([0.0, 1, 2, 3], "float32"),
                         ValueError, ["target of dtype float32", "target.long()", "class probabilities"]),
    "nll_target_extra_axis": (lambda n: n.NLLLoss(), _x((4, 10)), _x((4, 1), "int64"), IRError,
                              ["NLLLoss(): input of shape (4, 10)", "target.squeeze(1)"]),
    "mse_shapes": (lambda n: n.MSELoss(), _x((4, 3)), _x((4, 2)), IRError,
                   ["MSELoss(): input of shape (4, 3) and target of shape (4, 2) must have the same shape"]),
    "l1_batch": (lambda n: n.L1Loss(), _x((4, 3)), _x((5, 3)), IRError, ["the batch sizes differ (4 and 5)"]),
    "bce_extra_axis": (lambda n: n.BCELoss(), 1 / (1 + np.exp(-_x((4, 1)))), _x((4,)) > 0, ValueError,
                       ["BCELoss(): input of shape (4, 1) and target of shape (4,)", "input.squeeze(1)"]),
    "bce_logits_extra_axis": (lambda n: n.BCEWithLogitsLoss(), _x((4,)), _x((4, 1)), ValueError,
                              ["target.squeeze(1)"]),
}


@pytest.mark.parametrize("case", list(LOSS_CASES))
def test_a_loss_error_names_the_loss_the_shapes_and_the_fix(case):
    build, a, b, kind, words = LOSS_CASES[case]
    b = b.astype("float32") if b.dtype == bool else b
    with pytest.raises(kind) as eager:
        build(nn)(a, b)
    for w in words:
        assert w in str(eager.value), (w, str(eager.value))
    assert eager.value.__cause__ is not None and type(eager.value.__cause__) is type(eager.value)
    # compiled, and inside a model (the path)
    criterion = build(nn)
    at = tracer.tensor(a)
    step = autodiff.value_and_grad(lambda a, b: criterion(a, b), wrt=at)
    with pytest.raises(kind) as compiled:
        step(at, b)
    assert str(compiled.value) == str(eager.value)

    class WithLoss(nn.Module):
        def __init__(self):
            super().__init__()
            self.criterion = build(nn)

        def forward(self, a, b):
            return self.criterion(a, b)

    with pytest.raises(kind, match=r"at model\.criterion \(model: WithLoss\)"):
        WithLoss()(a, b)
    with pytest.raises(TORCH_ERRORS):  # torch refuses it too (BCELoss: a ValueError for sizes that differ)
        build(torch.nn)(torch.from_numpy(a), torch.from_numpy(b))
