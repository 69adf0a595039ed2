"""Text as TVM's own printer writes it (attributes tracegrad fixes included) parses and runs."""
import numpy as np
import pytest

import ir
from tests.nn import references as ref

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
    logp = _tvm_printed_in_numpy(*args)
    assert out.shape == () and out.dtype == np.float32
    np.testing.assert_allclose(out, logp.sum(), rtol=1e-5)
    # every output value, not only their sum: the same text returning lv8
    per_row = TVM_PRINTED.replace('-> R.Tensor((), dtype="float32")', '-> R.Tensor((8, 5), dtype="float32")')
    per_row = per_row.replace("R.output(gv)\n        return gv", "R.output(lv8)\n        return lv8")
    got = ir.Executor(ir.parse(per_row))["main"](*args)
    assert got.shape == (8, 5) and got.dtype == np.float32
    np.testing.assert_allclose(got, logp, rtol=1e-5, atol=1e-5)


def _tvm_printed_in_numpy(x, w, g, b, p):
    """TVM_PRINTED's log-probabilities (8, 5), in float64 loops (tests/nn/references.py)."""
    x, w, g, b, p = (a.astype(np.float64) for a in (x, w, g, b, p))
    h = np.maximum(ref.conv2d(x, w, padding=(1, 1)), 0)
    h = ref.pool2d(h, (2, 2), (2, 2), (0, 0), "max")  # the 1x1 average pool after it is the identity
    h = ref.layer_norm(h.reshape(8, 16), g, b) @ p
    return h - np.log(np.exp(h - h.max(-1, keepdims=True)).sum(-1, keepdims=True)) - h.max(-1, keepdims=True)


@pytest.mark.parametrize("attr, value", [("data_layout", '"NHWC"'), ("out_dtype", '"float16"')])
def test_a_fixed_attribute_with_another_value_is_refused(attr, value):
    original = {"data_layout": '"NCHW"', "out_dtype": '"void"'}[attr]
    text = TVM_PRINTED.replace(f"{attr}={original}", f"{attr}={value}", 1)
    with pytest.raises(ir.IRError, match=f"line 10, column .*tracegrad supports {attr} in .* only, got"):
        ir.parse(text)


POOL = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 3, 7, 7), dtype="float32")) -> R.Tensor({shape}, dtype="float32"):
        with R.dataflow():
            gv = R.nn.{kind}_pool2d(x, pool_size=[2, 2], strides=[2, 2], dilation=[1, 1], padding={padding}, ceil_mode={ceil_mode}, count_include_pad={count_include_pad}, layout="NCHW", out_layout=None)
            R.output(gv)
        return gv
'''


@pytest.mark.parametrize("kind, ceil_mode, count_include_pad, pad", [
    ("avg", True, False, 0), ("avg", True, True, 0), ("avg", False, False, 1), ("max", True, False, 0),
    ("max", False, False, 1),
])
def test_pooling_forms_relax_prints_agree_with_torch(kind, ceil_mode, count_include_pad, pad):
    size = (7 + 2 * pad - 2 + ceil_mode) // 2 + 1
    mod = ir.parse(POOL.format(kind=kind, ceil_mode=ceil_mode, count_include_pad=count_include_pad,
                               padding=[pad] * 4, shape=(2, 3, size, size)))
    x = np.random.default_rng(1).normal(size=(2, 3, 7, 7)).astype("float32")
    y = ir.Executor(mod)["main"](x)
    torch = pytest.importorskip("torch")
    fn = torch.nn.functional.avg_pool2d if kind == "avg" else torch.nn.functional.max_pool2d
    extra = {"count_include_pad": count_include_pad} if kind == "avg" else {}
    want = fn(torch.from_numpy(x), 2, 2, pad, ceil_mode=ceil_mode, **extra).numpy()
    np.testing.assert_allclose(y, want, rtol=1e-6, atol=1e-6)


def test_a_last_window_starting_in_the_padding_is_dropped():
    # TVM 0.27's Relax shape rule, as PyTorch's: 7 + 2 padded, window 2, stride 2, ceil_mode gives 4 windows, not 5
    text = POOL.format(kind="avg", ceil_mode=True, count_include_pad=True, padding=[1, 1, 1, 1], shape=(2, 3, 4, 4))
    x = np.random.default_rng(2).normal(size=(2, 3, 7, 7)).astype("float32")
    y = ir.Executor(ir.parse(text))["main"](x)
    assert y.shape == (2, 3, 4, 4)
    np.testing.assert_allclose(y[:, :, 3, 3], x[:, :, 5:, 5:].mean(axis=(2, 3)), rtol=1e-6)  # the last: input only
    np.testing.assert_allclose(y[:, :, 0, 0], x[:, :, 0, 0] / 4, rtol=1e-6)  # the first: 3 padding taps counted
    with pytest.raises(ir.IRError, match=r"the returned value has type R.Tensor\(\(2, 3, 4, 4\)"):
        ir.parse(POOL.format(kind="avg", ceil_mode=True, count_include_pad=True, padding=[1, 1, 1, 1],
                             shape=(2, 3, 5, 5)))
