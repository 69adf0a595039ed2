"""Time one training step (loss and gradients) of an MLP in tracegrad, hand-written NumPy, PyTorch and JAX.

The model: 784-512-512-10 with ReLU, batch 256, float32, loss mean over the batch of
-sum(one_hot * log_softmax(logits)); gradients with respect to all six weights and biases. Every
framework runs in this one process, the steps interleaved round by round; each line is the median.

  tracegrad   autodiff.value_and_grad, traced and compiled on the first call, replayed after
  numpy       the forward and backward written out by hand, lean (what an executor of NumPy
              kernels can hope to match)
  torch       loss.backward() on CPU, torch.set_num_threads = NumPy's BLAS threads (if installed)
  jax         jax.jit(jax.value_and_grad(loss)) with block_until_ready (if installed)

A tiny model (width 8, batch 8) then shows per-step Python overhead, where the arithmetic is negligible.

    python benchmarks/step_speed.py            # 50 rounds
    python benchmarks/step_speed.py --quick    # 10 rounds
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

if __name__ == "__main__":
    # OpenBLAS (NumPy's BLAS) keeps its worker threads spinning a while after each call; in one process
    # on 2 cores they stole PyTorch's cores (its MLP step took twice as long right after a NumPy step).
    # A short spin removed that; set the variable yourself to override it.
    os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # make the repository importable

import numpy as np  # noqa: E402

import autodiff  # noqa: E402
import ir  # noqa: E402
import tracer  # noqa: E402
from benchmarks.checkpoint_memory import interleaved_medians, numpy_threads  # noqa: E402


def make_problem(sizes, batch: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    params = []
    for n_in, n_out in zip(sizes[:-1], sizes[1:], strict=True):
        params.append((rng.standard_normal((n_in, n_out)) * np.sqrt(2.0 / n_in)).astype("float32"))
        params.append(np.zeros(n_out, "float32"))
    x = rng.standard_normal((batch, sizes[0])).astype("float32")
    one_hot = np.eye(sizes[-1], dtype="float32")[rng.integers(0, sizes[-1], batch)]
    return params, x, one_hot


# ---------------------------------------------------------------- the step in each framework


def tracegrad_step(params):
    tensors = [tracer.tensor(p) for p in params]

    def loss(x, one_hot):
        h = x
        for i in range(0, len(tensors), 2):
            h = h @ tensors[i] + tensors[i + 1]
            if i + 2 < len(tensors):
                h = tracer.relu(h)
        return -(one_hot * tracer.log_softmax(h)).sum(axis=1).mean()

    return autodiff.value_and_grad(loss, wrt=tensors)


def numpy_step(params):
    """Forward and backward by hand, lean: in-place ReLU, softmax - one_hot (rows of one_hot sum to 1)."""
    def step(x, one_hot):
        acts, h = [x], x
        n = len(params) // 2
        for i in range(n):
            h = h @ params[2 * i]
            h += params[2 * i + 1]
            if i < n - 1:
                np.maximum(h, 0.0, out=h)
            acts.append(h)
        shifted = h - h.max(axis=1, keepdims=True)
        log_p = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
        batch = x.shape[0]
        value = -(one_hot * log_p).sum() / batch
        g = np.exp(log_p)
        g -= one_hot
        g /= batch
        grads = [None] * len(params)
        for i in reversed(range(n)):
            grads[2 * i] = acts[i].T @ g
            grads[2 * i + 1] = g.sum(axis=0)
            if i > 0:
                g = g @ params[2 * i].T
                g *= acts[i] > 0
        return value, grads

    return step


def torch_step(torch, params):
    ws = [torch.tensor(p, requires_grad=True) for p in params]

    def step(x, one_hot):
        for w in ws:
            w.grad = None
        h = x
        for i in range(0, len(ws), 2):
            h = h @ ws[i] + ws[i + 1]
            if i + 2 < len(ws):
                h = torch.relu(h)
        loss = -(one_hot * torch.log_softmax(h, dim=1)).sum(dim=1).mean()
        loss.backward()
        return loss.detach(), [w.grad for w in ws]

    return step


def jax_step(jax, params):
    jnp = jax.numpy

    def loss(ws, x, one_hot):
        h = x
        for i in range(0, len(ws), 2):
            h = h @ ws[i] + ws[i + 1]
            if i + 2 < len(ws):
                h = jax.nn.relu(h)
        return -(one_hot * jax.nn.log_softmax(h, axis=1)).sum(axis=1).mean()

    fn = jax.jit(jax.value_and_grad(loss))
    ws = [jnp.asarray(p) for p in params]
    return lambda x, one_hot: jax.block_until_ready(fn(ws, x, one_hot))


# ---------------------------------------------------------------- running and reporting


def build_steps(params, x, one_hot):
    """{name: zero-argument step} for every framework present, each checked against NumPy's gradients."""
    np_step = numpy_step(params)
    want_value, want = np_step(x, one_hot)
    steps = {"numpy": lambda: np_step(x, one_hot)}
    tg = tracegrad_step(params)
    _check("tracegrad", tg(x, one_hot), want_value, want)
    steps["tracegrad"] = lambda: tg(x, one_hot)
    notes = []
    try:
        import torch
    except ImportError:
        notes.append("torch: not installed, skipped (pip install torch==2.13.0)")
    else:
        torch.set_num_threads(numpy_threads())
        xt, ht = torch.tensor(x), torch.tensor(one_hot)
        ts = torch_step(torch, params)
        _check("torch", ts(xt, ht), want_value, want)
        steps["torch"] = lambda: ts(xt, ht)
        notes.append(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    try:
        import jax
    except ImportError:
        notes.append("jax: not installed, skipped (pip install jax)")
    else:
        xj, hj = jax.numpy.asarray(x), jax.numpy.asarray(one_hot)
        js = jax_step(jax, params)
        _check("jax", js(xj, hj), want_value, want)
        steps["jax"] = lambda: js(xj, hj)
        notes.append(f"jax {jax.__version__} on {jax.devices()[0].platform}")
    return steps, notes


def _check(name, result, want_value, want):
    value, grads = result
    np.testing.assert_allclose(np.asarray(value), want_value, rtol=1e-4, err_msg=name)
    for g, w in zip(grads, want, strict=True):
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-3, atol=1e-5, err_msg=name)


