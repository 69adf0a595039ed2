"""The torch training loop (zero_grad, forward, loss.backward(), step) on tracegrad gives torch's losses and
weights over 5 steps, from the same initial state dict, for SGD with momentum, Adam and AdamW; a replayed step
compiles nothing."""
import math

import numpy as np
import pytest

import autodiff
import nn
import tracer
from nn import functional as F
from nn import optim

torch = pytest.importorskip("torch")
TNN = torch.nn

TOL = {"float32": dict(rtol=1e-5, atol=1e-6), "float64": dict(rtol=1e-10, atol=1e-12)}
OPTIMIZERS = {
    "sgd": (lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=0.01),
            lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=0.01)),
    "adam": (lambda ps: optim.Adam(ps, lr=0.01, weight_decay=0.01), lambda ps: torch.optim.Adam(ps, lr=0.01,
                                                                                                weight_decay=0.01)),
    "adamw": (lambda ps: optim.AdamW(ps, lr=0.01), lambda ps: torch.optim.AdamW(ps, lr=0.01)),
}


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(6, 16), nn.Linear(16, 16), nn.Linear(16, 4)

    def forward(self, x):
        return self.fc3(F.gelu(self.fc2(tracer.tanh(self.fc1(x)))))


class TorchMLP(TNN.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = TNN.Linear(6, 16), TNN.Linear(16, 16), TNN.Linear(16, 4)

    def forward(self, x):
        return self.fc3(TNN.functional.gelu(self.fc2(torch.tanh(self.fc1(x)))))


class Conv(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.norm = nn.LayerNorm(64)
        self.fc = nn.Linear(64, 4)

    def forward(self, x):
        return self.fc(self.norm(self.pool(F.relu(self.conv(x))).flatten(1)))


class TorchConv(TNN.Module):
    def __init__(self):
        super().__init__()
        self.conv = TNN.Conv2d(1, 4, 3, padding=1)
        self.pool = TNN.MaxPool2d(2)
        self.norm = TNN.LayerNorm(64)
        self.fc = TNN.Linear(64, 4)

    def forward(self, x):
        return self.fc(self.norm(self.pool(TNN.functional.relu(self.conv(x))).flatten(1)))


class Attention(nn.Module):
    """One causal self-attention head over embeddings, then a head: matmul, softmax, masking, split."""

    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(7, 8)
        self.qkv = nn.Linear(8, 24, bias=False)  # a key bias has a zero gradient: Adam would scale noise
        self.head = nn.Linear(8, 7)

    def forward(self, idx):
        q, k, v = self.qkv(self.tok(idx)).chunk(3, dim=-1)
        s = (q @ k.transpose(-1, -2)) / math.sqrt(8)
        t = idx.shape[1]
        s = s.masked_fill(tracer.tensor(np.triu(np.ones((t, t), bool), 1)), float("-inf"))
        return self.head(F.softmax(s, axis=-1) @ v).reshape(-1, 7)


class TorchAttention(TNN.Module):
    def __init__(self):
        super().__init__()
        self.tok = TNN.Embedding(7, 8)
        self.qkv = TNN.Linear(8, 24, bias=False)
        self.head = TNN.Linear(8, 7)

    def forward(self, idx):
        q, k, v = self.qkv(self.tok(idx)).chunk(3, dim=-1)
        s = (q @ k.transpose(-1, -2)) / math.sqrt(8)
        t = idx.shape[1]
        s = s.masked_fill(torch.tensor(np.triu(np.ones((t, t), bool), 1)), float("-inf"))
        return self.head(torch.softmax(s, dim=-1) @ v).reshape(-1, 7)


def _batches(kind, dtype, steps=5):
    rng = np.random.default_rng(1)
    if kind == "mlp":
        return [(rng.standard_normal((8, 6)).astype(dtype), rng.integers(0, 4, 8)) for _ in range(steps)]
    if kind == "conv":
        return [(rng.standard_normal((5, 1, 8, 8)).astype(dtype), rng.integers(0, 4, 5)) for _ in range(steps)]
    return [(rng.integers(0, 7, (3, 5)), rng.integers(0, 7, 15)) for _ in range(steps)]


MODELS = {"mlp": (MLP, TorchMLP), "conv": (Conv, TorchConv), "attention": (Attention, TorchAttention)}


def _train_tracegrad(model, opt, batches):
    losses = []
    for x, y in batches:
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def _train_torch(model, opt, batches):
    losses = []
    for x, y in batches:
        opt.zero_grad()
        loss = TNN.functional.cross_entropy(model(torch.from_numpy(x)), torch.from_numpy(y))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("opt_name", sorted(OPTIMIZERS))
@pytest.mark.parametrize("kind", sorted(MODELS))
def test_the_four_line_loop_gives_torchs_losses_and_weights(kind, opt_name, dtype):
    ours_cls, theirs_cls = MODELS[kind]
    torch.manual_seed(0)
    theirs = theirs_cls().to(getattr(torch, dtype))
    ours = ours_cls().to(dtype)
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    make_ours, make_theirs = OPTIMIZERS[opt_name]
    batches = _batches(kind, dtype)
    before = autodiff.backward.compiles
    ours_losses = _train_tracegrad(ours, make_ours(ours.parameters()), batches)
    assert autodiff.backward.compiles - before <= 1  # step 1 compiles (unless cached already), steps 2-5 replay
    theirs_losses = _train_torch(theirs, make_theirs(theirs.parameters()), batches)
    np.testing.assert_allclose(ours_losses, theirs_losses, **TOL[dtype])
    for name, p in theirs.state_dict().items():
        np.testing.assert_allclose(ours.state_dict()[name], p.numpy(), **TOL[dtype], err_msg=name)
    for (name, p), q in zip(ours.named_parameters(), theirs.parameters(), strict=True):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), **TOL[dtype], err_msg=name)


