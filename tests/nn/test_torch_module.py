"""Module helpers a torch user reaches for (named_modules, children, apply, requires_grad_, to, zero_grad)
and dtype discipline: a float32 layer refuses a float64 or integer batch, naming the layer and both dtypes."""
import numpy as np
import pytest

import autodiff
import nn
from nn import functional as F
from nn import optim


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2), nn.ReLU())
        self.head = nn.Linear(8, 3)

    def forward(self, x):
        return self.head(self.features(x).flatten(1))


def test_named_modules_children_and_apply_follow_torch():
    net = Net()
    assert [n for n, _ in net.named_modules()] == ["", "features", "features.0", "features.1", "features.2", "head"]
    assert [type(m).__name__ for m in net.children()] == ["Sequential", "Linear"]
    seen = []
    assert net.apply(lambda m: seen.append(type(m).__name__)) is net
    assert seen == ["Conv2d", "BatchNorm2d", "ReLU", "Sequential", "Linear", "Net"]  # children first, as torch
    assert net.zero_grad() is None and all(p.grad is None for p in net.parameters())


def test_named_modules_match_torch():
    torch = pytest.importorskip("torch")

    class TorchNet(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.features = torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3), torch.nn.BatchNorm2d(2), torch.nn.ReLU())
            self.head = torch.nn.Linear(8, 3)

    ours, theirs = Net(), TorchNet()
    assert [n for n, _ in ours.named_modules()] == [n for n, _ in theirs.named_modules()]
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert [n for n, _ in ours.named_buffers()] == [n for n, _ in theirs.named_buffers()]


def test_frozen_parameters_never_change_in_training():
    net = Net()
    net.features.requires_grad_(False)
    frozen = {n: p.numpy().copy() for n, p in net.named_parameters() if n.startswith("features")}
    assert [p.requires_grad for p in net.parameters()] == [False] * 4 + [True] * 2
    head_before = net.head.weight.numpy().copy()
    x, y = np.random.default_rng(0).standard_normal((4, 1, 4, 4)).astype("float32"), np.array([0, 1, 2, 1])
    for opt in (optim.SGD(net.parameters(), lr=0.1, momentum=0.9, weight_decay=0.1),
                optim.Adam(net.parameters(), lr=0.1), optim.AdamW(net.parameters(), lr=0.1)):
        step = autodiff.value_and_grad(lambda a, b: F.cross_entropy(net(a), b), wrt=net.parameters())
        for _ in range(2):
            opt.step(step(x, y)[1])
    for n, p in net.named_parameters():
        if n in frozen:
            np.testing.assert_array_equal(p.numpy(), frozen[n], err_msg=n)
    assert not np.array_equal(net.head.weight.numpy(), head_before)
    opt = optim.SGD(net.parameters(), lr=0.1)
    opt.step([None] * 4 + [np.ones((3, 8)), np.ones(3)])  # a frozen parameter's gradient may be None
    net.requires_grad_()
    assert all(p.requires_grad for p in net.parameters())


def test_to_casts_floating_parameters_and_buffers_only():
    net = Net()
    assert net.to("float64") is net
    assert {p.dtype for p in net.parameters()} == {"float64"}
    assert net.features[1].running_mean.dtype == "float64" and net.features[1].num_batches_tracked.dtype == "int64"
    out = net(np.zeros((2, 1, 4, 4)))
    assert out.dtype == "float64"
    net.to(np.float32)
    assert net.head.weight.dtype == "float32"
    net.to("cpu")
    with pytest.raises(ValueError, match="device must be"):
        net.to(device="tpu")


@pytest.mark.parametrize("layer, x", [
    (lambda: nn.Linear(3, 2), np.zeros((4, 3), "float64")),
    (lambda: nn.Linear(3, 2), np.zeros((4, 3), "int64")),
    (lambda: nn.Conv2d(1, 2, 3), np.zeros((1, 1, 5, 5), "float64")),
    (lambda: nn.Conv1d(1, 2, 3), np.zeros((1, 1, 5), "int32")),
    (lambda: nn.BatchNorm1d(3), np.zeros((4, 3), "float64")),
    (lambda: nn.GroupNorm(1, 3), np.zeros((4, 3), "float64")),
    (lambda: nn.LayerNorm(3), np.zeros((4, 3), "float64")),
    (lambda: nn.MultiheadAttention(4, 2), np.zeros((1, 2, 4), "float64")),
])
def test_a_float32_layer_refuses_another_dtype_naming_the_layer_and_both_dtypes(layer, x):
    m = layer()
    name = type(m).__name__
    with pytest.raises(TypeError, match=rf"{name}: (input|query) dtype {x.dtype} does not match the layer's weight "
                                        r"dtype float32"):
        m(x)


def test_a_float64_batch_fed_to_a_compiled_float32_step_raises():
    model = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
    step = autodiff.value_and_grad(lambda a, b: F.cross_entropy(model(a), b), wrt=model.parameters())
    y = np.array([0, 1])
    value, _ = step(np.zeros((2, 4), "float32"), y)
    assert value.dtype == "float32"
    with pytest.raises(TypeError, match="Linear: input dtype float64 does not match the layer's weight dtype float32"):
        step(np.zeros((2, 4)), y)


def test_torch_also_refuses_the_mismatch():
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError, match="dtype"):
        torch.nn.Linear(3, 2)(torch.zeros(4, 3, dtype=torch.float64))
