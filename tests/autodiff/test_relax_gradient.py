"""The Gradient pass on Relax text: every argument form differentiated, and Relax's contract on errors."""
import numpy as np
import pytest

import autodiff
import ir

HEAD = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((3,), dtype="float32"), y: R.Tensor((3,), dtype="float32")) -> R.Tensor((), dtype="float32"):
        with R.dataflow():
'''
TAIL = '''            R.output(gv)
        return gv
'''


def _module(*lines):
    return ir.parse(HEAD + "".join(f"            {line}\n" for line in lines) + TAIL)


def _grads(mod, *args):
    ir.verify(mod)
    adjoint = autodiff.Gradient("main")(mod)
    ir.verify(adjoint)
    value, grads = ir.Executor(adjoint, check_types=True)["main_adjoint"](*args)
    assert np.allclose(value, ir.Executor(mod)["main"](*args))
    return grads


X = np.array([1.0, 2.0, 3.0], "float32")
Y = np.array([0.5, -1.0, 4.0], "float32")


@pytest.mark.parametrize("lines, dx, dy", [
    # a tuple field used inline as an argument, as TVMScript allows
    (["lv = (x, y)", "lv4 = R.multiply(lv[0], y)", "gv = R.sum(lv4, axis=None, keepdims=False)"], Y, X),
    (["lv = (x, y)", "lv4 = R.multiply(lv[0], lv[1])", "gv = R.sum(lv4, axis=None, keepdims=False)"], Y, X),
    # a field of a field
    (["lv = ((x, y), y)", "lv4 = R.multiply(lv[0][0], lv[1])", "gv = R.sum(lv4, axis=None, keepdims=False)"],
     Y, X),
    # a field inside an inline tuple argument
    (["lv = (x, y)", "lv4 = R.concat((lv[1], x), axis=0)", "gv = R.sum(lv4, axis=None, keepdims=False)"],
     np.ones(3), np.ones(3)),
    # the same field read twice accumulates
    (["lv = (x, y)", "lv4 = R.add(lv[0], lv[0])", "gv = R.sum(lv4, axis=None, keepdims=False)"],
     2 * np.ones(3), np.zeros(3)),
])
def test_a_tuple_field_argument_gets_its_gradient(lines, dx, dy):
    gx, gy = _grads(_module(*lines), X, Y)
    np.testing.assert_allclose(gx, dx)
    np.testing.assert_allclose(gy, dy)


def test_split_by_sections_differentiates_each_piece():
    mod = _module("lv = R.split(x, indices_or_sections=3, axis=0)", "lv1 = R.multiply(lv[2], y)",
                  "gv = R.sum(lv1, axis=None, keepdims=False)")
    gx, gy = _grads(mod, X, Y)
    np.testing.assert_allclose(gx, [0, 0, Y.sum()])
    np.testing.assert_allclose(gy, [X[2]] * 3)


def _fn(params, body, ret=""):
    lines = "".join(f"        {line}\n" for line in body)
    return ir.parse(f'''
