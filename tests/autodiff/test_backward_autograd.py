"""torch's autograd surface on eager tensors: .grad accumulation, retain_graph, backward(gradient), autograd.grad,
no_grad and friends, detach, retain_grad, in-place checks, frozen and unused parameters, zero_grad, clipping.
Where torch gives an answer, tracegrad's is compared with it."""
import gc
import weakref

import numpy as np
import pytest

import autodiff
import nn
import tracer
from nn import functional as F
from nn import optim
from tracer import autograd

torch = pytest.importorskip("torch")
rng = np.random.default_rng(0)
A = rng.standard_normal((3, 4))
B = rng.standard_normal((4, 2))


def pair():
    """The same float64 leaves in tracegrad and torch."""
    return (tracer.tensor(A, requires_grad=True), tracer.tensor(B, requires_grad=True),
            torch.tensor(A, requires_grad=True), torch.tensor(B, requires_grad=True))


def close(ours, theirs):
    np.testing.assert_allclose(ours.numpy(), theirs.detach().numpy(), rtol=1e-12, atol=1e-14)


def test_leaves_and_recorded_results_have_torchs_attributes():
    a, b, ta, tb = pair()
    y = tracer.tanh(a @ b)
    assert a.requires_grad and a.is_leaf and a.grad_fn is None and a.grad is None
    assert y.requires_grad and not y.is_leaf and y.grad_fn.name() == "TanhBackward0"
    c = tracer.tensor(A)
    assert not c.requires_grad and c.is_leaf and not (c * 2).requires_grad
    assert (c * a).requires_grad
    assert not (a > 0).requires_grad  # a boolean result never requires grad
    with pytest.raises(RuntimeError, match="only Tensors of floating point"):
        tracer.tensor([1, 2]).requires_grad_()
    with pytest.raises(RuntimeError, match="only change requires_grad flags of leaf"):
        y.requires_grad = False
    assert tracer.zeros(2, 3, requires_grad=True).requires_grad and tracer.randn(3, requires_grad=True).is_leaf
    assert nn.Parameter(np.zeros(2)).requires_grad and not nn.Parameter(np.zeros(2), requires_grad=False).requires_grad


def test_gradients_accumulate_across_backward_calls_as_torch():
    a, b, ta, tb = pair()
    for x, y, lib in ((a, b, tracer), (ta, tb, torch)):
        (lib.tanh(x @ y) ** 2).sum().backward()
        first = x.grad.numpy().copy() if lib is tracer else x.grad.clone()
        (x.sum() * 3 + (x @ y).mean()).backward()
    close(a.grad, ta.grad)
    close(b.grad, tb.grad)
    assert not np.allclose(a.grad.numpy(), first)


def test_zero_grad_sets_none_or_zeros_in_place():
    model = nn.Linear(3, 2)
    opt = optim.SGD(model.parameters(), lr=0.1)
    model(np.ones((4, 3), "float32")).sum().backward()
    kept = model.weight.grad
    opt.zero_grad(set_to_none=False)
    assert model.weight.grad is kept and not kept.numpy().any()
    model(np.ones((4, 3), "float32")).sum().backward()
    np.testing.assert_allclose(kept.numpy(), np.full((2, 3), 4.0))  # accumulated into the same tensor
    opt.zero_grad()
    assert model.weight.grad is None and model.bias.grad is None
    model(np.ones((4, 3), "float32")).sum().backward()
    model.zero_grad()
    assert all(p.grad is None for p in model.parameters())
    model.weight.grad = tracer.ones((2, 3))
    with pytest.raises(RuntimeError, match="different size"):
        model.weight.grad = tracer.ones((3, 2))


def test_a_second_backward_needs_retain_graph():
    a, b, ta, tb = pair()
    loss = tracer.exp(a @ b).sum()
    loss.backward(retain_graph=True)
    loss.backward()
    tl = torch.exp(ta @ tb).sum()
    tl.backward(retain_graph=True)
    tl.backward()
    close(a.grad, ta.grad)
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        loss.backward()
    h = a @ b
    h.sum().backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        (h * 2).sum().backward()  # h's matmul was released by the first backward


def test_backward_of_a_non_scalar_takes_its_gradient():
    a, b, ta, tb = pair()
    g = rng.standard_normal((3, 2))
    (a @ b).backward(tracer.tensor(g))
    (ta @ tb).backward(torch.tensor(g))
    close(a.grad, ta.grad)
    close(b.grad, tb.grad)
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar outputs"):
        (a @ b).backward()
    with pytest.raises(RuntimeError, match="Mismatch in shape"):
        (a @ b).backward(tracer.ones((2, 3), dtype="float64"))


