"""wrt tensors that fn does not read (issue 19, items 6 and 7). Reachable from what fn holds: gradient None,
as torch's `.grad is None`, so optimizers can leave them alone. Unreachable (a functional update left the
old tensors behind): ValueError naming the leaf, never a silent zero."""
import numpy as np
import pytest

import autodiff
import nn
import tracer
from tests.torch_optional import torch

RNG = np.random.default_rng(7)
X = RNG.normal(size=(8, 2)).astype("float32")


class TwoHeads(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(2, 4)
        self.a = nn.Linear(4, 1)
        self.b = nn.Linear(4, 1)

    def forward(self, x, head):
        return getattr(self, head)(tracer.tanh(self.body(x))).sum()


def test_idle_head_gets_none_as_in_torch():
    model = TwoHeads()
    ref = torch.nn.ModuleDict({"body": torch.nn.Linear(2, 4), "a": torch.nn.Linear(4, 1), "b": torch.nn.Linear(4, 1)})
    with torch.no_grad():
        for name, p in model.named_parameters():
            dict(ref.named_parameters())[name].copy_(torch.tensor(p.numpy()))
    names = [n for n, _ in model.named_parameters()]
    step = autodiff.value_and_grad(lambda x, head: model(x, head), wrt=model.parameters())
    for head in ("a", "b", "a"):
        _, grads = step(X, head)
        ref.zero_grad(set_to_none=True)
        ref[head](torch.tanh(ref["body"](torch.tensor(X)))).sum().backward()
        for name, g in zip(names, grads, strict=True):
            tg = dict(ref.named_parameters())[name].grad
            if tg is None:
                assert g is None, name
            else:
                np.testing.assert_allclose(g.numpy(), tg.numpy(), rtol=1e-5, atol=1e-6)
        assert sum(g is None for g in grads) == 2  # the idle head's weight and bias


def test_idle_head_does_not_move_under_a_manual_sgd_that_skips_none():
    model = TwoHeads()
    params = list(model.parameters())
    idle = model.b.weight.numpy().copy()
    step = autodiff.value_and_grad(lambda x: model(x, "a"), wrt=params)
    for _ in range(3):
        _, grads = step(X)
        for p, g in zip(params, grads, strict=True):
            if g is not None:  # SGD with weight decay, as torch's skips a parameter whose .grad is None
                p -= 0.1 * (g + 0.01 * p)
    np.testing.assert_array_equal(model.b.weight.numpy(), idle)


def test_unread_wrt_leaf_reachable_through_a_closure_dict_or_argument_is_none():
    spare = tracer.tensor(np.ones(3, "float32"))
    w = tracer.tensor(np.ones(2, "float32"))
    held = {"w": w, "spare": spare}
    g = autodiff.grad(lambda x: (x @ held["w"]).sum(), wrt=[w, spare])(X)
    assert g[1] is None
    np.testing.assert_allclose(g[0].numpy(), X.sum(0), rtol=1e-5)
    g = autodiff.grad(lambda x, extra: (x @ w).sum(), wrt={"w": w, "extra": spare})(X, {"e": spare})
    assert g["extra"] is None


def test_functional_update_with_wrt_raises_naming_the_leaf():
    params = {"w": tracer.tensor(np.zeros(2, "float32")), "b": tracer.tensor(np.zeros(1, "float32"))}
    step = autodiff.value_and_grad(lambda p, x: (x @ p["w"] + p["b"]).sum(), wrt=params)
    _, g = step(params, X)
    np.testing.assert_allclose(g["w"].numpy(), X.sum(0), rtol=1e-5)
    params = {k: params[k] - 0.1 * g[k] for k in params}
    with pytest.raises(ValueError, match=r"wrt\['w'\] \(shape \(2,\), float32\).*neither read.*argnums=0"):
        step(params, X)


def test_global_rebound_old_wrt_raises():
    model = nn.Linear(2, 1)
    step = autodiff.value_and_grad(lambda x: model(x).sum(), wrt=model.parameters())
    step(X)
    model.weight = nn.Parameter(np.full((1, 2), 2.0, "float32"))
    with pytest.raises(ValueError, match=r"wrt\[0\] \(weight, shape \(1, 2\), float32\)"):
        step(X)


def test_frozen_parameter_still_none():
    model = nn.Linear(2, 1)
    model.bias.requires_grad_(False)
    _, (gw, gb) = autodiff.value_and_grad(lambda x: model(x).sum(), wrt=model.parameters())(X)
    assert gb is None and gw is not None


def test_unused_leaf_inside_a_trace_follows_the_same_rule():
    spare = tracer.tensor(np.ones(2))
    orphan = tracer.tensor(np.ones(2))

    def outer(w):
        inner = autodiff.grad(lambda y, keep=spare: (y * w).sum(), wrt=[w, spare])
        gw, gs = inner(tracer.tensor(X.astype("float64")))
        assert gs is None
        return gw.sum()
    w = tracer.tensor(np.ones((8, 2)))
    g = autodiff.grad(outer, wrt=w)(w)
    np.testing.assert_allclose(g.numpy(), np.zeros((8, 2)))  # sum(y) does not depend on w

    def outer_bad(w):
        return autodiff.grad(lambda y: (y * w).sum(), wrt=[w, orphan])(tracer.tensor(X.astype("float64")))[0].sum()
    with pytest.raises(ValueError, match=r"wrt\[1\]"):
        autodiff.grad(outer_bad, wrt=w)(w)
