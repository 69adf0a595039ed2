"""take's Relax modes, and nn.Embedding's bounds check: a compiled step raises what an eager run raises."""
import numpy as np
import pytest

import autodiff
import ir
import nn
import tracer

TAKE = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4, 3), dtype="float32"), i: R.Tensor((3,), dtype="int64")) -> R.Tensor((), dtype="float32"):
        with R.dataflow():
            lv = R.take(x, i, axis=0, mode={mode})
            lv1 = R.multiply(lv, lv)
            gv = R.sum(lv1, axis=None, keepdims=False)
            R.output(gv)
        return gv
'''


@pytest.mark.parametrize("mode", ["fast", "wrap", "clip"])
def test_take_modes_as_relax_prints_them(mode):
    mod = ir.parse(TAKE.format(mode=f'"{mode}"'))
    x = np.arange(12, dtype="float32").reshape(4, 3)
    i = np.array([3, -1, 1] if mode == "fast" else [5, -2, 9])
    rows = np.take(x, i, axis=0, mode="raise" if mode == "fast" else mode)
    adjoint = autodiff.Gradient("main")(mod)
    value, (gx,) = ir.Executor(adjoint)["main_adjoint"](x, i)  # integer indices get no gradient
    np.testing.assert_allclose(value, (rows ** 2).sum())
    want = np.zeros_like(x)
    np.add.at(want, np.take(np.arange(4), i, mode="wrap" if mode == "fast" else mode), 2 * rows)
    np.testing.assert_allclose(gx, want)


def test_take_fast_mode_refuses_out_of_range_and_other_modes_are_refused():
    mod = ir.parse(TAKE.format(mode='"fast"'))
    with pytest.raises(IndexError, match="take: index 4 is out of range for axis 0 of size 4"):
        ir.Executor(mod)["main"](np.zeros((4, 3), "float32"), np.array([0, 4, 1]))
    with pytest.raises(ir.IRError, match="take: mode must be one of \\['fast', 'wrap', 'clip'\\], got 'raise'"):
        ir.parse(TAKE.format(mode='"raise"'))


def _errors(fn, *args):
    try:
        fn(*args)
    except Exception as e:  # noqa: BLE001 - the test compares whatever each path raises
        return type(e), str(e)
    return None


@pytest.mark.parametrize("bad", [[1, -1], [9, 10], [-3, 12]])
@pytest.mark.parametrize("dtype", ["int64", "int32"])
def test_embedding_raises_the_same_error_eager_and_compiled(bad, dtype):
    emb = nn.Embedding(10, 4)
    step = autodiff.value_and_grad(lambda i: emb(i).sum(), wrt=emb.parameters())
    step(np.array([0, 9], dtype))  # traced and compiled with good indices
    indices = np.array(bad, dtype)
    eager = _errors(emb, tracer.tensor(indices))
    compiled = _errors(step, indices)
    assert eager is not None and issubclass(eager[0], IndexError)  # IndexRangeError: a RuntimeError too
    assert compiled == eager
    assert eager[1] == f"Embedding(10, 4): index {min(bad) if min(bad) < 0 else max(bad)} is out of range [0, 10)"


def test_indexing_raises_the_same_error_eager_and_compiled():
    x = tracer.tensor(np.arange(5.0))
    step = autodiff.value_and_grad(lambda i: (x[i] * x[i]).sum(), wrt=[x])
    step(np.array([0, -1]))  # negative indices count from the end, both ways
    assert np.allclose(step(np.array([-1]))[1][0], [0, 0, 0, 0, 8])
    eager = _errors(lambda i: x[tracer.tensor(i)], np.array([5]))
    assert eager == (IndexError, "take: index 5 is out of range for axis 0 of size 5")
    assert _errors(step, np.array([5])) == eager


def test_check_index_prints_and_parses_back():
    emb = nn.Embedding(7, 2)
    mod = tracer.trace(lambda i: emb(i).sum(), np.array([1, 2]))
    text = str(mod)
    assert 'R.check_index(i, lower=0, upper=7, what="Embedding(7, 2)")' in text
    assert ir.structural_equal(ir.parse(text), mod)