def test_autograd_grad_returns_a_tuple_and_leaves_grad_alone():
    a, b, ta, tb = pair()
    h = a @ b
    out = tracer.sigmoid(h).sum()
    ga, gh = autograd.grad(out, [a, h], retain_graph=True)
    th = ta @ tb
    tga, tgh = torch.autograd.grad(torch.sigmoid(th).sum(), [ta, th])
    close(ga, tga)
    close(gh, tgh)
    assert a.grad is None and b.grad is None
    unused = tracer.tensor(np.ones(2), requires_grad=True)
    with pytest.raises(RuntimeError, match="appears to not have been used in the graph"):
        autograd.grad(out, [a, unused], retain_graph=True)
    got = autograd.grad(out, [unused, b], allow_unused=True)
    assert got[0] is None and got[1].shape == (4, 2)
    with pytest.raises(RuntimeError, match="does not require grad"):
        autograd.grad((a * 2).sum(), [tracer.tensor(A)])
    (g,) = autograd.grad((a @ b), a, grad_outputs=[tracer.ones((3, 2), dtype="float64")])
    np.testing.assert_allclose(g.numpy(), np.ones((3, 2)) @ B.T)


def test_create_graph_gives_differentiable_gradients_as_torch():
    a, b, ta, tb = pair()
    x, tx = tracer.tensor(B[:3, :1].T, requires_grad=True), torch.tensor(B[:3, :1].T, requires_grad=True)

    def f(lib, w, v, inp):
        return (lib.tanh(inp @ w) @ v).sin().sum()
    # a gradient penalty: the input gradient's norm, differentiated with respect to the weights
    (gx,) = autograd.grad(f(tracer, a, b, x), x, create_graph=True)
    (tgx,) = torch.autograd.grad(f(torch, ta, tb, tx), tx, create_graph=True)
    close(gx, tgx)
    assert gx.requires_grad and gx.grad_fn is not None
    (gx ** 2).sum().backward()
    (tgx ** 2).sum().backward()
    close(a.grad, ta.grad)
    close(b.grad, tb.grad)
    # a Hessian-vector product, and backward(create_graph=True) leaving a differentiable .grad behind
    v = rng.standard_normal((3, 4))
    a2, ta2 = tracer.tensor(A, requires_grad=True), torch.tensor(A, requires_grad=True)
    (g,) = autograd.grad(tracer.exp(a2 * 0.5).sum() * a2.sum(), a2, create_graph=True)
    (tg,) = torch.autograd.grad(torch.exp(ta2 * 0.5).sum() * ta2.sum(), ta2, create_graph=True)
    close(autograd.grad((g * tracer.tensor(v)).sum(), a2)[0], torch.autograd.grad((tg * torch.tensor(v)).sum(), ta2)[0])
    (a2 * a2 * a2).sum().backward(create_graph=True)
    (ta2 * ta2 * ta2).sum().backward(create_graph=True)
    assert a2.grad.requires_grad
    (a2.grad ** 2).sum().backward()
    (ta2.grad ** 2).sum().backward()
    close(a2.grad, ta2.grad)


def test_no_grad_enable_grad_set_grad_enabled_inference_mode():
    a, b, _, _ = pair()
    with tracer.no_grad():
        y = a @ b
        with tracer.enable_grad():
            assert (a * 2).requires_grad
    assert not y.requires_grad and y.grad_fn is None and tracer.is_grad_enabled()

    @tracer.no_grad()
    def f(x):
        return x * 2

    @tracer.no_grad
    def g(x):
        return x * 2
    assert not f(a).requires_grad and not g(a).requires_grad and tracer.is_grad_enabled()
    tracer.set_grad_enabled(False)
    assert not (a * 2).requires_grad
    tracer.set_grad_enabled(True)
    with tracer.set_grad_enabled(False):
        assert not (a * 2).requires_grad
    assert (a * 2).requires_grad

    @tracer.set_grad_enabled(False)
    def h(x):
        return x * 2
    assert tracer.is_grad_enabled() and not h(a).requires_grad and tracer.is_grad_enabled()
    with tracer.inference_mode():
        assert not (a * 2).requires_grad
    with tracer.inference_mode(False):
        assert (a * 2).requires_grad


