"""Look at what tracegrad builds: the traced IR, the Gradient pass's `main_adjoint`, and the text round trip.

    python -m examples.inspect_ir            # the Relax docs' seed example, then a 2-layer MLP with its loss
    python -m examples.inspect_ir --raw      # also the adjoint as the pass emits it, before clean-up

Every module prints as TVMScript in the style of the Apache TVM Relax `Gradient` documentation, and
`ir.parse(str(mod))` gives back a structurally equal module. It takes well under a second and has no
loop to show progress for; each module is printed (and flushed) as soon as it is built.
"""
from __future__ import annotations

import argparse
import functools

import numpy as np

import autodiff
import ir
import nn
import tracer
from nn import functional as F

log = functools.partial(print, flush=True)  # each module is on screen (or in the file) as soon as it is built


def differentiate(title: str, mod: ir.IRModule, raw: bool) -> ir.IRModule:
    """Print `mod`, run Gradient("main") and the clean-up passes, print the result and check the round trip."""
    log(f"# ---- {title}: traced\n{mod}")
    adjoint = autodiff.Gradient("main")(mod)
    if raw:
        log(f"# ---- {title}: after autodiff.Gradient('main'), before clean-up\n{adjoint}")
    adjoint = ir.transform.cleanup()(adjoint)
    ir.verify(adjoint)
    log(f"# ---- {title}: after autodiff.Gradient('main') and ir.transform.cleanup()\n{adjoint}")
    same = ir.structural_equal(ir.parse(str(adjoint)), adjoint)
    log(f"# ir.parse(str(mod)) is structurally equal to mod: {same}\n")
    if not same:
        raise SystemExit(f"{title}: the printed module did not parse back to an equal module")
    return adjoint


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description="Print traced IR, its Gradient adjoint, and check the text round trip.")
    p.add_argument("--raw", action="store_true", help="also print the adjoint before the clean-up passes")
    args = p.parse_args(argv)

    # The seed example of the Relax Gradient docs: main(x, y) = sum(add(x, y)).
    def seed(x, y):
        return tracer.sum(x + y)

    mod = differentiate("seed example", tracer.trace(seed, tracer.spec((3, 3)), tracer.spec((3, 3))), args.raw)
    x = np.arange(9, dtype="float32").reshape(3, 3)
    value, (gx, gy) = ir.Executor(mod)["main_adjoint"](x, x)
    log(f"# main_adjoint(x, x) with x = arange(9): value {float(value)}, both gradients all ones: "
          f"{bool((gx == 1).all() and (gy == 1).all())}\n")

    # A 2-layer MLP and its loss; the weights it captures become parameters after x and y.
    nn.init.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))

    def loss(x, y):
        return F.cross_entropy(model(x), y)

    traced = tracer.trace(loss, tracer.spec((2, 4)), tracer.spec((2,), "int64"))
    differentiate("2-layer MLP with cross-entropy", traced, args.raw)
    names = [f"{v.name}: {v.type}" for v in traced["main"].params]
    log("# parameters of main (arguments, then captured weights):\n#   " + "\n#   ".join(names))


if __name__ == "__main__":
    main()
