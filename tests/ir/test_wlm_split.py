"""split's specialized kernel (ir.runtime.specialize._split): the views np.split makes, for sections and indices,
any axis, uneven and empty pieces and strided inputs, and a compiled RNN step's values unchanged by it."""
import numpy as np
import pytest

import autodiff
import nn
import tracer
from ir.nodes import Call, Var
from ir.ops.registry import get_op
from ir.runtime import specialize as sp
from ir.types import TensorType, TupleType


def _call(shape, ios, axis, dtype="float32"):
    x = Var("x", TensorType(shape, dtype))
    return Call("split", [x], {"indices_or_sections": ios, "axis": axis},
                get_op("split").infer(get_op("split"), [x.type], indices_or_sections=ios, axis=axis))


@pytest.mark.parametrize(("shape", "ios", "axis"), [((35, 20, 800), 35, 0), ((700, 200), 35, 0), ((4, 6, 5), 3, 1),
                                                    ((4, 6, 5), (1, 1, 4), -1), ((7, 3), 3, 0), ((5, 0), 2, 0),
                                                    ((6,), (0, 6), 0)])
def test_split_views_as_np_split(shape, ios, axis):
    call = _call(shape, ios, axis)
    assert isinstance(call.type, TupleType)
    kernel = sp.specialize(call, np)
    assert kernel is not None
    base = np.random.default_rng(0).standard_normal((2,) + shape).astype("float32")
    for x in (base[0], base[1:][0], np.asfortranarray(base[0]), base[:, ...][0][::-1]):  # C, F, reversed views
        got, want = kernel(x), get_op("split").kernel(np, x, indices_or_sections=ios, axis=axis)
        assert len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            assert g.shape == w.shape and g.strides == w.strides and g.dtype == w.dtype
            assert np.array_equal(g, w)
            if g.size:
                assert np.shares_memory(g, x) and g.__array_interface__["data"] == w.__array_interface__["data"]


def test_compiled_lstm_step_the_same_with_the_specialized_split(monkeypatch):
    rng = np.random.default_rng(3)
    lstm = nn.LSTM(6, 5, 2)
    x = tracer.tensor(rng.standard_normal((7, 3, 6)).astype("float32"))
    params = list(lstm.parameters())

    def run():
        step = autodiff.value_and_grad(lambda x: (lstm(x)[0] ** 2).sum(), wrt=params)
        value, grads = step(x)
        return [np.asarray(value)] + [np.asarray(g) for g in grads]
    fast = run()
    monkeypatch.setattr(sp, "_split", lambda *a, **k: None)  # the generic kernel, np.split
    plain = run()
    for a, b in zip(fast, plain, strict=True):
        assert np.array_equal(a, b)
