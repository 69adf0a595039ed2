"""Review findings on the Gradient pass, on modules written as Relax text."""
import numpy as np
import pytest

import ir
from autodiff import Gradient

T = 'R.Tensor((), dtype="float32")'
F3 = 'R.Tensor((3,), dtype="float32")'
I3 = 'R.Tensor((3,), dtype="int64")'


def module(params: str, ret: str, body: str, returns: str = "out") -> ir.IRModule:
    lines = "\n".join(f"            {line}" for line in body.strip().splitlines())
    return ir.parse(f'''
@I.ir_module
class Module:
    @R.function
    def main({params}) -> {ret}:
        with R.dataflow():
{lines}
        return {returns}
''')


def run(mod, *arrays, **kwargs):
    after = ir.transform.cleanup()(Gradient("main", **kwargs)(mod))
    ir.verify(after)
    return ir.Executor(after)["main_adjoint"](*arrays)


def test_gradient_flows_through_a_tuple_with_an_integer_field():
    mod = module(f"x: {F3}, i: {I3}", T, f'''
t: R.Tuple({F3}, {I3}) = (x, i)
a: {F3} = t[0]
b: {F3} = R.multiply(a, a)
out: {T} = R.sum(b, axis=None, keepdims=False)
R.output(out)''')
    x = np.array([1.0, -2.0, 3.0], "float32")
    _, (gx,) = run(mod, x, np.arange(3))
    np.testing.assert_allclose(gx, 2 * x)


def test_target_index_must_be_an_int():
    mod = module(f"x: {F3}", f"R.Tuple({F3}, {T})", f'''
s: {T} = R.sum(x, axis=None, keepdims=False)
R.output(s)''', returns="(x, s)")
    assert float(run(mod, np.ones(3, "float32"), target_index=1)[0][1]) == 3.0
    for bad in ("1", True, 1.0):  # "1" once read as an out-of-range 1, True as 1
        with pytest.raises(TypeError, match=f"target_index must be an int, got {bad!r}"):
            Gradient("main", target_index=bad)(mod)


def test_target_index_into_a_returned_tuple_variable():
    # As Relax: target_index indexes a returned tuple expression; a variable bound to a tuple is a tuple
    # target, which Relax's Gradient refuses (its test_report_error), so tracegrad does too.
    mod = module(f"x: {F3}", f"R.Tuple({F3}, {T})", f'''
sq: {F3} = R.multiply(x, x)
loss: {T} = R.sum(sq, axis=None, keepdims=False)
gv: R.Tuple({F3}, {T}) = (sq, loss)
out: R.Tuple({F3}, {T}) = gv
R.output(out)''')
    with pytest.raises(ValueError, match="target_index 1 is out of range; main returns 1 value.*not of a variable"):
        Gradient("main", target_index=1)(mod)
    with pytest.raises(ValueError, match="must be a floating-point scalar, got R.Tuple.*return the tuple expression"):
        Gradient("main")(mod)
