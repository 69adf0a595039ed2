"""The workloads of `python -m benchmarks`: one SGD training step (loss, gradients, update) of each
model in each library, built from the same initial weights where the model is shared.

Each builder returns a zero-argument `step()`; its first call is the library's first call (trace,
Gradient, compile for tracegrad; tracing and code generation for torch.compile and JAX).
"""
from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np

import autodiff
import nn
import tracer
from benchmarks.step_speed import make_problem, numpy_step
from nn import functional as F
from nn import optim

LR = 1e-3


# ---------------------------------------------------------------- MLPs: 784-1024-1024-10 and 64-64-64-10


def mlp_logits(ws, h, relu):
    """The MLP's forward in any library with `@`, `+` and a relu: (w, b) pairs, relu between layers."""
    for i in range(0, len(ws), 2):
        h = h @ ws[i] + ws[i + 1]
        if i + 2 < len(ws):
            h = relu(h)
    return h


def mlp_tracegrad(params, x, one_hot):
    """value_and_grad over the weights, then an SGD update through nn.optim.SGD; `.stats` on the step."""
    ws = [nn.Parameter(p.copy()) for p in params]

    def loss(x, one_hot):
        return -(one_hot * tracer.log_softmax(mlp_logits(ws, x, tracer.relu))).sum(axis=1).mean()
    return sgd_step(loss, ws, x, one_hot)


def sgd_step(loss, params, *args):
    """value_and_grad(loss) over params, then nn.optim.SGD's update; `.stats` gives the executor's."""
    params = list(params)  # model.parameters() is a generator: read twice below
    vg = autodiff.value_and_grad(loss, wrt=params)
    opt = optim.SGD(params, lr=LR)

    def step():
        value, grads = vg(*args)
        opt.step(grads)
        return value
    step.stats = lambda: vg.stats
    return step


def mlp_numpy(params, x, one_hot):
    ws = [p.copy() for p in params]
    inner = numpy_step(ws)

    def step():
        value, grads = inner(x, one_hot)
        for w, g in zip(ws, grads, strict=True):
            w -= LR * g
        return value
    return step


def _torch_mlp_loss(torch, ws, xt, ht):
    return -(ht * torch.log_softmax(mlp_logits(ws, xt, torch.relu), dim=1)).sum(dim=1).mean()


def mlp_torch(torch, params, x, one_hot, compiled=False, device="cpu"):
    ws = [torch.tensor(p.copy(), requires_grad=True, device=device) for p in params]
    xt, ht = torch.tensor(x, device=device), torch.tensor(one_hot, device=device)
    opt = torch.optim.SGD(ws, lr=LR)
    fn = torch.compile(_torch_mlp_loss) if compiled else _torch_mlp_loss

    def step():
        opt.zero_grad(set_to_none=True)
        loss = fn(torch, ws, xt, ht)
        loss.backward()
        opt.step()
        return loss.detach()
    return step


def mlp_jax(jax, params, x, one_hot):
    jnp = jax.numpy

    def loss(ws, x, one_hot):
        return -(one_hot * jax.nn.log_softmax(mlp_logits(ws, x, jax.nn.relu), axis=1)).sum(axis=1).mean()

    @jax.jit
    def update(ws, x, one_hot):
        value, grads = jax.value_and_grad(loss)(ws, x, one_hot)
        return value, [w - LR * g for w, g in zip(ws, grads, strict=True)]

    state = {"ws": [jnp.asarray(p) for p in params]}
    xj, hj = jnp.asarray(x), jnp.asarray(one_hot)

    def step():
        value, state["ws"] = update(state["ws"], xj, hj)
        return jax.block_until_ready(value)
    return step


