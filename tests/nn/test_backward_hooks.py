"""Module.register_full_backward_hook / register_full_backward_pre_hook with loss.backward(), against torch's
(issue 21 item 1): the (grad_input, grad_output) tuples each hook sees, replaced grad_input and grad_output
reaching the parameters and inputs, removable handles, nested modules in torch's calling order, float64; inside
a compiled step the hooked module raises naming the hook."""
import numpy as np
import pytest

import autodiff
import nn
import tracer
from tests.torch_optional import torch

rng = np.random.default_rng(1)
X = rng.standard_normal((4, 3))
Z = rng.standard_normal((4, 2))


class Two(nn.Module):
    """A custom module with two tensor inputs and a non-tensor one."""

    def __init__(self, lib):
        super().__init__()
        self.lin = lib.Linear(3, 2).double()

    def forward(self, x, z, scale):
        return self.lin(x) * z * scale


def _tnn():
    class Two(torch.nn.Module):  # noqa: F811  (named as ours: the test compares type names)
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(3, 2).double()

        def forward(self, x, z, scale):
            return self.lin(x) * z * scale
    return Two


def _models(kind):
    if kind == "linear":
        ours, theirs = nn.Linear(3, 2).double(), torch.nn.Linear(3, 2).double()
    elif kind == "sequential":
        ours = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2)).double()
        theirs = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2)).double()
    else:
        ours, theirs = Two(nn), _tnn()()
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    return ours, theirs


def _np(t):
    if t is None:
        return None
    return t.detach().numpy() if torch is not None and isinstance(t, torch.Tensor) else np.asarray(t.numpy())


def _run(lib, model, kind, replace):
    seen = []

    def record(name):
        def hook(module, grad_input, grad_output):
            seen.append((name, type(module).__name__, [_np(g) for g in grad_input], [_np(g) for g in grad_output]))
            if replace and name == "inner":
                return tuple(None if g is None else g * 3.0 for g in grad_input)
        return hook

    def pre(module, grad_output):
        seen.append(("pre", type(module).__name__, [_np(g) for g in grad_output]))
        return tuple(g * 0.5 for g in grad_output) if replace else None
    mods = {"linear": lambda: [model], "sequential": lambda: [model, model[2], model[0]],
            "two": lambda: [model, model.lin]}[kind]()
    handles = [m.register_full_backward_hook(record("outer" if i == 0 else "inner")) for i, m in enumerate(mods)]
    handles.append(mods[0].register_full_backward_pre_hook(pre))
    x = lib.tensor(X, requires_grad=True)
    z = lib.tensor(Z, requires_grad=True)
    out = model(x, z, 2.0) if kind == "two" else model(x)
    (out ** 2).sum().backward()
    grads = [_np(x.grad)] + ([_np(z.grad)] if kind == "two" else []) + [_np(p.grad) for p in model.parameters()]
    return seen, grads, handles


@pytest.mark.parametrize("replace", [False, True], ids=["observe", "replace"])
@pytest.mark.parametrize("kind", ["linear", "sequential", "two"])
def test_hooks_match_torch(kind, replace):
    if torch is None:
        pytest.skip("torch is not installed")
    ours, theirs = _models(kind)
    o_seen, o_grads, _ = _run(tracer, ours, kind, replace)
    t_seen, t_grads, _ = _run(torch, theirs, kind, replace)
    assert [s[:2] for s in o_seen] == [s[:2] for s in t_seen]  # which hooks ran, in torch's order
    for a, b in zip(o_seen, t_seen, strict=True):
        for ga, gb in zip(a[2:], b[2:], strict=True):
            assert len(ga) == len(gb)
            for u, v in zip(ga, gb, strict=True):
                assert (u is None) == (v is None)
                if u is not None:
                    np.testing.assert_allclose(u, v, rtol=1e-10, atol=1e-12)
    for a, b in zip(o_grads, t_grads, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_handle_remove_and_no_effect_without_hooks():
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2)).double()
    x = tracer.tensor(X, requires_grad=True)
    (model(x) ** 2).sum().backward()
    plain = [x.grad.numpy().copy()] + [p.grad.numpy().copy() for p in model.parameters()]
    calls = []
    handle = model[0].register_full_backward_hook(lambda m, gi, go: calls.append(1) or (gi[0] * 0,))
    model.zero_grad()
    x.grad = None
    (model(x) ** 2).sum().backward()
    assert calls == [1] and not x.grad.numpy().any()  # the replaced grad_input reached x
    np.testing.assert_allclose(model[2].weight.grad.numpy(), plain[3])
    handle.remove()
    model.zero_grad()
    x.grad = None
    (model(x) ** 2).sum().backward()
    assert calls == [1]
    for a, b in zip([x.grad] + [p.grad for p in model.parameters()], plain, strict=True):
        np.testing.assert_allclose(a.numpy(), b, rtol=1e-12)


def test_input_without_grad_gives_none():
    model = nn.Linear(3, 2).double()
    seen = []
    model.register_full_backward_hook(lambda m, gi, go: seen.append((gi, go)))
    model(tracer.tensor(X)).sum().backward()
    (gi, go), = seen
    assert gi == (None,) and go[0].shape == (4, 2)
    np.testing.assert_allclose(model.bias.grad.numpy(), [4.0, 4.0])


def test_wrong_number_of_grads_raises():
    model = nn.Linear(3, 2).double()
    model.register_full_backward_hook(lambda m, gi, go: (gi[0], gi[0]))
    with pytest.raises(RuntimeError, match="invalid number of grad_input, got 2, but expected 1"):
        model(tracer.tensor(X, requires_grad=True)).sum().backward()


def test_compiled_step_raises_naming_the_hook():
    model = nn.Linear(3, 2).double()

    def my_grad_hook(module, grad_input, grad_output):
        return None
    handle = model.register_full_backward_hook(my_grad_hook)
    step = autodiff.value_and_grad(lambda x: model(x).sum(), wrt=list(model.parameters()))
    with pytest.raises(NotImplementedError, match="my_grad_hook"):
        step(tracer.tensor(X))
    handle.remove()
    loss, grads = step(tracer.tensor(X))
    np.testing.assert_allclose(grads[1].numpy(), [4.0, 4.0])
