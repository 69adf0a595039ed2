"""ir.structural_equal: equal up to var names, and unequal for every other difference."""
import re

import pytest

import ir
from ir import Binding, Block, Function, IRModule, TensorType, Var, const, make_call

BASE = '''
@R.function
def main(x: R.Tensor((2, 3), dtype="float32"), y: R.Tensor((3,), dtype="float32")):
    with R.dataflow():
        lv = R.multiply(x, R.const(2.0, "float32"))
        lv1 = R.add(lv, y)
        lv2 = R.sum(lv1, axis=[1], keepdims=False)
        R.output(lv2)
    return lv2
'''


def test_renaming_every_var_keeps_equality():
    renamed = re.sub(r"\bx\b", "a", re.sub(r"\by\b", "b", re.sub(r"\blv", "h", BASE)))
    assert "def main(a:" in renamed and "h2 = R.sum(h1," in renamed
    assert ir.structural_equal(ir.parse(BASE), ir.parse(renamed))


@pytest.mark.parametrize("old, new", [
    ("R.add(lv, y)", "R.subtract(lv, y)"),                                  # different op
    ("axis=[1]", "axis=[0]"),                                               # different attr
    ("keepdims=False", "keepdims=True"),                                    # different attr, also type
    ('R.const(2.0, "float32")', 'R.const(3.0, "float32")'),                 # constant value
    ('R.const(2.0, "float32")', 'R.const([2.0, 2.0, 2.0], "float32")'),     # constant shape
    ('R.multiply(x, R.const(2.0, "float32"))', 'R.multiply(R.const(2.0, "float32"), x)'),  # swapped args
    ("R.add(lv, y)", "R.add(lv, lv)"),                                      # different wiring
    ("R.add(lv, y)", "R.add(x, y)"),                                        # different wiring
    ('y: R.Tensor((3,), dtype="float32")', 'y: R.Tensor((1, 3), dtype="float32")'),  # shape
])
def test_differences_are_seen(old, new):
    assert old in BASE
    assert not ir.structural_equal(ir.parse(BASE), ir.parse(BASE.replace(old, new)))


def test_dtype_difference_is_seen():
    f64 = BASE.replace('"float32"', '"float64"')
    assert not ir.structural_equal(ir.parse(BASE), ir.parse(f64))
    assert ir.structural_equal(ir.parse(f64), ir.parse(f64))


def test_swapped_parameters_are_seen():
    text = '''
@R.function
def main(x: R.Tensor((2,), "float32"), y: R.Tensor((2,), "float32")):
    with R.dataflow():
        lv = R.subtract(x, y)
        R.output(lv)
    return lv
'''
    assert not ir.structural_equal(ir.parse(text), ir.parse(text.replace("R.subtract(x, y)", "R.subtract(y, x)")))


HEAD = '@R.function\ndef main(x: R.Tensor((2,), "float32")):\n'
ONE_BLOCK = HEAD + """    with R.dataflow():
        a = R.exp(x)
        b = R.log(a)
        R.output(a, b)
    return (a, b)
"""
TWO_BLOCKS = HEAD + """    with R.dataflow():
        a = R.exp(x)
        R.output(a)
    with R.dataflow():
        b = R.log(a)
        R.output(b)
    return (a, b)
"""
PLAIN = HEAD + """    a = R.exp(x)
    b = R.log(a)
    return (a, b)
"""


@pytest.mark.parametrize("other", [TWO_BLOCKS, PLAIN, ONE_BLOCK.replace("return (a, b)", "return (b, a)"),
                                   ONE_BLOCK.replace("return (a, b)", "return (a, (b,))")])
def test_block_structure_and_return_differences(other):
    assert ir.structural_equal(ir.parse(other), ir.parse(other))
    assert not ir.structural_equal(ir.parse(ONE_BLOCK), ir.parse(other))


def test_modules_compare_function_names_and_each_function():
    mod = ir.parse(BASE)
    other = IRModule({"other": mod["main"]})
    assert not ir.structural_equal(mod, other)
    assert ir.structural_equal(mod, IRModule({"main": ir.parse(BASE)["main"]}))
    assert not ir.structural_equal(mod, mod.with_function("extra", mod["main"]))
    assert ir.structural_equal(mod["main"], ir.parse(BASE)["main"])


def test_exprs_nan_constants_and_mixed_kinds():
    x, y = Var("x", TensorType((2,))), Var("y", TensorType((2,)))
    assert ir.structural_equal(make_call("add", [x, x]), make_call("add", [y, y]))
    assert not ir.structural_equal(make_call("add", [x, x]), make_call("add", [x, y]))
    assert ir.structural_equal(const(float("nan")), const(float("nan")))
    assert not ir.structural_equal(const(1.0, "float32"), const(1.0, "float64"))
    assert not ir.structural_equal(const(1, "int32"), const(2, "int32"))
    assert not ir.structural_equal(x, Var("z", TensorType((2,), "float64")))
    assert not ir.structural_equal(make_call("exp", [x]), x)
    assert not ir.structural_equal(ir.parse(BASE), ir.parse(BASE)["main"])
    assert not ir.structural_equal(ir.Tuple([x, y]), ir.Tuple([x]))
    t = ir.Tuple([x, y])
    assert not ir.structural_equal(ir.TupleGetItem(t, 0), ir.TupleGetItem(t, 1))


def test_binding_var_types_and_attr_kinds():
    x = Var("x", TensorType((2,)))
    e = make_call("exp", [x])

    def fn(var_type):
        return Function([x], [Block([Binding(Var("a", var_type), e)])], x)

    assert ir.structural_equal(fn(e.type), fn(e.type))
    assert not ir.structural_equal(fn(e.type), fn(TensorType((2,), "float64")))
    a = make_call("nn.gelu", [x], {"approximate": "none"})
    b = make_call("nn.gelu", [x], {"approximate": "tanh"})
    assert not ir.structural_equal(a, b)
    assert ir.structural.attrs_equal({"k": float("nan")}, {"k": float("nan")})
    assert not ir.structural.attrs_equal({"k": True}, {"k": 1})
    assert not ir.structural.attrs_equal({"k": (1, 2)}, {"k": [1, 2]})
