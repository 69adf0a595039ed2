"""The Gradient pass: its contract (Relax's), golden adjoint IR, and every error it promises."""
import numpy as np
import pytest

import ir
import tracer
from autodiff import Gradient
from ir import Builder, TensorType, TupleType, Var

SEED_ADJOINT = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((3, 3), dtype="float32"), y: R.Tensor((3, 3), dtype="float32")) -> R.Tensor((), dtype="float32"):
        with R.dataflow():
            lv: R.Tensor((3, 3), dtype="float32") = R.add(x, y)
            lv1: R.Tensor((), dtype="float32") = R.sum(lv, axis=None, keepdims=False)
            R.output(lv1)
        return lv1

    @R.function
    def main_adjoint(x: R.Tensor((3, 3), dtype="float32"), y: R.Tensor((3, 3), dtype="float32")) -> R.Tuple(R.Tensor((), dtype="float32"), R.Tuple(R.Tensor((3, 3), dtype="float32"), R.Tensor((3, 3), dtype="float32"))):
        with R.dataflow():
            lv: R.Tensor((3, 3), dtype="float32") = R.add(x, y)
            lv1: R.Tensor((), dtype="float32") = R.sum(lv, axis=None, keepdims=False)
            lv1_adjoint: R.Tensor((), dtype="float32") = R.ones(R.shape([]), dtype="float32")
            lv_adjoint: R.Tensor((3, 3), dtype="float32") = R.broadcast_to(lv1_adjoint, R.shape([3, 3]))
            R.output(lv1, lv_adjoint)
        return (lv1, (lv_adjoint, lv_adjoint))
'''


def seed_module():
    return tracer.trace(lambda x, y: (x + y).sum(), tracer.spec((3, 3)), tracer.spec((3, 3)))


def adjoint(mod, *args, **kwargs):
    return ir.transform.cleanup()(Gradient(*args, **kwargs)(mod))


def test_seed_example_matches_relax_documentation():
    after = adjoint(seed_module(), "main")
    ir.verify(after)
    assert ir.structural_equal(after, ir.parse(SEED_ADJOINT)), str(after)
    assert str(after) == str(ir.parse(SEED_ADJOINT))  # printed alike, names included
    loss, (gx, gy) = ir.Executor(after)["main_adjoint"](np.ones((3, 3), "float32"), np.ones((3, 3), "float32"))
    assert float(loss) == 18.0 and (gx == 1).all() and (gy == 1).all()


def test_original_function_untouched():
    mod = seed_module()
    before = str(mod)
    after = Gradient("main")(mod)
    assert str(mod) == before
    assert ir.structural_equal(after["main"], mod["main"])


def mlp_module():
    w = tracer.tensor(np.ones((4, 3), "float32"))
    w._name = "w"

    def layer(x, b):
        return tracer.tanh(x @ w + b).sum()
    return tracer.trace(layer, tracer.spec((2, 4)), tracer.spec((3,)))


MLP_ADJOINT = '''
@R.function
def main_adjoint(x: R.Tensor((2, 4), dtype="float32"), b: R.Tensor((3,), dtype="float32"), w: R.Tensor((4, 3), dtype="float32")) -> R.Tuple(R.Tensor((), dtype="float32"), R.Tuple(R.Tensor((2, 4), dtype="float32"), R.Tensor((3,), dtype="float32"), R.Tensor((4, 3), dtype="float32"))):
    with R.dataflow():
        lv: R.Tensor((2, 3), dtype="float32") = R.matmul(x, w)
        lv1: R.Tensor((2, 3), dtype="float32") = R.add(lv, b)
        lv2: R.Tensor((2, 3), dtype="float32") = R.tanh(lv1)
        lv3: R.Tensor((), dtype="float32") = R.sum(lv2, axis=None, keepdims=False)
        lv3_adjoint: R.Tensor((), dtype="float32") = R.ones(R.shape([]), dtype="float32")
        lv2_adjoint: R.Tensor((2, 3), dtype="float32") = R.broadcast_to(lv3_adjoint, R.shape([2, 3]))
        lv4: R.Tensor((2, 3), dtype="float32") = R.multiply(lv2, lv2)
        lv5: R.Tensor((2, 3), dtype="float32") = R.subtract(R.const(1.0, "float32"), lv4)
        lv1_adjoint: R.Tensor((2, 3), dtype="float32") = R.multiply(lv2_adjoint, lv5)
        b_adjoint: R.Tensor((3,), dtype="float32") = R.collapse_sum_to(lv1_adjoint, R.shape([3]))
        lv6: R.Tensor((3, 4), dtype="float32") = R.permute_dims(w, axes=[1, 0])
        x_adjoint: R.Tensor((2, 4), dtype="float32") = R.matmul(lv1_adjoint, lv6)
        lv7: R.Tensor((4, 2), dtype="float32") = R.permute_dims(x, axes=[1, 0])
        w_adjoint: R.Tensor((4, 3), dtype="float32") = R.matmul(lv7, lv1_adjoint)
        R.output(lv3, x_adjoint, b_adjoint, w_adjoint)
    return (lv3, (x_adjoint, b_adjoint, w_adjoint))
