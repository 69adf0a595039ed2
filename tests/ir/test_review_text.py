"""Review findings in the printer, parser and structural equality: odd constants and attributes must
survive parse(str(mod)), and structural_equal must not call different programs equal."""
import numpy as np
import pytest

import ir
from ir import Builder, Constant, TensorType, Var


def module_adding(const: Constant) -> ir.IRModule:
    x = Var("x", const.type)
    b = Builder()
    return ir.IRModule({"main": b.function([x], b.call("add", x, const))})


def the_constant(mod: ir.IRModule) -> np.ndarray:
    return mod["main"].bindings[0].value.args[1].data


@pytest.mark.parametrize("shape", [(0, 3), (2, 0, 2), (0,), (3, 0), (1, 0, 0)])
@pytest.mark.parametrize("dtype", ["float32", "int64", "bool"])
def test_zero_size_constants_round_trip_with_their_shape(shape, dtype):
    mod = module_adding(Constant(np.zeros(shape, dtype)))
    again = ir.parse(str(mod))
    assert the_constant(again).shape == shape and str(the_constant(again).dtype) == dtype
    assert ir.structural_equal(mod, again)


def test_zero_size_constant_text_carries_the_shape_only_when_needed():
    assert 'R.const([], "float32", shape=(0, 3))' in str(module_adding(Constant(np.zeros((0, 3), "float32"))))
    assert 'R.const([[], []], "float32")' in str(module_adding(Constant(np.zeros((2, 0), "float32"))))


def test_const_shape_must_fit_the_value():
    text = str(module_adding(Constant(np.zeros((0, 3), "float32")))).replace("shape=(0, 3)", "shape=(2, 3)")
    with pytest.raises(ir.IRError, match=r"R.const: .*shape \(2, 3\)"):
        ir.parse(text)


@pytest.mark.parametrize("value", ["None", '"1.5"', "[1.0, None]"])
def test_const_of_a_non_number_is_refused(value):
    text = str(module_adding(Constant(np.zeros((), "float32")))).replace("R.const(0.0,", f"R.const({value},")
    with pytest.raises(ir.IRError, match="R.const: "):
        ir.parse(text)  # np.asarray(None, "float32") is nan, "1.5" parses as a string


def test_negative_zero_differs_from_zero():
    pos, neg = (module_adding(Constant(np.array(v, "float32"))) for v in (0.0, -0.0))
    assert not ir.structural_equal(pos, neg)
    assert ir.structural_equal(neg, ir.parse(str(neg)))
    nan = module_adding(Constant(np.array([np.nan, 1.0], "float32")))
    assert ir.structural_equal(nan, ir.parse(str(nan)))


def test_negative_zero_attribute_differs_from_zero():
    full = [ir.make_call("full", [], dict(shape=(2,), fill_value=v)) for v in (0.0, -0.0)]
    assert not ir.structural_equal(full[0], full[1])


@pytest.mark.parametrize("fill, dtype", [(2**62 + 1, "int64"), (-0.0, "float32"), (float("-inf"), "float64"),
                                         (3, "float32"), (True, "bool")])
def test_full_fill_values_round_trip(fill, dtype):
    b = Builder()
    mod = ir.IRModule({"main": b.function([], b.call("full", shape=(2,), fill_value=fill, dtype=dtype))})
    again = ir.parse(str(mod))
    assert ir.structural_equal(mod, again)
    assert ir.Executor(again)["main"]().tolist() == ir.Executor(mod)["main"]().tolist()


@pytest.mark.parametrize("fill, dtype", [(float("nan"), "int32"), (1e10, "int32"), (2**63, "int64")])
def test_full_refuses_a_fill_value_the_dtype_cannot_hold(fill, dtype):
    with pytest.raises(ir.IRError, match=f"full: fill_value .* does not fit dtype {dtype}"):
        ir.make_call("full", [], dict(shape=(2,), fill_value=fill, dtype=dtype))


def test_func_attr_with_a_dict_splat_is_a_parse_error():
    text = str(module_adding(Constant(np.zeros((), "float32"))))
    text = text.replace("with R.dataflow():", "R.func_attr({**attrs})\n        with R.dataflow():")
    with pytest.raises(ir.IRError, match="R.func_attr"):
        ir.parse(text)


def test_syntax_error_without_a_line_still_reports_one():
    with pytest.raises(ir.IRError, match=r"^line 1, column \d+: invalid syntax"):
        ir.parse("x = 1\x00")


def test_param_of_a_non_type_is_refused_by_the_verifier():
    with pytest.raises(ir.IRError, match="parameter x has type 'float32', not an R.Tensor or R.Tuple"):
        ir.verify(ir.IRModule({"main": ir.Function([Var("x", "float32")], [ir.Block([])],
                                                   Constant(np.zeros(2, "float32")))}))
    t = ir.TupleType((TensorType((2,)), "bool"))
    with pytest.raises(ir.IRError, match="parameter x has type"):
        ir.verify(ir.IRModule({"main": ir.Function([Var("x", t)], [ir.Block([])], Constant(np.zeros(2)))}))


def test_malformed_bindings_and_constants_are_verifier_errors():
    x = Var("x", TensorType((2,)))
    with pytest.raises(ir.IRError, match="binding 0 .*not an ir.Binding"):
        ir.verify(ir.IRModule({"main": ir.Function([x], [ir.Block([1])], x)}))
    c = Constant(np.zeros(2, "float32"))
    c.data = [0.0, 0.0]
    with pytest.raises(ir.IRError, match="constant .* holds"):
        ir.verify(ir.IRModule({"main": ir.Function([x], [ir.Block([])], c)}))


def test_full_refuses_an_int_fill_value_beyond_int64():
    with pytest.raises(ir.IRError, match="does not fit dtype int64 .*write it as a float for a bool tensor"):
        ir.make_call("full", [], dict(shape=(2,), fill_value=2**70, dtype="bool"))
    assert ir.make_call("full", [], dict(shape=(2,), fill_value=2.0**70)).type == TensorType((2,))
