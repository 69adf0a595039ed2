"""ir.transform.lower: weight gradients of batched matmuls become one 2-D matmul, gradients of slices
that tile an axis become a concat; same values, and near misses are left alone."""
import numpy as np
import pytest

import ir
import tracer
from ir.transform import BatchedWeightGradients, SliceGradientsToConcat, optimize
from tests.ir.adjoints import adjoint as _adjoint
from tests.ir.adjoints import ops as _ops


def _agree(mod, new, args, rtol=1e-5):
    want = ir.Executor(mod)["main_adjoint"](*args)
    got = ir.Executor(new, check_types=True)["main_adjoint"](*args)
    np.testing.assert_allclose(got[0], want[0], rtol=rtol)
    for g, w in zip(got[1], want[1], strict=True):
        np.testing.assert_allclose(g, w, rtol=rtol, atol=1e-5)
        assert g.flags.c_contiguous  # the weight's own layout, for the optimizer's update


def test_linear_on_a_batch_of_sequences_gets_one_matmul_per_weight_gradient():
    rng = np.random.default_rng(0)
    args = [rng.standard_normal((4, 6, 8)).astype("float32"), rng.standard_normal((5, 8)).astype("float32"),
            rng.standard_normal((3, 5)).astype("float32")]
    mod = _adjoint(lambda x, w1, w2: tracer.tanh(tracer.tanh(x @ w1.T) @ w2.T).sum(), *args)
    new = optimize()(mod)
    ir.verify(new)
    assert "collapse_sum_to" in _ops(mod["main_adjoint"])
    assert "collapse_sum_to" not in _ops(new["main_adjoint"])
    assert ir.structural_equal(ir.parse(str(new)), new)
    _agree(mod, new, args)


def test_broadcast_batches_and_other_targets_are_left_alone():
    rng = np.random.default_rng(1)
    # w is batched over one axis of x's two: its gradient sums only some batch axes
    args = [rng.standard_normal((2, 3, 4, 5)).astype("float32"), rng.standard_normal((3, 5, 2)).astype("float32")]
    mod = _adjoint(lambda x, w: (x @ w).sum(), *args)
    assert BatchedWeightGradients()(mod)["main_adjoint"] is mod["main_adjoint"]


def _qkv(x):
    q, k, v = x[0], x[1], x[2]
    return (q * k + tracer.tanh(v)).sum()


def test_the_gradients_of_q_k_v_slices_become_one_concat():
    x = np.random.default_rng(2).standard_normal((3, 4, 5)).astype("float32")
    mod = _adjoint(_qkv, x)
    new = SliceGradientsToConcat()(mod)
    ops = _ops(new["main_adjoint"])
    assert "concat" in ops and "grad.strided_slice_backward" not in _ops(ir.transform.DeadCodeElimination()(new)[
        "main_adjoint"])
    want = ir.Executor(mod)["main_adjoint"](x)
    got = ir.Executor(new, check_types=True)["main_adjoint"](x)
    np.testing.assert_array_equal(got[1][0], want[1][0])  # a concat of the slices: exactly the sum


@pytest.mark.parametrize("fn", [lambda x: (x[0] * x[1]).sum(),  # slices 0 and 1 of 3: no tiling
                                lambda x: (x[0:2].sum(axis=0) * x[1]).sum()])  # overlapping
def test_slices_that_do_not_tile_the_axis_are_left_alone(fn):
    x = np.random.default_rng(3).standard_normal((3, 4)).astype("float32")
    mod = _adjoint(fn, x)
    new = SliceGradientsToConcat()(mod)
    assert "concat" not in _ops(new["main_adjoint"])
    np.testing.assert_allclose(ir.Executor(new)["main_adjoint"](x)[1][0], ir.Executor(mod)["main_adjoint"](x)[1][0])