def mlp_contenders(sizes, batch, torch=None, jax=None, compile_torch=True):
    """{name: builder} for an MLP: each builder makes a fresh step from the same initial weights."""
    params, x, one_hot = make_problem(sizes, batch)
    out = {"tracegrad": lambda: mlp_tracegrad(params, x, one_hot),
           "numpy": lambda: mlp_numpy(params, x, one_hot)}
    if torch is not None:
        out["torch"] = lambda: mlp_torch(torch, params, x, one_hot)
        if compile_torch:
            out["torch.compile"] = lambda: mlp_torch(torch, params, x, one_hot, compiled=True)
    if jax is not None:
        out["jax"] = lambda: mlp_jax(jax, params, x, one_hot)
    return out


# ---------------------------------------------------------------- GPT: vocab 64, context 64, width 128, 4 heads

GPT_SHAPE = {"vocab": 64, "context": 64, "width": 128, "heads": 4, "layers": 4, "batch": 16}


def _gpt_batch(shape, seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, shape["vocab"], (shape["batch"], shape["context"] + 1))
    return ids[:, :-1].astype("int64"), ids[:, 1:].astype("int64")


def gpt_tracegrad(shape, device=None):
    """examples/train_gpt.py's GPT with tanh-GELU, cross-entropy, SGD (on `device`: "cuda" moves model and batch)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
    from train_gpt import GPT
    model = GPT(shape["vocab"], shape["context"], shape["width"], shape["heads"], shape["layers"])
    for block in model.blocks:
        block.mlp[1].approximate = "tanh"
    x, y = _gpt_batch(shape)
    if device is not None:
        model.to(device)
        x, y = tracer.tensor(x, device=device), tracer.tensor(y, device=device)

    def loss(x, y):
        logits = model(x)
        return F.cross_entropy(logits.reshape(-1, shape["vocab"]), y.reshape(-1))
    return sgd_step(loss, model.parameters(), x, y)


def gpt_torch(torch, shape, compiled=False, sdpa=False, device="cpu"):
    """The same architecture in PyTorch (pre-LN blocks, causal attention, tanh-GELU MLP 4x), its own init."""
    tnn = torch.nn
    d, heads = shape["width"], shape["heads"]

    class Block(tnn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = tnn.LayerNorm(d), tnn.LayerNorm(d)
            self.qkv, self.proj = tnn.Linear(d, 3 * d), tnn.Linear(d, d)
            self.mlp = tnn.Sequential(tnn.Linear(d, 4 * d), tnn.GELU(approximate="tanh"), tnn.Linear(4 * d, d))

        def forward(self, x):
            b, t, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, heads, d // heads).permute(2, 0, 3, 1, 4)
            if sdpa:
                a = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            else:
                s = (q @ k.transpose(-1, -2)) / math.sqrt(d // heads)
                mask = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
                a = torch.softmax(s.masked_fill(mask, float("-inf")), dim=-1) @ v
            x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
            return x + self.mlp(self.ln2(x))

    class Model(tnn.Module):
        def __init__(self):
            super().__init__()
            self.tok, self.pos = tnn.Embedding(shape["vocab"], d), tnn.Embedding(shape["context"], d)
            self.blocks = tnn.Sequential(*[Block() for _ in range(shape["layers"])])
            self.ln, self.head = tnn.LayerNorm(d), tnn.Linear(d, shape["vocab"])

        def forward(self, idx, y):
            x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
            logits = self.head(self.ln(self.blocks(x)))
            return torch.nn.functional.cross_entropy(logits.reshape(-1, shape["vocab"]), y.reshape(-1))

    torch.manual_seed(0)
    model = Model().to(device)
    fn = torch.compile(model) if compiled else model
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    x, y = (torch.tensor(a, device=device) for a in _gpt_batch(shape))

    def step():
        opt.zero_grad(set_to_none=True)
        loss = fn(x, y)
        loss.backward()
        opt.step()
        return loss.detach()
    return step


def gpt_contenders(shape, torch=None, compile_torch=True):
    out = {"tracegrad": lambda: gpt_tracegrad(shape)}
    if torch is not None:
        out["torch"] = lambda: gpt_torch(torch, shape)
        out["torch sdpa"] = lambda: gpt_torch(torch, shape, sdpa=True)
        if compile_torch:
            out["torch.compile"] = lambda: gpt_torch(torch, shape, compiled=True)
    return out


# ---------------------------------------------------------------- the checkpoint benchmark's residual tanh model


def checkpoint_contenders(quick: bool, torch=None):
    from benchmarks import checkpoint_memory as cm
    blocks, width, batch = (8, 32, 256) if quick else (32, 128, 2048)
    weights, x = cm.make_weights(blocks, width), cm.make_batch(batch, width)
    out = {}
    for v in ("none", "every"):
        def build(v=v):
            c = cm.compile_variant(weights, x, v)

            def step():
                return c.step(x)
            step.stats = lambda: c.executor.stats
            return step
        out[f"tracegrad {v}"] = build
        if torch is not None:
            ws = [torch.tensor(w, requires_grad=True) for w in weights]
            xt = torch.tensor(x)
            out[f"torch {v}"] = (lambda v=v, ws=ws, xt=xt: (lambda: cm.torch_step(torch, ws, xt, v)))
    return out, f"residual tanh, {blocks} blocks, width {width}, batch {batch}"


# ---------------------------------------------------------------- pytorch/examples: mnist CNN and word_language_model
# The model classes are pytorch/examples' source (mnist/main.py's Net, word_language_model/model.py's RNNModel
# with rnn_type "LSTM"), written once against a `torch` namespace: real torch, or tracegrad's `nn.torch`.

MNIST_SHAPE = {"batch": 64, "lr": 1.0}  # mnist/main.py: --batch-size 64, Adadelta(lr=1.0)
WLM_SHAPE = {"vocab": 1000, "emsize": 200, "nhid": 200, "nlayers": 2, "bptt": 35, "batch": 20, "dropout": 0.2,
             "lr": 20.0, "clip": 0.25}  # word_language_model/main.py's defaults (a 1000-word vocabulary)


def mnist_net(torch):
    """mnist/main.py's Net: conv 1->32, conv 32->64 (3x3), max-pool 2, dropout 0.25, fc 9216->128, dropout 0.5,
    fc 128->10, log_softmax."""
    nn, F = torch.nn, torch.nn.functional

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 32, 3, 1)
            self.conv2 = nn.Conv2d(32, 64, 3, 1)
            self.dropout1 = nn.Dropout(0.25)
            self.dropout2 = nn.Dropout(0.5)
            self.fc1 = nn.Linear(9216, 128)
            self.fc2 = nn.Linear(128, 10)

        def forward(self, x):
            x = F.relu(self.conv2(F.relu(self.conv1(x))))
            x = self.dropout1(F.max_pool2d(x, 2))
            x = self.dropout2(F.relu(self.fc1(torch.flatten(x, 1))))
            return F.log_softmax(self.fc2(x), dim=1)
    return Net()


def wlm_model(torch, s=WLM_SHAPE):
    """word_language_model/model.py's RNNModel("LSTM", ...): dropout, embedding, nn.LSTM, dropout, decoder,
    log_softmax over (bptt * batch, vocab); init_weights as the example."""
    nn, F = torch.nn, torch.nn.functional

    class RNNModel(nn.Module):
        def __init__(self, ntoken, ninp, nhid, nlayers, dropout):
            super().__init__()
            self.ntoken = ntoken
            self.drop = nn.Dropout(dropout)
            self.encoder = nn.Embedding(ntoken, ninp)
            self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=dropout)
            self.decoder = nn.Linear(nhid, ntoken)
            nn.init.uniform_(self.encoder.weight, -0.1, 0.1)
            nn.init.zeros_(self.decoder.bias)
            nn.init.uniform_(self.decoder.weight, -0.1, 0.1)

        def forward(self, input, hidden):
            emb = self.drop(self.encoder(input))
            output, hidden = self.rnn(emb, hidden)
            decoded = self.decoder(self.drop(output)).view(-1, self.ntoken)
            return F.log_softmax(decoded, dim=1), hidden
    return RNNModel(s["vocab"], s["emsize"], s["nhid"], s["nlayers"], s["dropout"])


def _mnist_batch(batch, seed=0):
    rng = np.random.default_rng(seed)
    x = ((rng.random((batch, 1, 28, 28)) - 0.1307) / 0.3081).astype("float32")  # Normalize((0.1307,), (0.3081,))
    return x, rng.integers(0, 10, batch).astype("int64")


def _wlm_batch(s, seed=0):
    ids = np.random.default_rng(seed).integers(0, s["vocab"], (s["bptt"] + 1, s["batch"])).astype("int64")
    return ids[:-1], ids[1:].reshape(-1)  # get_batch: data (bptt, batch), targets flattened


def mnist_torch(torch, s=MNIST_SHAPE, optimizer="adadelta"):
    """mnist/main.py's train() step in torch eager: zero_grad, nll_loss, backward, Adadelta (or SGD) step."""
    torch.manual_seed(1)
    model = mnist_net(torch)
    model.train()
    opt = (torch.optim.Adadelta if optimizer == "adadelta" else torch.optim.SGD)(model.parameters(), lr=s["lr"] * (
        1.0 if optimizer == "adadelta" else 0.01))
    x, y = (torch.tensor(a) for a in _mnist_batch(s["batch"]))

    def step():
        opt.zero_grad()
        loss = torch.nn.functional.nll_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss.detach()
    return step


