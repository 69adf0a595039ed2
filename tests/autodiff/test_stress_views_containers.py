"""Mutate-then-call stress (issue 19): container arguments, detached views and `.data` written in place
between calls, parameterless submodule swaps and module state written in forward, all in one model.
Every call of the compiled step is compared with an eager run of the same Python on a twin model that
received the same mutations."""
import copy

import numpy as np

import autodiff
import nn
import tracer

X = np.random.default_rng(0).normal(size=(4, 2)).astype("float32")


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(2, 3)
        self.act = nn.Tanh()
        self.out = nn.Linear(3, 1)
        self.register_buffer("calls", tracer.tensor(np.zeros(1, "float32")))

    def forward(self, x, shift):
        h = self.act(self.fc(x))
        self.last = h  # module state written in forward: the step binds the concrete value after each call
        self.calls = self.calls + 1.0  # a buffer rebound in forward
        return self.out(h) + shift


def _loss(net, frozen):
    def fn(batch, scale=1.0):
        y = net(batch["x"], batch["pair"][1])
        # `frozen` is a detached view of fc.weight: it shares the buffer, so in-place writes to either show
        return ((y - batch["pair"][0]) ** 2).mean() * scale + (frozen * frozen).sum() * 0.01
    return fn


def test_stress_views_containers_swaps_and_forward_state_against_eager():
    rng = np.random.default_rng(7)
    net = Net()
    twin = copy.deepcopy(net)
    frozen, twin_frozen = net.fc.weight.detach(), twin.fc.weight.detach()
    step = autodiff.value_and_grad(_loss(net, frozen), wrt=list(net.parameters()))
    eager_fn = _loss(twin, twin_frozen)
    for _ in range(200):
        what = rng.integers(6)
        noise = rng.normal(size=(3, 2)).astype("float32")
        if what == 0:  # through the base, in place: the detached view sees it
            for m in (net, twin):
                m.fc.weight.add_(tracer.tensor(0.1 * noise))
        elif what == 1:  # through the view
            for f in (frozen, twin_frozen):
                f.mul_(0.9)
        elif what == 2:  # through .data
            for m in (net, twin):
                m.fc.weight.data.sub_(tracer.tensor(0.05 * noise))
        elif what == 3:
            cls = (nn.Tanh, nn.ReLU, nn.Sigmoid, nn.Identity)[rng.integers(4)]
            net.act, twin.act = cls(), cls()
        elif what == 4:
            b = np.full(1, rng.normal(), "float32")
            for m in (net, twin):
                m.out.bias.copy_(b)
        target = rng.normal(size=(4, 1)).astype("float32")
        x = rng.normal(size=(4, 2)).astype("float32")
        shift = float(rng.uniform(-1, 1))
        as_tuple = bool(rng.integers(2))
        batch = {"x": x, "pair": (target, shift) if as_tuple else [target, shift]}
        scale = float(rng.uniform(0.5, 2.0))
        value, grads = step(batch, scale=scale)
        with tracer.no_grad():  # the twin runs eagerly, unrecorded (its state stays deep-copyable, as in torch)
            eager = eager_fn({"x": tracer.tensor(x), "pair": (tracer.tensor(target), shift)}, scale)
        np.testing.assert_allclose(float(value), float(eager), rtol=1e-5, atol=1e-6)
        # the module state the forward wrote is concrete and the eager value
        np.testing.assert_allclose(net.last.numpy(), twin.last.numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(net.calls.numpy(), twin.calls.numpy())
        fresh = copy.deepcopy(twin)  # a step traced anew on a copy (its forward writes the copy's state)
        ref = autodiff.value_and_grad(_loss(fresh, fresh.fc.weight.detach()), wrt=list(fresh.parameters()))
        _, ref_grads = ref({"x": x, "pair": (target, shift)}, scale)
        for g, r in zip(grads, ref_grads, strict=True):
            np.testing.assert_allclose(g.numpy(), r.numpy(), rtol=1e-4, atol=1e-6)
    assert float(net.calls.numpy()[0]) == 200.0
