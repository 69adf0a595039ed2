"""ir.parse reads the printer's text and the TVMScript that Relax's own tests and printer write."""
import re

import numpy as np
import pytest

import ir
from ir import TensorType, TupleType
from ir.ops.registry import Attr, Op

# The Gradient pass's documented example (Relax PR #14542), as Relax writes it: un-annotated style
# elsewhere, `R.ones((), dtype=...)`, a shape given as a Python tuple, alias bindings, comments.
SEED = '''
# from tvm.script import ir as I
# from tvm.script import relax as R

@I.ir_module
class After:
    @R.function
    def main(
        x: R.Tensor((3, 3), dtype="float32"), y: R.Tensor((3, 3), dtype="float32")
    ) -> R.Tensor((), dtype="float32"):
        with R.dataflow():
            lv1: R.Tensor((3, 3), dtype="float32") = R.add(x, y)
            # use R.sum to reduce the tensor to a scalar
            lv2: R.Tensor((), dtype="float32") = R.sum(lv1, axis=None, keepdims=False)
            R.output(lv2)
        return lv2

    @R.function
    def main_adjoint(
        x: R.Tensor((3, 3), dtype="float32"), y: R.Tensor((3, 3), dtype="float32")
    ) -> R.Tuple(
        R.Tensor((), dtype="float32"),
        R.Tuple(R.Tensor((3, 3), dtype="float32"), R.Tensor((3, 3), dtype="float32")),
    ):
        with R.dataflow():
            # original bindings
            lv1: R.Tensor((3, 3), dtype="float32") = R.add(x, y)
            lv2: R.Tensor((), dtype="float32") = R.sum(lv1, axis=None, keepdims=False)
            # bindings w.r.t. intermediate variables
            lv2_adjoint: R.Tensor((), dtype="float32") = R.ones((), dtype="float32")
            lv1_adjoint: R.Tensor((3, 3), dtype="float32") = R.broadcast_to(
                lv2_adjoint, (3, 3)
            )
            # bindings w.r.t. parameters
            x_adjoint: R.Tensor((3, 3), dtype="float32") = lv1_adjoint
            y_adjoint: R.Tensor((3, 3), dtype="float32") = lv1_adjoint
            R.output(lv2, x_adjoint, y_adjoint)
        # return value: (orig_return_values, tuple(adjoints))
        return (lv2, (x_adjoint, y_adjoint))
'''


def _stand_in(name):
    """A creation op for parser tests, used only while the create family has not declared it."""
    def infer(op, types, shape, dtype):
        return TensorType(shape, dtype)

    return Op(name, (), (Attr("shape", "shape"), Attr("dtype", "dtype", "float32")), infer,
              lambda xp, shape, dtype: xp.ones(shape, dtype))


@pytest.fixture
def ones_op(monkeypatch):
    if "ones" not in ir.OPS:
        monkeypatch.setitem(ir.OPS, "ones", _stand_in("ones"))


@pytest.fixture
def filled_op(monkeypatch):
    monkeypatch.setitem(ir.OPS, "testing.filled", _stand_in("testing.filled"))


def test_seed_example_parses_verifies_and_runs(ones_op):
    mod = ir.parse(SEED)
    ir.verify(mod)
    assert list(mod) == ["main", "main_adjoint"]
    adj = mod["main_adjoint"]
    ops = [b.value.op if isinstance(b.value, ir.Call) else type(b.value).__name__ for b in adj.bindings]
    assert ops == ["add", "sum", "ones", "broadcast_to", "Var", "Var"]
    alias = adj.bindings[4]
    assert alias.var.name == "x_adjoint" and alias.value is adj.bindings[3].var
    assert adj.bindings[3].value.attrs["shape"] == (3, 3)
    assert adj.ret_type == TupleType((TensorType(()), TupleType((TensorType((3, 3)),) * 2)))
    x, y = np.ones((3, 3), "float32"), np.full((3, 3), 2.0, "float32")
    value, (gx, gy) = ir.Executor(mod)["main_adjoint"](x, y)
    assert float(value) == 27.0
    np.testing.assert_array_equal(gx, np.ones((3, 3), "float32"))
    np.testing.assert_array_equal(gy, np.ones((3, 3), "float32"))
    again = ir.parse(str(mod))
    assert ir.structural_equal(again, mod) and str(again) == str(mod)


