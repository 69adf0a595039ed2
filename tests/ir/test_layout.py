"""LayoutLowering: transposes fold into matmuls; every op case computes the same with the pass on and off."""
import numpy as np
import pytest

import autodiff
import ir
import nn
import tracer
from autodiff import Gradient
from ir.transform import CommonSubexpressionElimination, DeadCodeElimination, LayoutLowering, Sequential, Simplify
from tests.cases import all_cases

CASES = [c for c in all_cases() if c.grad]


def _without_layout(mod):
    return Sequential([Simplify(), CommonSubexpressionElimination(), Simplify(), DeadCodeElimination()])(mod)


def _ops(fn):
    return [bd.value.op for bd in fn.bindings if isinstance(bd.value, ir.nodes.Call)]


def _same(a, b):
    if isinstance(a, tuple):
        assert isinstance(b, tuple) and len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            _same(x, y)
        return
    assert a.shape == b.shape and a.dtype == b.dtype
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_op_case_same_with_and_without_layout(case):
    mod = tracer.trace(lambda *xs: case.fn(*xs, **case.kwargs), *case.inputs)
    body = mod["main"].body
    if not (isinstance(body.type, ir.TensorType) and body.type.is_float):
        pytest.skip("the gradient needs a single floating result")
    scalar = tracer.trace(lambda *xs: (case.fn(*xs, **case.kwargs) * 1.5).sum(), *case.inputs)
    grad = Gradient("main", require_grads=[p for p in scalar["main"].params if p.type.is_float])(scalar)
    on, off = ir.transform.cleanup()(grad), _without_layout(grad)
    ir.verify(on)
    _same(ir.Executor(on, check_types=True)["main_adjoint"](*case.inputs),
          ir.Executor(off, check_types=True)["main_adjoint"](*case.inputs))


def test_transpose_of_matmul_becomes_matmul_of_transposes():
    mod = tracer.trace(lambda a, b: tracer.permute_dims(a @ b, (1, 0)), tracer.spec((2, 3)), tracer.spec((3, 4)))
    out = Sequential([LayoutLowering(), Simplify(), DeadCodeElimination()])(mod)
    assert _ops(out["main"]) == ["permute_dims", "permute_dims", "matmul"]
    a, b = np.arange(6, dtype="float32").reshape(2, 3), np.arange(12, dtype="float32").reshape(3, 4)
    got = ir.Executor(out)["main"](a, b)
    np.testing.assert_array_equal(got, (a @ b).T)
    assert got.flags.c_contiguous


def test_transposes_cancel_and_batched():
    # (a.T @ b).T = b.T @ a, batched with a broadcast batch dimension
    f = lambda a, b: tracer.permute_dims(tracer.permute_dims(a, (0, 2, 1)) @ b, (0, 2, 1))  # noqa: E731
    mod = tracer.trace(f, tracer.spec((5, 3, 2)), tracer.spec((1, 3, 4)))
    out = Sequential([LayoutLowering(), Simplify(), DeadCodeElimination()])(mod)
    assert _ops(out["main"]) == ["permute_dims", "matmul"]
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((5, 3, 2)).astype("float32"), rng.standard_normal((1, 3, 4)).astype("float32")
    got = ir.Executor(out)["main"](a, b)
    np.testing.assert_allclose(got, np.swapaxes(np.swapaxes(a, 1, 2) @ b, 1, 2), rtol=1e-6)
    assert got.flags.c_contiguous


def test_matmul_with_another_use_is_kept():
    f = lambda a, b: tracer.permute_dims(a @ b, (1, 0)).sum() + (a @ b).sum()  # noqa: E731
    mod = ir.transform.CommonSubexpressionElimination()(tracer.trace(f, tracer.spec((2, 3)), tracer.spec((3, 4))))
    assert _ops(LayoutLowering()(mod)["main"]).count("matmul") == 1
    assert LayoutLowering()(mod)["main"].bindings[0].value.op == "matmul"


def test_linear_weight_gradient_is_contiguous():
    layer = nn.Linear(6, 4)
    x = np.random.default_rng(0).standard_normal((8, 6)).astype("float32")
    step = autodiff.value_and_grad(lambda x: layer(x).sum(), wrt=[layer.weight])
    _, (g,) = step(x)
    assert g.numpy().flags.c_contiguous
    np.testing.assert_allclose(g.numpy(), np.ones((8, 4), "float32").T @ x, rtol=1e-5)


def test_transpose_of_a_folded_matmul_is_not_unwrapped():
    # t = (a @ b).T is folded into b.T @ a.T; (t @ c).T must read t, not the matmul folded away
    f = lambda a, b, c: tracer.permute_dims(tracer.permute_dims(a @ b, (1, 0)) @ c, (1, 0))  # noqa: E731
    specs = tracer.spec((2, 3)), tracer.spec((3, 4)), tracer.spec((2, 5))
    out = ir.transform.cleanup()(tracer.trace(f, *specs))
    ir.verify(out)
    rng = np.random.default_rng(1)
    a, b, c = (rng.standard_normal(s.shape).astype("float32") for s in specs)
    np.testing.assert_allclose(ir.Executor(out)["main"](a, b, c), ((a @ b).T @ c).T, rtol=1e-5)