def mnist_tracegrad(s=MNIST_SHAPE, optimizer="adadelta"):
    """The same step on nn.torch, compiled: value_and_grad over the parameters, then optim.Adadelta (or SGD)."""
    import nn.torch as torch
    torch.manual_seed(1)
    model = mnist_net(torch)
    model.train()
    params = list(model.parameters())
    opt = (optim.Adadelta if optimizer == "adadelta" else optim.SGD)(params, lr=s["lr"] * (
        1.0 if optimizer == "adadelta" else 0.01))
    x, y = (tracer.tensor(a) for a in _mnist_batch(s["batch"]))
    vg = autodiff.value_and_grad(lambda x, y: F.nll_loss(model(x), y), wrt=params)

    def step():
        value, grads = vg(x, y)
        opt.step(grads)
        return value
    step.stats = lambda: vg.stats
    return step


def wlm_torch(torch, s=WLM_SHAPE):
    """word_language_model/main.py's train() step: repackage_hidden, forward, NLLLoss, backward,
    clip_grad_norm_(0.25), p.data.add_(p.grad, alpha=-lr)."""
    torch.manual_seed(1111)
    model = wlm_model(torch, s)
    model.train()
    criterion = torch.nn.NLLLoss()
    data, targets = (torch.tensor(a) for a in _wlm_batch(s))
    state = {"hidden": (torch.zeros(s["nlayers"], s["batch"], s["nhid"]),) * 2}

    def step():
        model.zero_grad()
        hidden = tuple(h.detach() for h in state["hidden"])
        output, state["hidden"] = model(data, hidden)
        loss = criterion(output, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), s["clip"])
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-s["lr"])
        return loss.detach()
    return step


