"""ir.transform.matmul_merge: a sum of 2-D matmuls of one shape becomes one matmul of concatenated
operands (an RNN's weight gradient over its time steps); the adds are gone, the values agree with the
unmerged module in float64, and near misses are left alone."""
import numpy as np
import pytest

import ir
import tracer
from ir.transform import DeadCodeElimination, MergeMatmulSums, Simplify, optimize
from tests.ir.adjoints import adjoint, ops

STEPS = 5


def _rnn(x, h, w, u):
    for t in range(STEPS):  # w and u are read at every step: their gradients are sums over the steps
        h = tracer.tanh(h @ w + x[t] @ u)
    return (h * h).sum()


def _merged(mod):
    new = DeadCodeElimination()(Simplify()(MergeMatmulSums()(mod)))
    ir.verify(new)
    assert ir.structural_equal(ir.parse(str(new)), new)
    return new


def _adds_of(fn, shape) -> int:
    return sum(1 for b in fn.bindings if isinstance(b.value, ir.Call) and b.value.op == "add"
               and b.var.type.shape == shape)


def _assert_same(mod, new, fn_name, args):
    want = ir.Executor(mod)[fn_name](*args)
    got = ir.Executor(new, check_types=True)[fn_name](*args)
    for g, w in zip(_leaves(got), _leaves(want), strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)


def _leaves(value):
    return [x for v in value for x in _leaves(v)] if isinstance(value, tuple) else [value]


def _rnn_args(dtype="float64"):
    rng = np.random.default_rng(0)
    shapes = [(STEPS, 2, 8), (2, 16), (16, 16), (8, 16)]  # batch 2: short inner dimensions
    return [rng.standard_normal(s).astype(dtype) * 0.5 for s in shapes]


def test_an_rnn_weight_gradient_is_one_matmul_and_its_adds_are_gone():
    args = _rnn_args()
    mod = adjoint(_rnn, *args)
    before = mod["main_adjoint"]
    assert _adds_of(before, (16, 16)) == _adds_of(before, (8, 16)) == STEPS - 1  # w's and u's per-step terms
    new = _merged(mod)
    after = new["main_adjoint"]
    assert _adds_of(after, (16, 16)) == 0 and _adds_of(after, (8, 16)) == 0
    assert ops(after).count("matmul") == ops(before).count("matmul") - 2 * (STEPS - 1)  # the forward's kept
    _assert_same(mod, new, "main_adjoint", args)


def _rnn_hoisted(x, h, w, u):
    steps, batch, width = x.shape[0], x.shape[1], w.shape[1]
    gates = (x.reshape(steps * batch, x.shape[2]) @ u).reshape(steps, batch, width)  # as nn.LSTM: one product
    for g in tracer.split(gates, steps, axis=0):
        h = tracer.tanh(h @ w + g.reshape(batch, width))
    return (h * h).sum()


def test_the_stack_of_step_gradients_the_function_makes_anyway_is_shared():
    args = _rnn_args()
    mod = adjoint(_rnn_hoisted, *args)
    assert ops(mod["main_adjoint"]).count("concat") == 1  # split's gradient: the steps' gate gradients
    new = _merged(mod)
    after = new["main_adjoint"]
    assert _adds_of(after, (16, 16)) == 0
    assert ops(after).count("concat") == 2  # that one, now read by w's gradient too, and the hidden states
    _assert_same(mod, new, "main_adjoint", args)


def test_the_step_pipeline_runs_the_merge():
    args = _rnn_args()
    mod = adjoint(_rnn, *args)
    new = optimize()(mod)
    assert _adds_of(new["main_adjoint"], (16, 16)) == 0
    _assert_same(mod, new, "main_adjoint", args)


def test_float32_values_agree_up_to_rounding():
    args = _rnn_args("float32")
    mod = adjoint(_rnn, *args)
    want = ir.Executor(mod)["main_adjoint"](*args)[1]
    got = ir.Executor(_merged(mod))["main_adjoint"](*args)[1]
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def _forward(fn, *args):
    mod = tracer.trace(fn, *args)
    return mod, _merged(mod)


def test_both_forms_and_other_terms_of_one_sum():
    rng = np.random.default_rng(1)
    a = [rng.standard_normal((m, 8)) for m in (2, 1, 1)]  # transposed form: a_t.T @ b_t
    b = [rng.standard_normal((m, 9)) for m in (2, 1, 1)]
    x = [rng.standard_normal((8, m)) for m in (1, 2)]  # plain form: x_t @ y_t
    y = [rng.standard_normal((m, 9)) for m in (1, 2)]
    c = rng.standard_normal((8, 9))
    args = [*a, *b, *x, *y, c]

    def f(a0, a1, a2, b0, b1, b2, x0, x1, y0, y1, c):
        return a0.T @ b0 + x0 @ y0 + c + a1.T @ b1 + x1 @ y1 + a2.T @ b2

    mod, new = _forward(f, *args)
    assert ops(new["main"]).count("matmul") == 2 and ops(new["main"]).count("add") == 2
    _assert_same(mod, new, "main", args)


def _read_twice(p, q):
    return p + q + p.sum()  # p is read twice: not a term of the sum alone


@pytest.mark.parametrize("fn, shapes", [
    (lambda a, b, c: a @ b + c, [(8, 1), (1, 8), (8, 8)]),  # one matmul: nothing to merge
    (lambda a, b, c, d: _read_twice(a @ b, c @ d), [(8, 1), (1, 8), (8, 1), (1, 8)]),
    (lambda a, b, c, d: a @ b + c @ d, [(2, 8, 1), (2, 1, 8), (2, 8, 1), (2, 1, 8)]),  # batched products
    (lambda a, b, c, d: a @ b + c @ d, [(8, 1), (1, 8), (1, 1), (1, 8)]),  # broadcast add
    (lambda a, b, c, d: a @ b + c @ d, [(2, 50), (50, 3), (2, 50), (50, 3)]),  # the concats would cost more
])
def test_near_misses_are_left_alone(fn, shapes):
    rng = np.random.default_rng(2)
    args = [rng.standard_normal(s) for s in shapes]
    mod = tracer.trace(fn, *args)
    assert MergeMatmulSums()(mod)["main"] is mod["main"]


def test_a_sum_read_elsewhere_splits_the_tree_where_it_is_read():
    rng = np.random.default_rng(3)
    args = [rng.standard_normal(s) for s in [(8, 1), (1, 8), (8, 2), (2, 8), (8, 1), (1, 8)]]

    def f(a, b, c, d, e, g):
        partial = a @ b + c @ d  # also returned: merged on its own, then e @ g added
        return partial, partial + e @ g

    mod, new = _forward(f, *args)
    assert ops(new["main"]).count("matmul") == 2
    _assert_same(mod, new, "main", args)


def _matmul_cases():
    from tests.autodiff.test_vjp_cases import CASES
    return [c for c in CASES if "matmul" in c.ops]


@pytest.mark.parametrize("case", _matmul_cases(), ids=lambda c: c.name)
def test_the_case_table_matmul_rows_agree_through_the_step_pipeline(case):
    from tests.autodiff.test_vjp_cases import _as64, scalarized
    inputs = [_as64(a) for a in case.inputs]
    mod = adjoint(scalarized(case, inputs), *inputs)
    _assert_same(mod, optimize()(mod), "main_adjoint", inputs)
