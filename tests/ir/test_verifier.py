"""ir.verify accepts well-formed modules and names the function and binding of every defect."""
import pytest

import ir
import tracer
from ir import Binding, Block, Call, Function, IRModule, TensorType, TupleType, Var, const, make_call

T23 = TensorType((2, 3))


def _module(params, bindings, body, blocks=None, name="main"):
    blocks = [Block(bindings)] if blocks is None else blocks
    return IRModule({name: Function(params, blocks, body)})


def _check(mod, *patterns):
    with pytest.raises(ir.IRError) as info:
        ir.verify(mod)
    text = str(info.value)
    for p in patterns:
        assert p in text, text
    return text


def test_well_formed_modules_pass():
    mod = tracer.trace(lambda x, y: (tracer.exp(x) * y, x - 1.0), tracer.spec((2, 3)), tracer.spec((3,)))
    assert ir.verify(mod) is None
    x = Var("x", T23)
    t = Var("t", TupleType((T23, T23)))
    a = Var("a", T23)
    mod = _module([x], [Binding(t, ir.Tuple([x, x])), Binding(a, ir.TupleGetItem(t, 1))],
                  ir.Tuple([a, ir.TupleGetItem(t, 0), const(1.0)]))
    assert ir.verify(mod) is None


def test_use_before_definition():
    x = Var("x", T23)
    a, b = Var("a", T23), Var("b", T23)
    mod = _module([x], [Binding(b, make_call("exp", [a])), Binding(a, make_call("exp", [x]))], b)
    _check(mod, "function main", "binding 0 (b = R.exp(a))", "a is used but not defined")


def test_var_bound_twice_and_binding_a_parameter():
    x = Var("x", T23)
    a = Var("a", T23)
    _check(_module([x], [Binding(a, make_call("exp", [x])), Binding(a, make_call("log", [x]))], a),
           "binding 1 (a = R.log(x))", "a is bound twice")
    _check(_module([x], [Binding(x, make_call("exp", [x]))], x), "binding 0 (x = R.exp(x))", "bound twice")
    _check(_module([x, x], [], x, blocks=[Block([])]), "parameter x appears twice")


def test_binding_type_disagrees_with_inference():
    x = Var("x", T23)
    a = Var("a", TensorType((3, 2)))
    _check(_module([x], [Binding(a, make_call("exp", [x]))], a),
           "binding 0 (a = R.exp(x))", 'a is declared R.Tensor((3, 2), dtype="float32")')
    # a Call whose own type is wrong (built by hand, not with make_call)
    bad = Call("exp", (x,), {}, TensorType((2, 3), "float64"))
    b = Var("b", bad.type)
    _check(_module([x], [Binding(b, bad)], b), "the call carries type", "inference says")


def test_call_that_inference_rejects_and_unnormalized_attrs():
    x, y = Var("x", T23), Var("y", TensorType((4,)))
    bad = Call("add", (x, y), {}, T23)
    a = Var("a", T23)
    _check(_module([x, y], [Binding(a, bad)], a), "binding 0 (a = R.add(x, y))", "inference rejects the call")
    raw = Call("sum", (x,), {"axis": [1], "keepdims": False}, TensorType((2,)))
    s = Var("s", raw.type)
    _check(_module([x], [Binding(s, raw)], s), "not normalized")


def test_unknown_op():
    x = Var("x", T23)
    a = Var("a", T23)
    _check(_module([x], [Binding(a, Call("frobnicate", (x,), {}, T23))], a), "binding 0", "unknown op 'frobnicate'")


def test_tuple_and_item_types():
    x = Var("x", T23)
    tup = ir.Tuple([x, x])
    t = Var("t", TupleType((T23,)))
    _check(_module([x], [Binding(t, tup)], t), "t is declared R.Tuple(")
    tup.type = TupleType((T23, TensorType((1,))))
    t2 = Var("t", tup.type)
    _check(_module([x], [Binding(t2, tup)], t2), "tuple carries type")
    good = ir.Tuple([x, x])
    t3 = Var("t", good.type)
    item = ir.TupleGetItem(t3, 1)
    item.type = TensorType((7,))
    a = Var("a", item.type)
    _check(_module([x], [Binding(t3, good), Binding(a, item)], a), "binding 1", "field 1 has type")
    item2 = ir.TupleGetItem(t3, 1)
    item2.index = 5
    b = Var("b", item2.type)
    _check(_module([x], [Binding(t3, good), Binding(b, item2)], b), "index 5 is out of range")


def test_not_exactly_one_dataflow_block():
    x = Var("x", T23)
    a, b = Var("a", T23), Var("b", T23)
    ea, eb = Binding(a, make_call("exp", [x])), Binding(b, make_call("exp", [a]))
    _check(_module([x], [], x, blocks=[]), "function main: must have exactly one dataflow block, found 0")
    _check(_module([x], [], b, blocks=[Block([ea]), Block([eb])]), "found 2 ['dataflow', 'dataflow']")
    _check(_module([x], [], a, blocks=[Block([ea], is_dataflow=False)], name="f"), "function f", "['plain']")


def test_return_value_referencing_undefined_var():
    x = Var("x", T23)
    a, ghost = Var("a", T23), Var("ghost", T23)
    _check(_module([x], [Binding(a, make_call("exp", [x]))], ir.Tuple([a, ghost])),
           "function main, return value ((a, ghost))", "ghost is used but not defined")


def test_arguments_must_be_atomic():
    x = Var("x", T23)
    nested = Call("log", (make_call("exp", [x]),), {}, T23)
    a = Var("a", T23)
    _check(_module([x], [Binding(a, nested)], a), "R.exp(x) is not atomic")
    t = Var("t", TupleType((T23,)))
    item_arg = Call("exp", (ir.TupleGetItem(t, 0),), {}, T23)
    ir.verify(_module([x], [Binding(t, ir.Tuple([x])), Binding(a, item_arg)], a))  # a tuple field is an argument


def test_errors_name_the_function_among_several():
    x = Var("x", T23)
    a = Var("a", T23)
    good = Function([x], [Block([Binding(a, make_call("exp", [x]))])], a)
    y = Var("y", T23)
    bad = Function([y], [Block([Binding(Var("b", T23), make_call("exp", [a]))])], y)
    _check(IRModule({"main": good, "helper": bad}), "function helper, binding 0 (b = R.exp(a))", "a is used")


def test_rejects_non_modules():
    with pytest.raises(TypeError, match="IRModule"):
        ir.verify(ir.Tuple([]))
