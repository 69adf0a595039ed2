"""Text in the form TVM 0.27 prints it (written here, in TVM's printed style) parses with Relax's meaning."""
import json

import numpy as np
import pytest

import ir
from ir.metadata import dump_ndarray, load_ndarray


def _main(params, lines, ret='R.Tensor((), dtype="float32")', result="gv", prefix=""):
    body = "".join(f"            {line}\n" for line in lines)
    return f'''{prefix}# from tvm.script import ir as I
# from tvm.script import relax as R

@I.ir_module
class Module:
    @R.function
    def main({params}) -> {ret}:
        with R.dataflow():
{body}            R.output({result})
        return {result}
'''


XY = 'x: R.Tensor((2, 3), dtype="float32"), y: R.Tensor((3, 4), dtype="float32")'


def _run(mod, *args):
    ir.verify(mod)
    assert ir.structural_equal(ir.parse(str(mod)), mod)
    return ir.Executor(mod, check_types=True)["main"](*args)


A = np.arange(6, dtype="float32").reshape(2, 3) / 4
B = np.arange(12, dtype="float32").reshape(3, 4) / 8


@pytest.mark.parametrize("out_dtype", ["None", '"void"', '"float32"'])
def test_matmul_out_dtype_as_tvm_prints_it(out_dtype):
    mod = ir.parse(_main(XY, [f"lv: R.Tensor((2, 4), dtype=\"float32\") = R.matmul(x, y, out_dtype={out_dtype})",
                              "gv: R.Tensor((), dtype=\"float32\") = R.sum(lv, axis=None, keepdims=False)"]))
    np.testing.assert_allclose(_run(mod, A, B), (A @ B).sum(), rtol=1e-6)


def test_conv2d_out_dtype_none_and_a_converting_out_dtype_is_refused():
    params = 'x: R.Tensor((1, 1, 3, 3), dtype="float32"), w: R.Tensor((1, 1, 2, 2), dtype="float32")'
    conv = ("lv = R.nn.conv2d(x, w, strides=[1, 1], padding=[0, 0, 0, 0], dilation=[1, 1], groups=1, "
            'data_layout="NCHW", kernel_layout="OIHW", out_layout="NCHW", out_dtype={})')
    ok = ir.parse(_main(params, [conv.format("None"), "gv = R.sum(lv, axis=None, keepdims=False)"]))
    assert _run(ok, np.ones((1, 1, 3, 3), "float32"), np.ones((1, 1, 2, 2), "float32")) == 16
    with pytest.raises(ir.IRError, match=r"nn.conv2d: tracegrad supports out_dtype in .*'float32'.* got 'float16'"):
        ir.parse(_main(params, [conv.format('"float16"'), "gv = R.sum(lv, axis=None, keepdims=False)"]))