def wlm_tracegrad(s=WLM_SHAPE):
    """The same step on nn.torch, compiled: value_and_grad (with the new hidden state as aux), the gradients
    clipped by nn.utils.clip_grad_norm_ and the example's SGD line, p.data.add_(p.grad, alpha=-lr)."""
    import nn.torch as torch
    torch.manual_seed(1111)
    model = wlm_model(torch, s)
    model.train()
    params = list(model.parameters())
    data, targets = (tracer.tensor(a) for a in _wlm_batch(s))
    criterion = nn.NLLLoss()

    def loss(data, h, c):
        output, hidden = model(data, (h, c))
        return criterion(output, targets), hidden
    vg = autodiff.value_and_grad(loss, wrt=params, has_aux=True)
    zeros = tracer.zeros((s["nlayers"], s["batch"], s["nhid"]))
    state = {"hidden": (zeros, zeros)}

    def step():
        (value, hidden), grads = vg(data, *state["hidden"])
        state["hidden"] = tuple(tracer.tensor(np.asarray(h)) for h in hidden)  # repackage_hidden
        for p, g in zip(params, grads, strict=True):
            p.grad = g
        nn.utils.clip_grad_norm_(params, s["clip"])
        for p in params:  # the example's own update line
            p.data.add_(p.grad, alpha=-s["lr"])
        return value
    step.stats = lambda: vg.stats
    return step