'''

TUPLE_TARGET_ADJOINT = '''
@R.function
def main_adjoint(x: R.Tensor((2,), dtype="float32")) -> R.Tuple(R.Tuple(R.Tensor((2,), dtype="float32"), R.Tensor((), dtype="float32")), R.Tuple(R.Tensor((2,), dtype="float32"))):
    with R.dataflow():
        lv: R.Tensor((2,), dtype="float32") = R.multiply(x, R.const(2.0, "float32"))
        lv1: R.Tensor((2,), dtype="float32") = R.multiply(x, x)
        lv2: R.Tensor((), dtype="float32") = R.sum(lv1, axis=None, keepdims=False)
        lv2_adjoint: R.Tensor((), dtype="float32") = R.ones(R.shape([]), dtype="float32")
        lv1_adjoint: R.Tensor((2,), dtype="float32") = R.broadcast_to(lv2_adjoint, R.shape([2]))
        lv3: R.Tensor((2,), dtype="float32") = R.multiply(lv1_adjoint, x)
        x_adjoint: R.Tensor((2,), dtype="float32") = R.add(lv3, lv3)
        R.output(lv, lv2, x_adjoint)
    return ((lv, lv2), (x_adjoint,))
'''

INTERMEDIATE_ADJOINT = '''
@R.function
def main_adjoint(x: R.Tensor((2,), dtype="float32")) -> R.Tuple(R.Tensor((), dtype="float32"), R.Tuple(R.Tensor((2,), dtype="float32"))):
    with R.dataflow():
        lv: R.Tensor((2,), dtype="float32") = R.exp(x)
        lv1: R.Tensor((2,), dtype="float32") = R.multiply(lv, R.const(3.0, "float32"))
        lv2: R.Tensor((), dtype="float32") = R.sum(lv1, axis=None, keepdims=False)
        lv2_adjoint: R.Tensor((), dtype="float32") = R.ones(R.shape([]), dtype="float32")
        lv1_adjoint: R.Tensor((2,), dtype="float32") = R.broadcast_to(lv2_adjoint, R.shape([2]))
        lv_adjoint: R.Tensor((2,), dtype="float32") = R.multiply(lv1_adjoint, R.const(3.0, "float32"))
        R.output(lv2, lv_adjoint)
    return (lv2, (lv_adjoint,))