def report(title, steps, rounds):
    for fn in steps.values():  # warm up: compile, caches, thread pools
        fn()
    medians = interleaved_medians(steps, rounds)
    base = medians["numpy"]
    print(f"\n{title} (median of {rounds} interleaved rounds)")
    print(f"{'framework':<10} {'step ms':>10} {'vs numpy':>9}")
    for name, t in medians.items():
        print(f"{name:<10} {t * 1e3:10.3f} {t / base:9.2f}")
    return medians


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="fewer rounds")
    p.add_argument("--rounds", type=int, default=None, help="timing rounds (default 50, quick 10)")
    args = p.parse_args(argv)
    rounds = args.rounds or (10 if args.quick else 50)
    print(f"numpy {np.__version__}, {numpy_threads()} BLAS threads")

    params, x, one_hot = make_problem((784, 512, 512, 10), 256)
    steps, notes = build_steps(params, x, one_hot)
    for n in notes:
        print(n)
    report("MLP 784-512-512-10, batch 256, float32: one step = loss and all gradients", steps, rounds)

    params, x, one_hot = make_problem((8, 8, 8, 2), 8)
    steps, _ = build_steps(params, x, one_hot)
    tiny = report("tiny MLP 8-8-8-2, batch 8: per-step overhead", steps, rounds * 20)
    # the same adjoint run straight on the executor: the rest is value_and_grad's own work
    # (signature lookup, feeding captured tensors, wrapping results in Tensors)
    tg = tracegrad_step(params)
    tg(x, one_hot)
    adjoint = ir.Executor(tg.module)["main_adjoint"]
    executor = interleaved_medians({"executor": lambda: adjoint(x, one_hot, *params)}, rounds * 20)["executor"]
    n = len(tg.module["main_adjoint"].blocks[0].bindings)
    print(f"tracegrad's tiny step: {n} bindings; main_adjoint alone on the executor {executor * 1e6:.0f} us "
          f"({executor / n * 1e6:.1f} us per binding), value_and_grad {tiny['tracegrad'] * 1e6:.0f} us, "
          f"hand-written NumPy {tiny['numpy'] * 1e6:.0f} us")


if __name__ == "__main__":
    main()