def test_detach_shares_the_buffer_and_cuts_the_gradient():
    a, b, ta, tb = pair()
    d = a.detach()
    assert not d.requires_grad and np.shares_memory(d.numpy(), a.numpy())
    ((a @ b) * (d @ b)).sum().backward()
    ((ta @ tb) * (ta.detach() @ tb)).sum().backward()
    close(a.grad, ta.grad)
    close(b.grad, tb.grad)
    assert not a.data.requires_grad and np.shares_memory(a.data.numpy(), a.numpy())


def test_retain_grad_keeps_a_non_leaf_gradient():
    a, b, ta, tb = pair()
    h, th = a @ b, ta @ tb
    h.retain_grad()
    th.retain_grad()
    assert h.retains_grad
    (tracer.tanh(h) ** 2).sum().backward()
    (torch.tanh(th) ** 2).sum().backward()
    close(h.grad, th.grad)
    close(a.grad, ta.grad)
    h2 = a * 2
    (h2 * h2).sum().backward()
    with pytest.warns(UserWarning, match="not a leaf Tensor"):  # torch's warning too
        assert h2.grad is None  # not retained: only leaves keep .grad, as torch


def test_an_inplace_op_on_a_saved_value_raises_at_backward():
    a, b, _, _ = pair()
    h = tracer.exp(a @ b)  # exp's backward reads its output
    h += 1
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        h.sum().backward()
    x = tracer.tensor(A)
    y = (x * a).sum()  # d/da reads x
    x[0, 0] = 5.0
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()


def test_an_inplace_op_that_touches_nothing_saved_gives_torchs_answer():
    a, b, ta, tb = pair()
    for x, y, lib in ((a, b, tracer), (ta, tb, torch)):
        h = x @ y  # the matmul's backward reads x and y, not h
        h *= 3
        h += x.sum()
        z = lib.zeros((3, 2), dtype=h.dtype) if lib is tracer else torch.zeros(3, 2, dtype=h.dtype)
        z[1] = h[0] * 2  # a write into a tensor that did not require grad makes it recorded, as torch
        (h * h).sum().add(z.sum()).backward()
    close(a.grad, ta.grad)
    close(b.grad, tb.grad)


def test_an_inplace_op_on_a_leaf():
    a, b, _, _ = pair()
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        a += b.sum()  # the leaf would become a function of another tensor that requires grad
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        a[0] = b[:, 0]
    y = (a * a).sum()
    a -= 0.5 * a.detach()  # tracegrad allows the update torch wants under no_grad; it is not recorded ...
    assert a.is_leaf
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()  # ... and a backward that needs the old values raises
    with tracer.no_grad():
        a *= 2
    np.testing.assert_allclose(a.numpy(), A)
    a.grad = tracer.ones((3, 4), dtype="float64")
    a.data.add_(a.grad, alpha=-0.1)  # torch's manual update through .data
    np.testing.assert_allclose(a.numpy(), A - 0.1)


def test_optimizer_step_before_backward_is_caught_by_the_version_counter():
    x = np.ones((4, 3), "float32")
    for lib, model in ((nn, nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2))),
                       (torch.nn, torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 2)))):
        opt = (optim if lib is nn else torch.optim).SGD(model.parameters(), lr=0.1)
        inputs = x if lib is nn else torch.from_numpy(x)
        model(inputs).sum().backward()
        loss = (model(inputs) ** 2).sum()  # its backward reads the second layer's weight
        opt.step()
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            loss.backward()


class TwoHeads(nn.Module):
    def __init__(self):
        super().__init__()
        self.body, self.used, self.unused = nn.Linear(4, 4), nn.Linear(4, 2), nn.Linear(4, 2)

    def forward(self, x):
        return self.used(tracer.relu(self.body(x)))


class TorchTwoHeads(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.body, self.used, self.unused = torch.nn.Linear(4, 4), torch.nn.Linear(4, 2), torch.nn.Linear(4, 2)

    def forward(self, x):
        return self.used(torch.relu(self.body(x)))


@pytest.mark.parametrize("name", ["sgd", "adamw"])
def test_frozen_and_unused_parameters_get_no_grad_and_no_update(name):
    torch.manual_seed(0)
    theirs = TorchTwoHeads()
    ours = TwoHeads()
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    ours.body.bias.requires_grad_(False)
    theirs.body.bias.requires_grad_(False)
    make = {"sgd": (lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=0.1),
                    lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=0.1)),
            "adamw": (lambda ps: optim.AdamW(ps, lr=0.1), lambda ps: torch.optim.AdamW(ps, lr=0.1))}[name]
    opt, topt = make[0](ours.parameters()), make[1](theirs.parameters())
    x = rng.standard_normal((5, 4)).astype("float32")
    for _ in range(3):
        opt.zero_grad()
        topt.zero_grad()
        (ours(x) ** 2).mean().backward()
        (theirs(torch.from_numpy(x)) ** 2).mean().backward()
        opt.step()
        topt.step()
    assert ours.unused.weight.grad is None and ours.body.bias.grad is None
    for k, v in theirs.state_dict().items():
        np.testing.assert_allclose(ours.state_dict()[k], v.numpy(), rtol=1e-5, atol=1e-6, err_msg=k)


