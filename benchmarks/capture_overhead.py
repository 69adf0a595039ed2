"""What re-finding the captured tensors costs each call of a compiled step (docs/design.md, "What a
compiled step sees").

Before each replay a step checks its guards (tracer.guard values such as model.training, and the module
attributes the trace read: tracer.attr_guards.AttributeGuards), then walks the paths to every tensor its
function captured (tracer.capture.Sources) and checks the objects on the way. This prints, per model, the
median time of a whole step, of the guards and of the walk, measured side by side in this one process,
and their share of the step.

    python benchmarks/capture_overhead.py            # 30 rounds
    python benchmarks/capture_overhead.py --quick    # 5 rounds
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # make the repository importable

import numpy as np  # noqa: E402

import autodiff  # noqa: E402
import nn  # noqa: E402
from nn import functional as F  # noqa: E402


def mlp(sizes, batch):
    layers = []
    for n_in, n_out in zip(sizes[:-1], sizes[1:], strict=True):
        layers += [nn.Linear(n_in, n_out), nn.ReLU()]
    model = nn.Sequential(*layers[:-1])
    rng = np.random.default_rng(0)
    args = (rng.standard_normal((batch, sizes[0])).astype("float32"), rng.integers(0, sizes[-1], batch))
    return model, lambda x, y: F.cross_entropy(model(x), y), args


def gpt():
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
    from train_gpt import DIGITS, GPT, IGNORE, make_batch

    model = GPT(DIGITS + 1, 16, 64, 4, 2)

    def loss(x, y):
        return F.cross_entropy(model(x).reshape((-1, DIGITS + 1)), y.reshape(-1), ignore_index=IGNORE)

    return model, loss, make_batch(np.random.default_rng(0), 16, 8)


def _resolve(step, args):
    try:
        from autodiff import pytree  # arguments as pytrees: _resolve takes the call's tree and flat leaves
    except ImportError:
        return step._resolve(step.last, args)
    flat: list = []
    return step._resolve(step.last, pytree.CallTree(args, {}, flat), flat)


def measure(name, model, loss, args, rounds):
    step = autodiff.value_and_grad(loss, wrt=model.parameters())
    step(*args)  # trace and compile
    steps, guards, walks = [], [], []
    for _ in range(rounds):
        t0 = time.perf_counter()
        step(*args)
        t1 = time.perf_counter()
        assert all(getter() == value for getter, value in step.last.guards)
        t2 = time.perf_counter()
        assert _resolve(step, args) is not None
        t3 = time.perf_counter()
        steps.append(t1 - t0)
        guards.append(t2 - t1)
        walks.append(t3 - t2)
    s, g, w = np.median(steps), np.median(guards), np.median(walks)
    n = len(step.last.fresh)
    checks = sum(getattr(getter, "size", 1) for getter, _ in step.last.guards)
    print(f"{name:<34} {n:>4} tensors {checks:>4} guards  step {s * 1e3:8.3f} ms  guards {g * 1e6:6.1f} us  "
          f"walk {w * 1e6:6.1f} us  share {(g + w) / s:6.2%}")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="5 rounds instead of 30")
    rounds = 5 if parser.parse_args(argv).quick else 30
    measure("MLP 64-64-64-10, batch 32", *mlp((64, 64, 64, 10), 32), rounds)
    measure("MLP 784-1024-1024-10, batch 256", *mlp((784, 1024, 1024, 10), 256), rounds)
    measure("GPT 2 layers, width 64, batch 16", *gpt(), rounds)


if __name__ == "__main__":
    main()