RELAX_STYLE = '''
from tvm.script import ir as I
from tvm.script import relax as R

@I.ir_module(s_tir=True)
class Module:
    @R.function(pure=True)
    def main(x: R.Tensor((3, 3), "float32"), w: R.Tensor((3,))) -> R.Tensor((), dtype="float32"):
        R.func_attr({"global_symbol": "main"})
        with R.dataflow():
            x_scp = R.grad.start_checkpoint(x)
            lv1 = R.power(x_scp, R.const(3, "float32"))
            lv2: R.Tuple(R.Tensor((3, 3), dtype="float32"), R.Tensor((3, 3), dtype="float32")) = x, lv1
            lv3 = lv2
            lv4: R.Tensor([3, 3], dtype="float32") = lv3[1]
            lv4_1 = R.multiply(lv4, w)
            lv4_ecp = R.grad.end_checkpoint(lv4_1)
            gv = R.sum(lv4_ecp, None, False)
            R.output(gv)
        return gv
'''


def test_relax_style_without_annotations():
    mod = ir.parse(RELAX_STYLE)
    ir.verify(mod)
    fn = mod["main"]
    assert [p.type for p in fn.params] == [TensorType((3, 3)), TensorType((3,))]
    assert fn.attrs == {"global_symbol": "main"}
    by_name = {b.var.name: b for b in fn.bindings}
    assert by_name["lv1"].value.args[1].data.dtype == np.float32
    assert isinstance(by_name["lv2"].value, ir.Tuple)
    assert by_name["lv3"].value is by_name["lv2"].var
    assert by_name["lv4"].value.index == 1
    assert by_name["gv"].value.attrs == {"axis": None, "keepdims": False}
    x = np.full((3, 3), 2.0, "float32")
    got = ir.Executor(mod)["main"](x, np.ones(3, "float32"))
    assert float(got) == 72.0


def test_positional_and_keyword_attributes_agree(filled_op):
    def text(call):
        return f'''
@R.function
def main(x: R.Tensor((2, 3), dtype="float32")):
    with R.dataflow():
        gv = {call}
        R.output(gv)
    return gv
'''
    variants = {
        "sum": ["R.sum(x, [1], True)", "R.sum(x, axis=[1], keepdims=True)", "R.sum(x=x, keepdims=True, axis=1)"],
        "reshape": ["R.reshape(x, R.shape([3, 2]))", "R.reshape(x, (3, 2))", "R.reshape(x, shape=[3, 2])"],
        "filled": ['R.testing.filled((2, 3), "float32")', 'R.testing.filled(R.shape([2, 3]), dtype="float32")',
                   "R.testing.filled(shape=(2, 3))"],
    }
    for calls in variants.values():
        mods = [ir.parse(text(c)) for c in calls]
        for m in mods[1:]:
            assert ir.structural_equal(mods[0], m), calls


def test_scalar_shape_as_empty_tuple(filled_op):
    mod = ir.parse('''
@R.function
def f():
    with R.dataflow():
        a = R.testing.filled((), dtype="float64")
        b = R.testing.filled(R.shape([]), "float64")
        c = R.add(a, b)
        R.output(c)
    return c
''')
    assert mod["f"].ret_type == TensorType((), "float64")


def test_constants_default_dtypes_like_relax():
    mod = ir.parse('''
@R.function
def f(x: R.Tensor((2,), "int32"), y: R.Tensor((2,), "float32"), z: R.Tensor((2,), "bool")):
    with R.dataflow():
        a = R.add(x, R.const(1))
        b = R.add(y, R.const(0.5))
        c = R.add(y, R.const([1.0, -float("inf")], dtype="float32"))
        d = R.equal(z, R.const(True))
        e = R.add(y, R.const(float("nan"), "float32"))
        R.output(a, b, c, d, e)
    return (a, b, c, d, e)
''')
    consts = [b.value.args[1].data for b in mod["f"].bindings]
    assert [str(c.dtype) for c in consts] == ["int32", "float32", "float32", "bool", "float32"]
    assert consts[2][1] == -np.inf and np.isnan(consts[4])