def test_clip_grad_norm_and_value_follow_torch():
    for norm_type in (2.0, 1.0, float("inf")):
        a, b, ta, tb = pair()
        (tracer.exp(a @ b)).sum().backward()
        (torch.exp(ta @ tb)).sum().backward()
        total = nn.utils.clip_grad_norm_([a, b], max_norm=0.5, norm_type=norm_type)
        ttotal = torch.nn.utils.clip_grad_norm_([ta, tb], max_norm=0.5, norm_type=norm_type)
        assert float(total) == pytest.approx(float(ttotal), rel=1e-12)
        close(a.grad, ta.grad)
        close(b.grad, tb.grad)
    nn.utils.clip_grad_value_([a, b], 0.01)
    torch.nn.utils.clip_grad_value_([ta, tb], 0.01)
    close(a.grad, ta.grad)


def test_two_tapes_merge_and_a_dead_forward_frees_its_tape():
    a, b, ta, tb = pair()
    left, right = a.sum(axis=1), (b * b).sum(axis=0)  # two tapes, each started by a leaf-only op
    (left[:2] @ right).backward()
    (ta.sum(dim=1)[:2] @ (tb * tb).sum(dim=0)).backward()
    close(a.grad, ta.grad)
    close(b.grad, tb.grad)
    h = a @ b
    tape = weakref.ref(h.grad_fn.tape)
    del h
    gc.collect()
    assert tape() is None  # an evaluation without backward keeps nothing alive


def test_value_and_grad_records_nothing_and_backward_inside_a_trace_is_refused():
    model = nn.Linear(3, 2)
    x = np.ones((4, 3), "float32")
    value, grads = autodiff.value_and_grad(lambda v: model(v).sum(), wrt=model.parameters())(x)
    assert not value.requires_grad and model.weight.grad is None and not grads[0].requires_grad

    def bad(v):
        loss = model(v).sum()
        loss.backward()
        return loss
    with pytest.raises(tracer.TraceError, match="backward"):
        autodiff.value_and_grad(bad, wrt=model.parameters())(x)


def test_values_are_eager_mid_forward():
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1))
    h = model[0](np.ones((2, 3), "float32"))
    assert isinstance(h.sum().item(), float) and "Tensor(" in repr(h)
    out = model[2](model[1](h)) if h.sum().item() > -1e9 else h  # Python control flow on a value
    with pytest.raises(ValueError, match="matmul"):
        model[0](np.ones((2, 5), "float32"))  # the shape error is raised at the line that made it
    loss = F.mse_loss(out, tracer.zeros((2, 1)))
    loss.backward()
    assert model[0].weight.grad.shape == (4, 3)


def test_import_nn_alone_installs_backward_and_deepcopy_keeps_leaves():
    import copy
    import subprocess
    import sys
    code = ("import numpy as np, nn\n"
            "m = nn.Linear(2, 3)\n"
            "m(np.ones((4, 2), 'float32')).sum().backward()\n"
            "print(m.weight.grad.numpy().sum())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=str(__import__("pathlib").Path(__file__).resolve().parents[2]))
    assert float(out.stdout) == 24.0
    model = nn.Linear(2, 3)
    twin = copy.deepcopy(model)
    assert twin.weight.requires_grad and twin.weight.is_leaf
    twin(np.ones((1, 2), "float32")).sum().backward()
    assert twin.weight.grad is not None and model.weight.grad is None
    with pytest.raises(RuntimeError, match="deepcopy"):
        copy.deepcopy(model(np.ones((1, 2), "float32")))


def test_backward_inputs_accumulates_only_into_those_given():
    a, b, ta, tb = pair()
    tracer.exp(a @ b).sum().backward(inputs=[b])
    torch.exp(ta @ tb).sum().backward(inputs=[tb])
    assert a.grad is None and ta.grad is None
    close(b.grad, tb.grad)
    autograd.backward([(a @ b).sum(), (a * a).sum()])  # torch.autograd.backward: several tensors at once
    torch.autograd.backward([(ta @ tb).sum(), (ta * ta).sum()])
    close(a.grad, ta.grad)
    close(b.grad, tb.grad)
