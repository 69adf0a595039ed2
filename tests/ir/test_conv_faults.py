"""The conv family's planned kernels allocate no large temporaries in a compiled step (what made the mnist step's
page faults on the plain NumPy path): counted with tracemalloc per kernel call, which is deterministic, unlike the
faults themselves (glibc's thresholds, transparent huge pages). And the planned work buffers give the same bits as
the kernels' own arrays."""
import gc
import tracemalloc

import numpy as np
import pytest

import autodiff
import tracer
from ir.runtime import conv_kernels, conv_specialize
from ir.runtime.executor import CompiledFunction
from tests.ir.test_maxpool_nan import kernels  # noqa: F401  (the fixture: NumPy's kernels, then numba's)

_CONV_FAMILY = ("nn.conv2d", "nn.conv2d_bias_relu", "grad.conv2d_input_backward", "grad.relu_conv2d_input_backward",
                "nn.max_pool2d", "grad.max_pool2d_backward", "grad.relu_max_pool2d_backward")


def _planned_input_backward(name, g, w, r, attrs, input_shape):
    """The builder's kernel and its scratch arrays, filled with NaN (what another instruction left there)."""
    from ir.types import TensorType
    types = [TensorType(g.shape, str(g.dtype)), TensorType(w.shape, str(w.dtype))]
    if r is not None:
        types.append(TensorType(r.shape, str(r.dtype)))
    fn = conv_specialize.BUILDERS[name](name, types, TensorType(input_shape, str(g.dtype)), **attrs,
                                        input_shape=input_shape)
    scratch = tuple(np.full(shape, np.nan, dtype) for shape, dtype in fn.scratch)
    return fn, scratch


@pytest.mark.parametrize("stride,pad", [(1, 0), (1, 1), (2, 0), (2, 1)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("relu", [False, True])
@pytest.mark.usefixtures("kernels")
def test_input_backward_into_work_buffers_keeps_its_bits(stride, pad, dtype, relu):
    rng = np.random.default_rng(0)
    n, c, o, h = 7, 5, 6, 11  # 7 samples: chunks of several sizes, the last one short
    input_shape = (n, c, h, h)
    ho = (h + 2 * pad - 3) // stride + 1
    g = rng.standard_normal((n, o, ho, ho)).astype(dtype)
    w = rng.standard_normal((o, c, 3, 3)).astype(dtype)
    r = np.maximum(rng.standard_normal(input_shape), 0).astype(dtype) if relu else None
    g.flat[:3] = np.nan, np.inf, -0.0
    attrs = dict(strides=(stride, stride), padding=(pad,) * 4, dilation=(1, 1), groups=1)
    name = "grad.relu_conv2d_input_backward" if relu else "grad.conv2d_input_backward"
    kernel = conv_kernels.relu_conv2d_input_backward if relu else conv_kernels.conv2d_input_backward
    ops = (g, w, r) if relu else (g, w)
    want = kernel(np, *ops, **attrs, input_shape=input_shape)
    fn, scratch = _planned_input_backward(name, g, w, r, attrs, input_shape)
    assert len(scratch) == 2
    for _ in range(2):  # twice: the widened g's zero columns written again over what the first call left
        got = fn(*ops, out=np.full(input_shape, np.nan, dtype), scratch=scratch)
        assert np.array_equal(got, want, equal_nan=True) and np.array_equal(np.signbit(got), np.signbit(want))
        for s in scratch:
            s.fill(np.nan)


def _mnist_step():
    import nn.functional as F
    import nn.torch as torch
    from benchmarks import workloads as W
    torch.manual_seed(1)
    model = W.mnist_net(torch)
    model.train()
    params = list(model.parameters())
    x, y = (tracer.tensor(a) for a in W._mnist_batch(64))
    older = {id(o) for o in gc.get_objects() if type(o) is CompiledFunction}
    vg = autodiff.value_and_grad(lambda x, y: F.nll_loss(model(x), y), wrt=params)
    for _ in range(3):  # the interpreter's call, then the generated function with its planned arrays
        vg(x, y)
    c, = [o for o in gc.get_objects() if type(o) is CompiledFunction and id(o) not in older
          and "grad.relu_max_pool2d_backward" in o.instr_ops]
    return vg, (x, y), c


@pytest.mark.usefixtures("kernels")
def test_mnist_step_conv_family_allocates_no_large_temporaries():
    """Each conv-family kernel of the compiled mnist step (batch 64) allocates under 512 KiB per call (L2-sized
    chunk buffers and its small weight matrices): before its planned buffers, the input gradient's col2im took
    1.75 MiB a call and the pool's finiteness test 576 KiB, freed each step and faulted in again at the next."""
    vg, args, c = _mnist_step()
    ns = c._fast[1].__globals__
    seen = {}

    def counted(name, fn):
        def run(*a, **k):
            before = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()
            result = fn(*a, **k)
            seen[name] = tracemalloc.get_traced_memory()[1] - before
            return result
        return run

    wrapped = {f"k{instr[4]}": c.instr_ops[i] for i, instr in enumerate(c.instrs)
               if c.instr_ops[i] in _CONV_FAMILY and i in c.storage}
    assert {"grad.relu_conv2d_input_backward", "grad.relu_max_pool2d_backward"} <= set(wrapped.values())
    saved = {k: ns[k] for k in wrapped}
    tracemalloc.start()
    try:
        for k, op in wrapped.items():
            ns[k] = counted(op, saved[k])
        vg(*args)
    finally:
        ns.update(saved)
        tracemalloc.stop()
    assert set(seen) == set(wrapped.values())
    big = {op: n for op, n in seen.items() if n >= 512 * 1024}
    assert not big, big