def test_bindings_outside_dataflow_make_plain_blocks():
    mod = ir.parse('''
@I.ir_module
class Module:
    @R.function
    def plain(x: R.Tensor((2,), "float32")):
        y = R.exp(x)
        return y

    @R.function
    def after(x: R.Tensor((2,), "float32")):
        with R.dataflow():
            y = R.exp(x)
            R.output(y)
        z = R.log(y)
        return z

    @R.function
    def two(x: R.Tensor((2,), "float32")):
        with R.dataflow():
            y = R.exp(x)
            R.output(y)
        with R.dataflow():
            z = R.log(y)
            R.output(z)
        return z
''')
    kinds = {name: [b.is_dataflow for b in fn.blocks] for name, fn in mod.items()}
    assert kinds == {"plain": [False], "after": [True, False], "two": [True, True]}
    for name in mod:
        with pytest.raises(ir.IRError, match=f"function {name}: must have exactly one dataflow block"):
            ir.verify(ir.IRModule({name: mod[name]}))
    assert str(ir.parse(str(mod))) == str(mod)


def test_rebinding_a_name_shadows_it():
    mod = ir.parse('''
@R.function
def main(x: R.Tensor((2,), "float32")):
    with R.dataflow():
        x = R.exp(x)
        x = R.log(x)
        R.output(x)
    return x
''')
    ir.verify(mod)
    fn = mod["main"]
    assert fn.bindings[1].value.args[0] is fn.bindings[0].var
    assert fn.bindings[0].value.args[0] is fn.params[0]
    assert "x1: R.Tensor" in str(mod) and "x2: R.Tensor" in str(mod)


def test_indented_text_and_docstrings():
    text = '''
        @R.function
        def main(x: R.Tensor((2,), "float32")):
            """A docstring is ignored."""
            with R.dataflow():
                y = R.nn.softmax(x, axis=0)
                R.output(y)
            return y
    '''
    assert ir.parse(text)["main"].bindings[0].value.op == "nn.softmax"
    with pytest.raises(ir.IRError, match=r"line 6, column 21: unknown op 'R.nn.softmx'"):
        ir.parse(text.replace("softmax", "softmx"))


FN = '''@R.function
def main(x: R.Tensor((2, 3), dtype="float32"), y: R.Tensor((3,), dtype="float32")):
    with R.dataflow():
        lv = {value}
        R.output(lv)
    return lv
'''


@pytest.mark.parametrize("value, where, message", [
    ("R.frobnicate(x)", (4, 14), "unknown op 'R.frobnicate'"),
    ("R.add(x, z)", (4, 23), "undefined variable 'z'"),
    ("R.add(x, R.exp(y))", (4, 23), "nested call R.exp"),
    ("R.add(x)", (4, 14), r"R.add expects 2 tensor argument\(s\)"),
    ("R.add(x, y, x)", (4, 14), "R.add takes 2 tensor argument"),
    ("R.sum(x, axes=[0])", (4, 28), "R.sum has no argument or attribute 'axes'"),
    ("R.sum(x, axis=y)", (4, 28), "expected a literal"),
    ("R.sum(x, axis=0, axis=1)", (4, 36), "attribute axis given twice"),
    ("R.sum(x, 0, axis=1)", (4, 31), "attribute axis given twice"),
    ("R.add(x, R.const([[1.0], [2.0, 3.0]]))", (4, 23), "R.const: cannot make a constant"),
    ('R.add(x, R.const(1.0, "complex64"))', (4, 23), "unsupported dtype 'complex64'"),
    ("R.matmul(y, x)", (4, 14), "matmul"),
    ("R.add(x, metadata[\"relax.expr.Constant\"][0])", (4, 23), "print the module with mod.script\\(show_meta=True\\)"),
    ("y[0]", (4, 14), "not a tuple"),
    ("(x, y)[x]", (4, 21), "tuple index must be an integer"),
    ("(x, y)[2]", (4, 14), "index 2 out of range"),
    ("R.exp(x) +", None, "invalid syntax"),
    ("R.astype(x, dtype=3)", (4, 14), "astype: attribute dtype"),
])
def test_errors_name_line_column_and_cause(value, where, message):
    with pytest.raises(ir.IRError) as info:
        ir.parse(FN.format(value=value))
    text = str(info.value)
    assert re.search(message, text), text
    loc = re.match(r"line (\d+), column (\d+): ", text)
    assert loc, text
    if where:
        assert (int(loc[1]), int(loc[2])) == where, text