'''


def assert_golden(after, expected_text):
    """Structurally equal after parsing, and printed exactly as written (names included)."""
    expected = ir.parse(expected_text)["main_adjoint"]
    assert ir.structural_equal(after["main_adjoint"], expected), str(after)
    printed = ir.print_function(after["main_adjoint"], "main_adjoint")
    assert printed.split() == expected_text.split(), printed


def test_mlp_layer_golden():
    after = adjoint(mlp_module(), "main")
    ir.verify(after)
    # the broadcast input b gets a gradient of its own shape through collapse_sum_to, once
    assert_golden(after, MLP_ADJOINT)
    x = np.random.default_rng(0).normal(size=(2, 4)).astype("float32")
    b = np.zeros(3, "float32")
    w = np.ones((4, 3), "float32")
    _, (gx, gb, gw) = ir.Executor(after)["main_adjoint"](x, b, w)
    dt = 1 - np.tanh(x @ w + b) ** 2
    np.testing.assert_allclose(gb, dt.sum(0), rtol=1e-5)
    np.testing.assert_allclose(gw, x.T @ dt, rtol=1e-5)
    np.testing.assert_allclose(gx, dt @ w.T, rtol=1e-5)


def test_tuple_output_with_target_index():
    mod = tracer.trace(lambda x: (x * 2.0, (x * x).sum()), tracer.spec((2,)))
    after = adjoint(mod, "main", target_index=1)
    assert_golden(after, TUPLE_TARGET_ADJOINT)
    out, (gx,) = ir.Executor(after)["main_adjoint"](np.array([1.0, 3.0], "float32"))
    np.testing.assert_allclose(out[0], [2.0, 6.0])
    np.testing.assert_allclose(gx, [2.0, 6.0])


def test_intermediate_var_in_require_grads():
    mod = tracer.trace(lambda x: (tracer.exp(x) * 3.0).sum(), tracer.spec((2,)))
    inner = mod["main"].bindings[0].var  # exp(x)
    after = adjoint(mod, "main", require_grads=[inner])
    assert_golden(after, INTERMEDIATE_ADJOINT)
    _, (g,) = ir.Executor(after)["main_adjoint"](np.zeros(2, "float32"))
    np.testing.assert_allclose(g, [3.0, 3.0])


def test_single_var_and_unrelated_var_gets_zeros():
    mod = tracer.trace(lambda x, y: (x * x).sum(), tracer.spec((2,)), tracer.spec((3, 1)))
    x, y = mod["main"].params
    after = adjoint(mod, "main", require_grads=y)
    _, (gy,) = ir.Executor(after)["main_adjoint"](np.ones(2, "float32"), np.ones((3, 1), "float32"))
    assert gy.shape == (3, 1) and not gy.any()


def test_default_require_grads_skips_integer_params():
    mod = tracer.trace(lambda x, i: (x * tracer.astype(i, "float32")).sum(), tracer.spec((2,)),
                       tracer.spec((2,), "int64"))
    after = adjoint(mod, "main")
    _, grads = ir.Executor(after)["main_adjoint"](np.ones(2, "float32"), np.array([2, 3]))
    assert len(grads) == 1
    np.testing.assert_allclose(grads[0], [2.0, 3.0])


def test_tuple_parameter_gets_tuple_adjoint():
    t = Var("t", TupleType((TensorType((2,)), TensorType((2,)))))
    b = Builder()
    a0 = b.get_item(t, 0)
    a1 = b.get_item(t, 1)
    s = b.call("sum", b.call("multiply", a0, a0), axis=None)
    mod = ir.IRModule({"main": b.function([t], s)})
    after = adjoint(mod, "main")
    ir.verify(after)
    out, ((g0, g1),) = ir.Executor(after)["main_adjoint"]((np.array([1.0, 2.0], "float32"), np.ones(2, "float32")))
    np.testing.assert_allclose(g0, [2.0, 4.0])
    assert not g1.any() and a1 is not None


def test_gradient_accumulates_over_uses():
    mod = tracer.trace(lambda x: (x * x + x).sum(), tracer.spec((3,)))
    after = adjoint(mod, "main")
    _, (g,) = ir.Executor(after)["main_adjoint"](np.array([1.0, 2.0, 3.0], "float32"))
    np.testing.assert_allclose(g, [3.0, 5.0, 7.0])


def assert_clean(fn):
    bindings = fn.bindings
    defs = {bd.var: bd.value for bd in bindings}
    used = {u for bd in bindings for u in ir.free_vars(bd.value)} | set(ir.free_vars(fn.body))
    for bd in bindings:
        v = bd.value
        assert bd.var in used, f"unused binding {bd.var.name}"
        if not isinstance(v, ir.Call):
            continue
        if v.op in ("broadcast_to", "collapse_sum_to", "reshape"):
            assert v.args[0].type != bd.var.type, f"no-op {v.op} left"
        if v.op == "add":
            for a in v.args:
                d = defs.get(a)
                assert not (isinstance(d, ir.Call) and d.op in ("zeros", "zeros_like")), "addition of zeros left"
        if v.op == "permute_dims":
            d = defs.get(v.args[0])
            assert not (isinstance(d, ir.Call) and d.op == "permute_dims"), "double transpose left"


def test_clean_output_has_no_redundancy():
    def f(x, y):
        z = tracer.permute_dims(tracer.permute_dims(x @ y, (1, 0)), (1, 0))
        return (z * tracer.reshape(y, (3, 2))[0, 0]).sum() + (x * 1.0).sum()
    after = adjoint(tracer.trace(f, tracer.spec((2, 3)), tracer.spec((3, 2))), "main")
    ir.verify(after)
    assert_clean(after["main_adjoint"])


def test_simplify_removes_what_it_promises():
    x = Var("x", TensorType((2, 3)))
    b = Builder()
    z = b.call("zeros", shape=(2, 3), dtype="float32")
    s = b.call("add", x, z)
    t = b.call("permute_dims", b.call("permute_dims", s, axes=(1, 0)), axes=(1, 0))
    u = b.call("broadcast_to", t, shape=(2, 3))
    mod = ir.IRModule({"main": b.function([x], b.call("sum", u, axis=None))})
    clean = ir.transform.cleanup()(mod)
    assert [bd.value.op for bd in clean["main"].bindings] == ["sum"]
    assert clean["main"].bindings[0].value.args[0] is x


# ---------------------------------------------------------------- errors


def test_unknown_function():
    with pytest.raises(ValueError, match="no function named 'nope'"):
        Gradient("nope")(seed_module())


def test_adjoint_already_present():
    after = Gradient("main")(seed_module())
    with pytest.raises(ValueError, match="already has a function named main_adjoint"):
        Gradient("main")(after)


def test_not_exactly_one_dataflow_block():
    fn = seed_module()["main"]
    two = ir.Function(fn.params, [fn.blocks[0], ir.Block([])], fn.body)
    with pytest.raises(ValueError, match="exactly one dataflow block"):
        Gradient("main")(ir.IRModule({"main": two}))
    plain = ir.Function(fn.params, [ir.Block(fn.blocks[0].bindings, is_dataflow=False)], fn.body)
    with pytest.raises(ValueError, match="exactly one dataflow block"):
        Gradient("main")(ir.IRModule({"main": plain}))


def test_target_not_scalar():
    mod = tracer.trace(lambda x: x * 2.0, tracer.spec((3,)))
    with pytest.raises(ValueError, match="must be a floating-point scalar"):
        Gradient("main")(mod)


def test_target_integer_scalar():
    mod = tracer.trace(lambda x: x.sum(), tracer.spec((3,), "int64"))
    with pytest.raises(ValueError, match="floating-point scalar"):
        Gradient("main")(mod)


def test_target_index_out_of_range():
    mod = tracer.trace(lambda x: (x.sum(), x), tracer.spec((3,)))
    with pytest.raises(ValueError, match="target_index 2 is out of range.*returns 2"):
        Gradient("main", target_index=2)(mod)
    with pytest.raises(ValueError, match="target_index 1 is out of range"):
        Gradient("main", target_index=1)(seed_module())


def test_require_grads_not_in_function():
    stranger = Var("z", TensorType((3, 3)))
    with pytest.raises(ValueError, match="not a parameter or variable of main"):
        Gradient("main", require_grads=[stranger])(seed_module())


def test_require_grads_duplicate():
    mod = seed_module()
    x = mod["main"].params[0]
    with pytest.raises(ValueError, match="lists x twice"):
        Gradient("main", require_grads=[x, x])(mod)


def test_require_grads_integer_var_is_type_error():
    mod = tracer.trace(lambda x, i: (x * tracer.astype(i, "float32")).sum(), tracer.spec((2,)),
                       tracer.spec((2,), "int64"))
    with pytest.raises(TypeError, match="only floating-point values have gradients"):
        Gradient("main", require_grads=[mod["main"].params[1]])(mod)


def test_ops_without_vjp_listed_together():
    from ir.ops.registry import OPS, Attr, declare

    for name in ("test.opaque_a", "test.opaque_b"):
        if name not in OPS:
            declare(name, ("x",), (Attr("k", "int", 0),), infer=lambda op, types, k: types[0],
                    kernel=lambda xp, x, k: x)
    x = Var("x", TensorType((2,)))
    b = Builder()
    y = b.call("test.opaque_b", b.call("test.opaque_a", x))
    mod = ir.IRModule({"main": b.function([x], b.call("sum", y, axis=None))})
    with pytest.raises(ValueError, match="no VJP rule for op\\(s\\) test.opaque_a, test.opaque_b"):
        Gradient("main")(mod)


def test_astype_gradient_casts_back():
    mod = tracer.trace(lambda x: (tracer.astype(x, "float16") * 3.0).sum(), tracer.spec((3,), "float32"))
    after = adjoint(mod, "main")
    _, (g,) = ir.Executor(after)["main_adjoint"](np.array([0.1, 0.2, 0.3], "float32"))
    assert g.dtype == np.float32
    np.testing.assert_array_equal(g, [3.0, 3.0, 3.0])


def test_ties_split_evenly_and_kinks_follow_pytorch():
    x = np.array([1.0, 0.0, -2.0], "float32")
    for fn, expected in [(lambda a: tracer.maximum(a, tracer.tensor(1.0)), [0.5, 0.0, 0.0]),
                         (lambda a: tracer.minimum(a, tracer.tensor(0.0)), [0.0, 0.5, 1.0]),
                         (tracer.relu, [1.0, 0.0, 0.0]), (tracer.abs, [1.0, 0.0, -1.0])]:
        mod = tracer.trace(lambda a, fn=fn: fn(a).sum(), tracer.spec((3,)))
        _, (g,) = ir.Executor(adjoint(mod, "main"))["main_adjoint"](x)
        np.testing.assert_array_equal(g, expected)


def test_stop_gradient_blocks_the_gradient():
    mod = tracer.trace(lambda x: (tracer.stop_gradient(x) * x).sum(), tracer.spec((2,)))
    _, (g,) = ir.Executor(adjoint(mod, "main"))["main_adjoint"](np.array([2.0, 3.0], "float32"))
    np.testing.assert_array_equal(g, [2.0, 3.0])  # d/dx (c * x) with c = x held constant


def test_no_gradient_flows_through_integer_values():
    def f(x):
        k = tracer.astype(x, "int32") * 3  # integer arithmetic on the path: piecewise constant
        return (tracer.astype(k, "float32") * x).sum()
    mod = tracer.trace(f, tracer.spec((2,)))
    after = adjoint(mod, "main")
    assert not any(bd.var.type.dtype == "int32" for bd in after["main_adjoint"].bindings[len(mod["main"].bindings):])
    _, (g,) = ir.Executor(after)["main_adjoint"](np.array([1.7, 2.2], "float32"))
    np.testing.assert_array_equal(g, [3.0, 6.0])