@I.ir_module
class Module:
    @R.function
    def main({params}){ret}:
{lines}''')


F33 = 'R.Tensor((3, 3), "float32")'
TWO = f"a: {F33}, b: {F33}"


@pytest.mark.parametrize("params, body, kwargs, error, message", [
    (TWO, ["with R.dataflow():", "    lv = R.sum(a, axis=None, keepdims=False)", "    gv = R.tuple(lv, lv)",
           "    R.output(gv)", "return gv"], {}, ValueError, "must be a floating-point scalar, got R.Tuple"),
    (TWO, ["with R.dataflow():", "    gv = R.add(a, b)", "    R.output(gv)", "return gv"], {}, ValueError,
     "floating-point scalar, got R.Tensor\\(\\(3, 3\\)"),
    (TWO, ["with R.dataflow():", "    gv = R.const(1)", "    R.output(gv)", "return gv"], {}, ValueError,
     "floating-point scalar, got .*int32"),
    (TWO, ["with R.dataflow():", "    gv = R.sum(a, axis=None, keepdims=False)", "    R.output(gv)", "return gv"],
     {"target_index": 1}, ValueError, "target_index 1 is out of range; main returns 1"),
    (TWO, ["with R.dataflow():", "    g1 = R.sum(a, axis=None, keepdims=False)", "    g2 = R.sum(b, axis=None, "
           "keepdims=False)", "    R.output(g1, g2)", "return g1, g2"], {"target_index": 2}, ValueError,
     "target_index 2 is out of range; main returns 2"),
    (TWO, ["with R.dataflow():", "    gv = R.sum(a, axis=None, keepdims=False)", "    R.output(gv)",
           "return gv, (gv, gv)"], {"target_index": 1}, ValueError, "floating-point scalar, got R.Tuple"),
    (TWO, ["gv = R.sum(a, axis=None, keepdims=False)", "return gv"], {}, ValueError,
     "exactly one dataflow block, it has 1 block\\(s\\) \\(0 dataflow\\)"),
    (TWO, ["with R.dataflow():", "    gv = R.add(a, b)", "    R.output(gv)", "gv1 = R.sum(a, axis=None, keepdims=False)",
           "return gv1"], {}, ValueError, "exactly one dataflow block, it has 2"),
    ('a: R.Tensor((3, 3), "int64")', ["with R.dataflow():", "    lv = R.add(a, a)",
                                      "    gv = R.sum(lv, axis=None, keepdims=False)", "    R.output(gv)", "return gv"],
     {}, ValueError, "floating-point scalar, got .*int64"),
], ids=["tuple_var_target", "not_scalar", "not_float", "index_of_a_var", "index_of_a_tuple", "indexed_not_var",
        "no_dataflow", "two_blocks", "int_dtype"])
def test_the_gradient_pass_rejects_what_relax_rejects(params, body, kwargs, error, message):
    with pytest.raises(error, match=message):
        autodiff.Gradient("main", **kwargs)(_fn(params, body))


def test_require_grads_and_function_names_as_relax_checks_them():
    mod = _fn(TWO, ["with R.dataflow():", "    lv = R.multiply(a, b)", "    gv = R.sum(lv, axis=None, keepdims=False)",
                    "    R.output(gv)", "return gv"])
    other = _fn(TWO, ["with R.dataflow():", "    gv = R.sum(a, axis=None, keepdims=False)", "    R.output(gv)",
                      "return gv"])
    with pytest.raises(ValueError, match="no function named 'main1'"):
        autodiff.Gradient("main1")(mod)
    with pytest.raises(ValueError, match="is not a parameter or variable of main"):
        autodiff.Gradient("main", require_grads=other["main"].params[0])(mod)
    a = mod["main"].params[0]
    with pytest.raises(ValueError, match="lists a twice"):
        autodiff.Gradient("main", require_grads=[a, a])(mod)
    # accepted as Relax accepts it: a single var, and an intermediate var
    lv = mod["main"].bindings[0].var
    x = np.arange(9, dtype="float32").reshape(3, 3)
    for require, want in ((a, [x + 1]), ([lv, a], [np.ones((3, 3)), x + 1])):
        adjoint = autodiff.Gradient("main", require_grads=require)(mod)
        _, grads = ir.Executor(adjoint)["main_adjoint"](x, x + 1)
        for g, w in zip(grads, want, strict=True):
            np.testing.assert_allclose(g, w)


def _fill_module(line, v_dtype="float32"):
    return ir.parse(f'''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 3), dtype="float32"), v: R.Tensor((), dtype="{v_dtype}")) -> R.Tensor((), dtype="float32"):
        with R.dataflow():
            lv = {line}
            lv1 = R.multiply(lv, x)
            gv = R.sum(lv1, axis=None, keepdims=False)
            R.output(gv)
        return gv
