"""Printing then parsing gives back the same module, and printing that gives back the same text."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ir
import tracer
from ir import Binding, Block, Builder, Function, IRModule, TensorType, TupleType, Var, const, make_call
from tests.cases import all_cases

CASES = all_cases()


def assert_round_trip(mod: IRModule) -> IRModule:
    text = str(mod)
    again = ir.parse(text)
    assert ir.structural_equal(again, mod), text
    assert str(again) == text
    return again


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_every_op_case_round_trips(case):
    mod = tracer.trace(lambda *xs: case.fn(*xs, **case.kwargs), *case.inputs)
    again = assert_round_trip(mod)
    ir.verify(again)


def _fn(params, bindings, body):
    return Function(params, [Block(bindings)], body)


def _bind(bindings, value, name="lv"):
    var = Var(name, value.type)
    bindings.append(Binding(var, value))
    return var


def test_tuples_items_and_nested_return():
    x, y = Var("x", TensorType((2, 3))), Var("y", TensorType((3,), "float64"))
    bs = []
    t = _bind(bs, ir.Tuple([x, y]), "t")
    first = _bind(bs, ir.TupleGetItem(t, 0), "first")
    single = _bind(bs, ir.Tuple([first]), "single")
    empty = _bind(bs, ir.Tuple([]), "empty")
    e = _bind(bs, make_call("exp", [first]))
    mod = IRModule({"main": _fn([x, y], bs, ir.Tuple([e, ir.Tuple([t, single, empty]), ir.TupleGetItem(t, 1)]))})
    again = assert_round_trip(mod)
    ir.verify(again)
    assert isinstance(again["main"].ret_type, TupleType)


def test_tuple_parameter_type():
    p = Var("p", TupleType((TensorType((2,)), TupleType((TensorType((), "int64"),)))))
    bs = []
    a = _bind(bs, ir.TupleGetItem(p, 0), "a")
    mod = IRModule({"main": _fn([p], bs, a)})
    assert_round_trip(mod)


@pytest.mark.parametrize("value, dtype", [
    (0.5, "float32"), (-3.25, "float64"), (0.1, "float16"), (7, "int64"), (-2, "int32"), (True, "bool"),
    (float("nan"), "float32"), (float("inf"), "float32"), (-float("inf"), "float64"), (-0.0, "float32"),
    (1e-30, "float32"), (3.4028234663852886e38, "float32"),
    ([[1.5, float("nan")], [-float("inf"), 2.0]], "float32"), ([[1, 2, 3]], "int32"), ([True, False], "bool"),
    ([[[0.25]]], "float64"),
])
def test_constants_round_trip_exactly(value, dtype):
    x = Var("x", TensorType((), dtype))
    c = const(value, dtype)
    bs = []
    y = _bind(bs, make_call("multiply" if dtype != "bool" else "equal", [x, c]))
    k = _bind(bs, c, "k")  # a constant bound on its own
    mod = IRModule({"main": _fn([x], bs, ir.Tuple([y, k]))})
    again = assert_round_trip(mod)
    data = again["main"].bindings[1].value.data
    assert data.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(data, np.asarray(value, dtype))
    assert np.signbit(data).tolist() == np.signbit(np.asarray(value, dtype)).tolist()


def test_several_functions_and_float_attrs():
    x = Var("x", TensorType((4, 5)))
    bs = []
    s = _bind(bs, make_call("nn.softmax", [x], {"axis": 0}))
    m = _bind(bs, make_call("sum", [s], {"axis": (0, 1), "keepdims": True}))
    first = _fn([x], bs, m)
    x2, w, b = Var("x", TensorType((4, 5))), Var("w", TensorType((5,))), Var("b", TensorType((5,)))
    bs2 = []
    g = _bind(bs2, make_call("nn.gelu", [x2], {"approximate": "tanh"}))
    n = _bind(bs2, make_call("nn.layer_norm", [g, w, b], {"axes": [-1], "epsilon": float("inf")}))
    second = _fn([x2, w, b], bs2, n)
    mod = IRModule({"first": first, "second": second, "third": _fn([Var("z", TensorType((1,)))], [], ir.Tuple([]))})
    again = assert_round_trip(mod)
    assert list(again) == ["first", "second", "third"]


def test_traced_checkpoint_and_captured_weight_round_trip():
    w = tracer.tensor(np.arange(6, dtype="float32").reshape(2, 3))

    def f(x):
        with tracer.checkpoint():
            h = tracer.tanh(x * w)
        return h * h

    mod = tracer.trace(f, tracer.spec((2, 3)))
    again = assert_round_trip(mod)
    ir.verify(again)
    ops = [b.value.op for b in again["main"].bindings if isinstance(b.value, ir.Call)]
    assert "grad.start_checkpoint" in ops and "grad.end_checkpoint" in ops


def test_parsed_module_runs_like_the_original():
    mod = tracer.trace(lambda x, y: (tracer.exp(x) * y - 1.5, tracer.tanh(x)), tracer.spec((2, 3)), tracer.spec((3,)))
    a, b = np.ones((2, 3), "float32"), np.arange(3, dtype="float32")
    want = ir.Executor(mod)["main"](a, b)
    got = ir.Executor(ir.parse(str(mod)))["main"](a, b)
    for g, e in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, e)


# Random programs: every shape below broadcasts with every other, so any pick of operands is valid.
_SHAPES = [(2, 3), (3,), (), (1, 3)]
_FLOATS = st.floats(allow_nan=True, allow_infinity=True, width=32)


@st.composite
def programs(draw):
    dtype = draw(st.sampled_from(["float32", "float64"]))
    params = [Var(f"p{i}", TensorType(draw(st.sampled_from(_SHAPES)), dtype))
              for i in range(draw(st.integers(1, 3)))]
    b = Builder()
    values = list(params)
    for _ in range(draw(st.integers(0, 8))):
        kind = draw(st.sampled_from(["unary", "binary", "const", "tuple"]))
        x = draw(st.sampled_from(values))
        if kind == "unary":
            values.append(b.call(draw(st.sampled_from(["exp", "tanh", "negative", "abs"])), x))
        elif kind == "binary":
            y = draw(st.sampled_from(values))
            values.append(b.call(draw(st.sampled_from(["add", "multiply", "maximum", "divide"])), x, y))
        elif kind == "const":
            shape = draw(st.sampled_from(_SHAPES))
            data = np.full(shape, draw(_FLOATS), dtype)
            values.append(b.call("add", x, ir.Constant(data)))
        else:
            t = b.tuple([x, draw(st.sampled_from(values))])
            values.append(b.get_item(t, draw(st.integers(0, 1))))
    body = ir.Tuple([values[-1], values[0]]) if draw(st.booleans()) else values[-1]
    return IRModule({"main": b.function(params, body)})


@settings(max_examples=60, deadline=None)
@given(programs())
def test_random_programs_round_trip(mod):
    ir.verify(mod)
    ir.verify(assert_round_trip(mod))