def test_operator_sugar_means_the_op():
    mod = ir.parse(_main('x: R.Tensor((2, 3), dtype="float32"), y: R.Tensor((2, 3), dtype="float32")', [
        "lv = x + y", "lv1 = lv * x", "lv2 = lv1 - y", "lv3 = lv2 / x", "lv4 = -lv3",
        'lv5 = lv4 + R.const(1.5, "float32")', "gv = R.sum(lv5, axis=None, keepdims=False)"]))
    ops = [b.value.op for b in mod["main"].bindings]
    assert ops == ["add", "multiply", "subtract", "divide", "negative", "add", "sum"]
    x, y = A + 1, A * 2
    np.testing.assert_allclose(_run(mod, x, y), (-(((x + y) * x - y) / x) + 1.5).sum(), rtol=1e-5)
    more = ir.parse(_main('x: R.Tensor((2, 3), dtype="float32"), y: R.Tensor((2, 3), dtype="float32")', [
        "lv = x // y", "lv1 = lv ** y", "gv = R.sum(lv1, axis=None, keepdims=False)"]))
    assert [b.value.op for b in more["main"].bindings] == ["floor_divide", "power", "sum"]
    np.testing.assert_allclose(_run(more, x, y + 1), ((x // (y + 1)) ** (y + 1)).sum(), rtol=1e-5)


@pytest.mark.parametrize("line, message", [
    ("lv = x + y * x", "nested expression `y \\* x` is not supported; bind it"),
    ("lv = x * 2.0", "a Python number is not a Relax value; write R.const"),
])
def test_sugar_that_cannot_be_one_op_is_refused_clearly(line, message):
    with pytest.raises(ir.IRError, match=f"line 9, column .*{message}"):
        ir.parse(_main('x: R.Tensor((2, 3), dtype="float32"), y: R.Tensor((2, 3), dtype="float32")',
                       [line, "gv = R.sum(lv, axis=None, keepdims=False)"]))


def test_a_shape_bound_to_a_variable_is_read_where_a_shape_goes():
    mod = ir.parse(_main(XY, ["s: R.Shape([3, 2]) = R.shape([3, 2])", "lv = R.reshape(x, s)",
                              "lv1 = R.broadcast_to(R.const(1.0, \"float32\"), s)", "lv2 = R.multiply(lv, lv1)",
                              "gv = R.sum(lv2, axis=None, keepdims=False)"]))
    reshape = mod["main"].bindings[0].value
    assert reshape.op == "reshape" and reshape.attrs["shape"] == (3, 2)
    np.testing.assert_allclose(_run(mod, A, B), A.sum(), rtol=1e-6)


@pytest.mark.parametrize("text, shape", [
    ('R.const(2.5, "float32")', ()), ('R.const([1, 2, 3], "int64")', (3,)),
    ('R.const([[1.0, 2.0], [3.0, 4.0]], "float64")', (2, 2)),
    ('R.const([[[1.0], [2.0]]], "float32")', (1, 2, 1)),
])
def test_constants_of_any_rank(text, shape):
    fn = ir.parse(f'''
@R.function
def main(x: R.Tensor((), dtype="float32")):
    with R.dataflow():
        gv = {text}
        R.output(gv)
    return gv
''')["main"]
    assert fn.bindings[0].value.data.shape == shape


def _metadata(*arrays, key="relax.expr.Constant"):
    """A metadata section in the shape TVM's printer gives it (an object graph in JSON)."""
    nodes = [{"type_key": ""}, {"type_key": "Map", "keys": [key], "data": [2]},
             {"type_key": "Array", "data": [3 + i for i in range(len(arrays))]}]
    nodes += [{"type_key": key, "attrs": {"data": str(i), "span": "0", "struct_info_": "0"}}
              for i in range(len(arrays))]
    graph = {"root": 1, "nodes": nodes, "b64ndarrays": [dump_ndarray(a) for a in arrays],
             "attrs": {"tvm_version": "0.27.0"}}
    return 'metadata = tvm.ir.load_json("""' + json.dumps(graph, indent=2).replace('"', '\\"') + '""")\n'


def test_metadata_constants_read_from_the_section():
    w = np.linspace(-1, 1, 12, dtype="float32").reshape(3, 4)
    b = np.arange(4, dtype="float64")
    text = _main(XY, ['lv = R.add(y, metadata["relax.expr.Constant"][0])', "lv1 = R.matmul(x, lv, out_dtype=None)",
                      'lv2 = R.astype(lv1, dtype="float64")', 'lv3 = R.add(lv2, metadata["relax.expr.Constant"][1])',
                      'gv = R.sum(lv3, axis=None, keepdims=False)'],
                 ret='R.Tensor((), dtype="float64")', prefix=_metadata(w, b))
    mod = ir.parse(text)
    np.testing.assert_allclose(_run(mod, A, B), (A @ (B + w) + b).sum(), rtol=1e-5)


def test_metadata_constants_under_tvm_027s_generic_const_key():
    # TVM 0.27 prints `metadata["ir.GenericConst"][i]` where earlier versions print relax.expr.Constant
    w = np.linspace(-1, 1, 12, dtype="float32").reshape(3, 4)
    text = _main(XY, ['lv = R.add(y, metadata["ir.GenericConst"][0])', "gv = R.sum(lv, axis=None, keepdims=False)"],
                 prefix=_metadata(w, key="ir.GenericConst"))
    np.testing.assert_allclose(_run(ir.parse(text), A, B), (B + w).sum(), rtol=1e-5)
    with pytest.raises(ir.IRError, match="only relax.expr.Constant and ir.GenericConst entries"):
        ir.parse(text.replace('metadata["ir.GenericConst"]', 'metadata["relax.expr.Var"]'))


def test_metadata_without_its_section_says_to_print_with_show_meta():
    text = _main(XY, ['lv = R.add(y, metadata["relax.expr.Constant"][0])', "gv = R.sum(lv, axis=None, keepdims=False)"])
    text = text.replace("# from tvm.script import ir as I",
                        "# Metadata omitted. Use show_meta=True in script() method to show it.\n"
                        "# from tvm.script import ir as I")
    with pytest.raises(ir.IRError, match=r"line 10, column 27: .*mod.script\(show_meta=True\)"):
        ir.parse(text)
    with pytest.raises(ir.IRError, match="the section holds 1 constant"):
        ir.parse(_metadata(np.zeros((3, 4), "float32")) + text.replace("][0]", "][1]"))


def test_metadata_ndarray_format():
    # TVM's save format, little-endian: magic, reserved, device (1, 0), ndim, dtype code/bits/lanes, shape, bytes
    raw = ("P6G0lvBAXt0AAAAAAAAAAAEAAAAAAAAAAQAAAAAgAQADAAAAAAAAAAwAAAAAAAAAAQAAAAIAAAD9////")
    np.testing.assert_array_equal(load_ndarray(raw), np.array([1, 2, -3], "int32"))


@pytest.mark.parametrize("text, where, message", [
    (_main('x: R.Tensor(("n", 4), dtype="float32")', ["gv = R.sum(x, axis=None, keepdims=False)"]),
     "line 7, column 27", "symbolic dimension `'n'`; tracegrad specializes shapes"),
    (_main("x: R.Tensor((n, n), dtype=\"float32\")", ["gv = R.sum(x, axis=None, keepdims=False)"]),
     "line 7, column 27", "symbolic dimension `n`; tracegrad specializes shapes"),
    (_main('x: R.Tensor((2, 3), dtype="float32")', ["n = T.int64()", "gv = R.sum(x, axis=None, keepdims=False)"]),
     "line 9, column 17", "T.int64: TIR is not supported.*tracegrad specializes shapes"),
    (_main('x: R.Tensor((2, 3), dtype="float32")',
           ['lv = R.call_tir(cls.exp, (x,), out_sinfo=R.Tensor((2, 3), dtype="float32"))',
            "gv = R.sum(lv, axis=None, keepdims=False)"]),
     "line 9, column 18", "R.call_tir: TIR is not supported"),
], ids=["string_dim", "name_dim", "T_int64", "call_tir"])
def test_symbolic_shapes_and_tir_are_refused_clearly(text, where, message):
    with pytest.raises(ir.IRError, match=f"{where}: .*{message}"):
        ir.parse(text)


def test_a_prim_func_is_refused_by_name():
    text = _main('x: R.Tensor((2, 3), dtype="float32")', ["gv = R.sum(x, axis=None, keepdims=False)"])
    text += '''
    @T.prim_func(private=True)
    def exp(a: T.Buffer((T.int64(2),), "float32"), b: T.Buffer((T.int64(2),), "float32")):
        T.evaluate(0)
'''
    with pytest.raises(ir.IRError, match="T.prim_func exp: TIR functions are not supported"):
        ir.parse(text)


@pytest.mark.parametrize("attrs, index", [
    ("axes=[0], begin=[-1], end=[-6], strides=[-1]", np.s_[::-1]),
    ("axes=[0], begin=[1], end=[100], strides=[2]", np.s_[1::2]),
    ("axes=[-1], begin=[-2], end=[3], strides=None, assume_inbound=False", np.s_[..., -2:]),
    ("axes=[0, 1], begin=[3, 0], end=[-100, -1], strides=[-2, 1]", np.s_[3::-2, :-1]),
])
def test_strided_slice_reads_relax_begin_and_end(attrs, index):
    x = np.arange(15, dtype="float32").reshape(5, 3)
    want = x[index]
    text = f'''
@R.function
def main(x: R.Tensor((5, 3), dtype="float32")):
    with R.dataflow():
        gv = R.strided_slice(x, {attrs})
        R.output(gv)
    return gv
'''
    mod = ir.parse(text)
    np.testing.assert_array_equal(_run(mod, x), want)


def test_a_reversed_slice_prints_an_end_relax_reads_the_same():
    import tracer
    mod = tracer.trace(lambda x: x[::-2], np.zeros((5, 3), "float32"))
    # Relax counts a negative end from the back: -6 on an axis of 5 is "before index 0", as tracegrad's -1
    assert "R.strided_slice(x, axes=[0], begin=[4], end=[-6], strides=[-2])" in str(mod)
