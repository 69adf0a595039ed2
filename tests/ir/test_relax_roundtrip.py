"""The TVM half of the round-trip table (tests/ir/test_roundtrip.py checks that every op case printed by
tracegrad parses back equal). Where apache-tvm is installed (`pip install -e ".[tvm]"`, never needed in
CI), the same text parses in TVM, TVM's own printing of it parses back here, and TVM's Gradient pass
gives the numbers tracegrad's gives on the case's inputs."""
import numpy as np
import pytest

import autodiff
import ir
import tracer
from tests.cases import all_cases

CASES = all_cases()

# Ops tracegrad shares with Relax under the same name and meaning; the rest are tracegrad's own (its
# backward helpers, check_index, random ops, in-place updates) or differ (see docs/design.md).
SHARED = {
    "abs", "add", "argmax", "astype", "broadcast_to", "collapse_sum_to", "concat", "cos", "cumsum", "divide",
    "equal", "exp", "expand_dims", "floor_divide", "floor_mod", "full", "full_like", "greater", "greater_equal",
    "less", "less_equal", "log", "matmul", "max", "maximum", "mean", "min", "minimum", "multiply", "negative",
    "nn.avg_pool2d", "nn.conv2d", "nn.cross_entropy_with_logits", "nn.gelu", "nn.layer_norm", "nn.log_softmax",
    "nn.max_pool2d", "nn.relu", "nn.silu", "nn.softmax", "not_equal", "ones", "ones_like", "permute_dims",
    "power", "reshape", "rsqrt", "sigmoid", "sin", "split", "sqrt", "squeeze", "stack", "strided_slice",
    "subtract", "sum", "take", "tanh", "tril", "triu", "variance", "where", "zeros", "zeros_like",
}


def _loss_module(case):
    """The case's function with a scalar loss on top (the sum of each float output's square)."""
    def loss(*xs):
        out = case.fn(*xs, **case.kwargs)
        outs = out if isinstance(out, tuple | list) else (out,)
        floats = [o for o in outs if o.dtype.startswith("float")]
        total = (floats[0] * floats[0]).sum()
        for o in floats[1:]:
            total = total + (o * o).sum()
        return total
    return tracer.trace(loss, *case.inputs)


def _ops(mod):
    return {b.value.op for b in mod["main"].bindings if isinstance(b.value, ir.Call)}


def _tvm_cases():
    out = []
    for case in CASES:
        if not case.grad or not any(np.asarray(a).dtype.kind == "f" for a in case.inputs):
            continue
        out.append(case)
    return out


@pytest.mark.parametrize("case", _tvm_cases(), ids=[c.name for c in _tvm_cases()])
def test_tvm_reads_our_text_and_both_gradients_agree(case):
    tvm = pytest.importorskip("tvm")
    from tvm import relax

    try:
        mod = _loss_module(case)
    except (TypeError, ValueError, ir.IRError):
        pytest.skip("the case's outputs have no float loss")
    if not _ops(mod) <= SHARED:
        pytest.skip(f"uses tracegrad's own ops {sorted(_ops(mod) - SHARED)}")
    text = str(mod)
    tvm_mod = tvm.script.from_source(text)
    back = ir.parse(tvm_mod.script(show_meta=True))  # TVM's printing, read by tracegrad
    args = [np.asarray(a) for a in case.inputs]
    ours = ir.Executor(autodiff.Gradient("main")(back))["main_adjoint"](*args)
    floats = [p for p in tvm_mod["main"].params if "float" in str(p.struct_info.dtype)]
    adjoint = relax.transform.Gradient("main", require_grads=floats)(tvm_mod)
    build = getattr(tvm, "compile", None) or relax.build
    vm = relax.VirtualMachine(build(adjoint, target="llvm"), tvm.cpu())
    to_tvm = getattr(tvm.runtime, "tensor", None) or tvm.nd.array
    theirs = vm["main_adjoint"](*[to_tvm(a) for a in args])
    np.testing.assert_allclose(float(theirs[0].numpy()), float(ours[0]), rtol=1e-4, atol=1e-5)
    for got, want in zip(theirs[1], ours[1], strict=True):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-4, atol=1e-5)