@pytest.mark.parametrize("text, message", [
    ('@R.function\ndef main(x: R.Tensor((2,), "float32")):\n    with R.dataflow():\n'
     '        lv: R.Tensor((3,), dtype="float32") = R.exp(x)\n        R.output(lv)\n    return lv\n',
     r'line 4, column 9: binding lv: annotation says R.Tensor\(\(3,\), dtype="float32"\), '
     r'inference says R.Tensor\(\(2,\), dtype="float32"\)'),
    ('@R.function\ndef main(x: R.Tensor((2,), "float32")) -> R.Tensor((2,), "int32"):\n    return x\n',
     "line 2, column 43: function main: return annotation says"),
    ('@R.function\ndef main(x):\n    return x\n', "line 2, column 10: parameter x needs a type annotation"),
    ('@R.function\ndef main(x: R.Tensor(dtype="float32", ndim=2)):\n    return x\n',
     "line 2, column 13: R.Tensor needs a static shape"),
    ('@R.function\ndef main(x: R.Tensor((2,), "float32")):\n    return y\n',
     "line 3, column 12: undefined variable 'y'"),
    ('@R.function\ndef main(x: R.Tensor((2,), "float32")):\n    y = R.exp(x)\n', "function main has no return"),
    ('@R.function\ndef main(x: R.Tensor((2,), "float32")):\n    return x\n    y = R.exp(x)\n',
     "line 4, column 5: code after return"),
    ('@R.function\ndef main(x: R.Tensor((2,), "float32")):\n    with R.dataflow():\n        R.output(x)\n'
     '        y = R.exp(x)\n    return x\n', "line 5, column 9: R.output.* must be the last statement"),
    ('@R.function\ndef main(x: R.Tensor((2,), "float32")):\n    with open("f"):\n        pass\n    return x\n',
     "line 3, column 5: expected `with R.dataflow\\(\\):`"),
    ('@R.function\ndef main(x: R.Tensor((2,), "float32")):\n    a, b = x, x\n    return x\n',
     "line 3, column 5: expected a variable name"),
    ('@R.function\ndef main(x: R.Tensor((2,), "float32"), x: R.Tensor((2,), "float32")):\n    return x\n',
     "invalid syntax|appears twice"),
    ("class Module:\n    pass\n", "line 1, column 1: expected @I.ir_module on class Module"),
    ("def main():\n    pass\n", "line 1, column 1: expected @R.function on def main"),
    ("x = 1\n", "line 1, column 1: expected an `@I.ir_module` class"),
    ("# nothing here\n", "found none"),
    ('@R.function\ndef main(x: R.Tensor((2,), "float16x")):\n    return x\n', "unsupported dtype 'float16x'"),
    ('@R.function\ndef main(x: R.Tensor((2, -1), "float32")):\n    return x\n', "negative dimension"),
    ('@R.function\ndef main(x: R.Object):\n    return x\n', "expected a type R.Tensor"),
    ('@R.function\ndef f(x: R.Tensor((2,))):\n    return x\n@R.function\ndef f(x: R.Tensor((2,))):\n    return x\n',
     "line 5, column 1: function f defined twice"),
])
def test_structural_errors(text, message):
    with pytest.raises(ir.IRError, match=message):
        ir.parse(text)