def test_a_replayed_step_compiles_nothing():
    model = MLP()
    opt = optim.Adam(model.parameters(), lr=0.01)
    batches = _batches("mlp", "float32", steps=4)
    _train_tracegrad(model, opt, batches[:1])
    before = autodiff.backward.compiles
    _train_tracegrad(model, opt, batches[1:])
    assert autodiff.backward.compiles == before
    model.fc2.weight.requires_grad_(False)  # another program (one leaf fewer): compiled once more, then replayed
    _train_tracegrad(model, opt, batches)
    assert autodiff.backward.compiles == before + 1


def test_backward_does_not_run_the_forward_again():
    model = MLP()
    x, y = _batches("mlp", "float32", steps=1)[0]
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    entry = next(reversed(autodiff.backward._CACHE.values()))
    ops = [b.value.op for b in entry.mod["backward"].bindings if hasattr(b.value, "op")]
    assert "tanh" not in ops  # tanh's backward reads its output, fed from the eager forward
    assert ops.count("matmul") == 5  # two per layer but the first's input gradient; none of the forward's three
    fed = [p.type.shape for p in entry.mod["backward"].params]
    assert fed.count((8, 16)) >= 3 and (8, 4) in fed  # activations and the logits' log_softmax, as saved


def test_step_matches_value_and_grad():
    model = MLP()
    x, y = _batches("mlp", "float32", steps=1)[0]
    value, grads = autodiff.value_and_grad(lambda a, b: F.cross_entropy(model(a), b), wrt=model.parameters())(x, y)
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    assert loss.item() == pytest.approx(value.item(), rel=1e-6)
    for p, g in zip(model.parameters(), grads, strict=True):
        np.testing.assert_allclose(p.grad.numpy(), g.numpy(), rtol=1e-5, atol=1e-7)


class DropNorm(nn.Module):
    """Dropout (a random mask drawn per step) and BatchNorm (running statistics written during the forward)."""

    def __init__(self):
        super().__init__()
        self.fc1, self.bn, self.drop, self.fc2 = nn.Linear(6, 16), nn.BatchNorm1d(16), nn.Dropout(0.3), nn.Linear(16, 4)

    def forward(self, x):
        return self.fc2(self.drop(F.relu(self.bn(self.fc1(x)))))


def test_dropout_and_batchnorm_match_the_value_and_grad_step():
    nn.init.manual_seed(0)
    ours, ref = DropNorm(), DropNorm()
    ref.load_state_dict(ours.state_dict())
    batches = _batches("mlp", "float32")
    step = autodiff.value_and_grad(lambda a, b: F.cross_entropy(ref(a), b), wrt=ref.parameters())
    ref_opt, opt = optim.Adam(ref.parameters(), lr=0.01), optim.Adam(ours.parameters(), lr=0.01)
    tracer.manual_seed(3)
    ref_losses = []
    for x, y in batches:
        value, grads = step(x, y)
        ref_opt.step(grads)
        ref_losses.append(value.item())
    tracer.manual_seed(3)  # the same dropout masks, drawn eagerly in the same order
    losses = _train_tracegrad(ours, opt, batches)
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-5)
    for name, v in ref.state_dict().items():
        np.testing.assert_allclose(ours.state_dict()[name], v, rtol=1e-5, atol=1e-6, err_msg=name)


def test_a_repeated_program_keeps_only_what_its_backward_reads():
    tracer.autograd.set_hint((), frozenset())  # forget the last backward of an earlier test
    model = MLP()
    x, y = _batches("mlp", "float32", steps=1)[0]

    def kept(loss):
        tape = loss.grad_fn.tape
        return sum(v is not None for v, b in zip(tape.values, tape.bindings, strict=True) if b is not None)
    first = F.cross_entropy(model(x), y)
    n_first = kept(first)
    first.backward()
    second = F.cross_entropy(model(x), y)  # the same program: its tape follows the first backward's reads
    assert kept(second) < n_first
    model.zero_grad()
    second.backward()
    _, ref = autodiff.value_and_grad(lambda a, b: F.cross_entropy(model(a), b), wrt=model.parameters())(x, y)
    for p, g in zip(model.parameters(), ref, strict=True):
        np.testing.assert_allclose(p.grad.numpy(), g.numpy(), rtol=1e-5, atol=1e-7)
    # the same first layer, then another loss: its output, which the cross-entropy backward did not read
    # (tanh's backward reads tanh's output), was not kept while the tape followed that program, and is
    # recomputed eagerly the moment an op off that program reads it (the square), from sources no in-place write
    # can have reached yet
    model.zero_grad()
    h = model.fc1(x)
    tape = h.grad_fn.tape
    assert tape.values[5] is None  # fc1's output (leaf, permute, input, matmul, leaf, add)
    loss = (h ** 2).sum()
    np.testing.assert_array_equal(tape.values[5], h.numpy())
    loss.backward()
    ops = [b.value.op for b in next(reversed(autodiff.backward._CACHE.values())).mod["backward"].bindings
           if hasattr(b.value, "op")]
    assert ops.count("matmul") == 1  # the weight's gradient: fc1's output was restored, nothing is recomputed
    _, ref = autodiff.value_and_grad(lambda a: (model.fc1(a) ** 2).sum(), wrt=model.parameters())(x)
    for p, g in zip(list(model.parameters())[:2], ref[:2], strict=True):
        np.testing.assert_allclose(p.grad.numpy(), g.numpy(), rtol=1e-5, atol=1e-6)
    assert model.fc2.weight.grad is None