# ---------------------------------------------------------------- the GPT in JAX (for `python -m benchmarks`)


def gpt_jax(jax, shape, seed=0):
    """The GPT's architecture (pre-LN blocks, causal attention, tanh-GELU MLP 4x, cross-entropy) as one
    `jax.jit`-ed SGD step over a pytree of float32 weights (normal(0, 0.02) init, zero biases, unit LN gains)."""
    jnp = jax.numpy
    d, heads, vocab, t = shape["width"], shape["heads"], shape["vocab"], shape["context"]
    rng = np.random.default_rng(seed)

    def dense(n_in, n_out):
        return {"w": jnp.asarray(rng.normal(0, 0.02, (n_in, n_out)).astype("float32")),
                "b": jnp.zeros(n_out, "float32")}

    def norm():
        return {"g": jnp.ones(d, "float32"), "b": jnp.zeros(d, "float32")}

    params = {"tok": jnp.asarray(rng.normal(0, 0.02, (vocab, d)).astype("float32")),
              "pos": jnp.asarray(rng.normal(0, 0.02, (t, d)).astype("float32")),
              "blocks": [{"ln1": norm(), "ln2": norm(), "qkv": dense(d, 3 * d), "proj": dense(d, d),
                          "fc": dense(d, 4 * d), "out": dense(4 * d, d)} for _ in range(shape["layers"])],
              "ln": norm(), "head": dense(d, vocab)}

    def layer_norm(p, x):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / jnp.sqrt(var + 1e-5) * p["g"] + p["b"]

    def linear(p, x):
        return x @ p["w"] + p["b"]

    def loss(params, idx, y):
        b = idx.shape[0]
        x = params["tok"][idx] + params["pos"][None]
        mask = jnp.triu(jnp.ones((t, t), bool), 1)
        for p in params["blocks"]:
            q, k, v = linear(p["qkv"], layer_norm(p["ln1"], x)).reshape(b, t, 3, heads, d // heads).transpose(
                2, 0, 3, 1, 4)
            s = jnp.where(mask, -jnp.inf, q @ k.swapaxes(-1, -2) / math.sqrt(d // heads))
            a = (jax.nn.softmax(s, axis=-1) @ v).transpose(0, 2, 1, 3).reshape(b, t, d)
            x = x + linear(p["proj"], a)
            x = x + linear(p["out"], jax.nn.gelu(linear(p["fc"], layer_norm(p["ln2"], x)), approximate=True))
        logits = linear(params["head"], layer_norm(params["ln"], x)).reshape(-1, vocab)
        return -jnp.take_along_axis(jax.nn.log_softmax(logits), y.reshape(-1, 1), axis=1).mean()

    @jax.jit
    def update(params, idx, y):
        value, grads = jax.value_and_grad(loss)(params, idx, y)
        return value, jax.tree_util.tree_map(lambda w, g: w - LR * g, params, grads)

    state = {"params": params}
    x, y = (jnp.asarray(a.astype("int32")) for a in _gpt_batch(shape))

    def step():
        value, state["params"] = update(state["params"], x, y)
        return jax.block_until_ready(value)
    return step
