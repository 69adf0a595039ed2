"""Text as TVM's own printer writes it (attributes tracegrad fixes included) parses and runs."""
import numpy as np
import pytest

import ir

TVM_PRINTED = '''
# from tvm.script import ir as I
# from tvm.script import relax as R

@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 3, 8, 8), dtype="float32"), w: R.Tensor((4, 3, 3, 3), dtype="float32"), g: R.Tensor((16,), dtype="float32"), b: R.Tensor((16,), dtype="float32"), p: R.Tensor((16, 5), dtype="float32")) -> R.Tensor((), dtype="float32"):
        with R.dataflow():
            lv = R.nn.conv2d(x, w, strides=[1, 1], padding=[1, 1, 1, 1], dilation=[1, 1], groups=1, data_layout="NCHW", kernel_layout="OIHW", out_layout="NCHW", out_dtype="void")
            lv1 = R.nn.relu(lv)
            lv2 = R.nn.max_pool2d(lv1, pool_size=[2, 2], strides=[2, 2], dilation=[1, 1], padding=[0, 0, 0, 0], ceil_mode=False, count_include_pad=False, layout="NCHW", out_layout="NCHW")
            lv3 = R.nn.avg_pool2d(lv2, pool_size=[1, 1], strides=[1, 1], dilation=[1, 1], padding=[0, 0, 0, 0], ceil_mode=False, count_include_pad=True, layout="NCHW", out_layout="NCHW")
            lv4: R.Tensor((2, 64), dtype="float32") = R.reshape(lv3, R.shape([2, 64]))
            lv5 = R.reshape(lv4, R.shape([8, 16]))
            lv6 = R.nn.layer_norm(lv5, g, b, axes=[-1], epsilon=1.0000000000000001e-05, center=True, scale=True)
            lv7 = R.matmul(lv6, p, out_dtype="void")
            lv8 = R.nn.log_softmax(lv7, axis=-1)
            gv = R.sum(lv8, axis=None, keepdims=False)
            R.output(gv)
        return gv
'''


def test_tvm_printed_module_parses_verifies_and_runs():
    mod = ir.parse(TVM_PRINTED)
    ir.verify(mod)
    assert ir.structural_equal(ir.parse(str(mod)), mod)
    rng = np.random.default_rng(0)
    args = [rng.normal(size=p.type.shape).astype("float32") for p in mod["main"].params]
    out = ir.Executor(mod, check_types=True)["main"](*args)
    assert out.shape == () and np.isfinite(out)


@pytest.mark.parametrize("attr, value", [("data_layout", '"NHWC"'), ("out_dtype", '"float16"')])
def test_a_fixed_attribute_with_another_value_is_refused(attr, value):
    original = {"data_layout": '"NCHW"', "out_dtype": '"void"'}[attr]
    text = TVM_PRINTED.replace(f"{attr}={original}", f"{attr}={value}", 1)
    with pytest.raises(ir.IRError, match=f"line 10, column .*tracegrad supports {attr} in .* only, got"):
        ir.parse(text)


def test_avg_pool_that_excludes_padding_is_refused():
    text = TVM_PRINTED.replace("count_include_pad=True", "count_include_pad=False")
    with pytest.raises(ir.IRError, match="count_include_pad in \\[True\\] only"):
        ir.parse(text)
