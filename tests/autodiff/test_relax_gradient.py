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