''')


@pytest.mark.parametrize("line, v_dtype", [
    ("R.full_like(x, v)", "float32"), ('R.full_like(x, v, dtype="float32")', "float64"),
    ('R.full(R.shape([2, 3]), v, dtype="float32")', "float32"), ("R.full((2, 3), v, dtype=None)", "float32"),
])
def test_a_tensor_fill_value_gets_the_sum_of_its_gradient(line, v_dtype):
    mod = _fill_module(line, v_dtype)
    x = np.arange(6, dtype="float32").reshape(2, 3)
    v = np.asarray(1.5, v_dtype)
    value, (gx, gv) = _grads_of(mod, x, v)
    assert float(value) == 1.5 * 15
    np.testing.assert_allclose(gx, np.full((2, 3), 1.5))
    assert gv.dtype == v_dtype and float(gv) == 15.0


def _grads_of(mod, *args):
    ir.verify(mod)
    return ir.Executor(autodiff.Gradient("main")(mod), check_types=True)["main_adjoint"](*args)


@pytest.mark.parametrize("line, want_op, fill", [
    ('R.zeros_like(x, dtype="float32")', "zeros_like", 0.0), ("R.ones_like(x, dtype=None)", "ones_like", 1.0),
    ('R.ones_like(x, dtype="float64")', "ones", 1.0), ('R.full_like(x, R.const(2.5, "float32"))', "full_like", 2.5),
    ('R.full_like(x, 2.5, dtype="float64")', "full", 2.5), ('R.zeros_like(x, dtype="int32")', "zeros", 0),
])
def test_like_ops_with_a_dtype(line, want_op, fill):
    text = f'''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 3), dtype="float32")):
        with R.dataflow():
            gv = {line}
            R.output(gv)
        return gv
'''
    mod = ir.parse(text)
    call = mod["main"].bindings[0].value
    assert call.op == want_op
    out = ir.Executor(mod)["main"](np.zeros((2, 3), "float32"))
    dtype = line.split('dtype="')[1].split('"')[0] if 'dtype="' in line else "float32"
    assert out.dtype == dtype and out.shape == (2, 3) and (out == fill).all()


NLL = '''
@I.ir_module
class Module:
    @R.function
    def main(p: R.Tensor((5, 3), dtype="float64"), t: R.Tensor((5,), dtype="int64"), w: R.Tensor((3,), dtype="float64")):
        with R.dataflow():
            gv = R.nn.nll_loss(p, t, w, reduction="{reduction}", ignore_index=1)
            R.output(gv)
        return gv
'''


def _weighted_nll(p, t, w, reduction, ignore=1):
    keep = t != ignore
    wt = np.where(keep, w[np.where(keep, t, 0)], 0.0)
    per = np.where(keep, -p[np.arange(len(t)), np.where(keep, t, 0)], 0.0) * wt
    return {"none": per, "sum": per.sum(), "mean": per.sum() / wt.sum()}[reduction]


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_nll_loss_with_class_weights(reduction):
    mod = ir.parse(NLL.format(reduction=reduction))
    ir.verify(mod)
    rng = np.random.default_rng(3)
    p, t, w = rng.normal(size=(5, 3)), np.array([0, 2, 1, 2, 0]), np.array([0.5, 2.0, 3.0])
    got = ir.Executor(mod)["main"](p, t, w)
    np.testing.assert_allclose(got, _weighted_nll(p, t, w, reduction), rtol=1e-12)
    if reduction == "none":
        return
    (_, (gp, gw)) = _grads_of(mod, p, t, w)
    eps, fd = 1e-6, np.zeros_like(p)
    for i in np.ndindex(*p.shape):
        d = np.zeros_like(p)
        d[i] = eps
        fd[i] = (_weighted_nll(p + d, t, w, reduction) - _weighted_nll(p - d, t, w, reduction)) / (2 * eps)
    np.testing.assert_allclose(gp, fd, rtol=1e-6, atol=1e-9)
    torch = pytest.importorskip("torch")
    tp = torch.tensor(p, requires_grad=True)
    loss = torch.nn.functional.nll_loss(tp, torch.tensor(t), weight=torch.tensor(w), ignore_index=1,
                                        reduction=reduction)
    loss.backward()
    np.testing.assert_allclose(got, loss.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(gp, tp.grad.numpy(), rtol=1e-12)


def test_nll_loss_without_weights_is_the_op_itself():
    text = NLL.format(reduction="sum").replace("R.nn.nll_loss(p, t, w,", "R.nn.nll_loss(p, t, weights=None,")
    call = ir.parse(text)["main"].bindings[0].value
    assert call.op == "nn.nll_loss" and call.attrs == {"reduction": "sum", "ignore_index": 1}
