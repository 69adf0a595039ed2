"""Issue 22 item 3: torch's type promotion (result_type, promote_types, 0-d tensors as their own category),
int8/uint8/int16 tensors, and integer input to the ops torch computes in float; eager and traced alike."""
import numpy as np
import pytest

import ir
import tracer
from tests.torch_optional import torch

TORCH = {d: getattr(torch, d) for d in ir.DTYPES}


def _t(dtype, shape=(2,), value=3):
    return np.full(shape, value, dtype)


PAIRS = [("int64", (2,), "float64", ()), ("int32", (2,), "int64", ()), ("float32", (2,), "float64", ()),
         ("float32", (2,), "int32", (2,)), ("uint8", (2,), "int8", (2,)), ("uint8", (2,), "int16", ()),
         ("bool", (2,), "int8", ()), ("int16", (2,), "float16", (2,)), ("int8", (), "float32", ()),
         ("bool", (2,), "float64", (2,)), ("uint8", (2,), "int64", (2,))]


@pytest.mark.parametrize("d1, s1, d2, s2", PAIRS)
def test_tensor_pairs_promote_as_torch(d1, s1, d2, s2):
    a, b = _t(d1, s1), _t(d2, s2, 2)
    expect = str(torch.result_type(torch.tensor(a), torch.tensor(b))).replace("torch.", "")
    assert tracer.result_type(tracer.tensor(a), tracer.tensor(b)) == expect
    if len(s1) == len(s2):
        assert tracer.promote_types(d1, d2) == str(torch.promote_types(TORCH[d1], TORCH[d2])).replace("torch.", "")
    for op in ("__add__", "__mul__", "__mod__", "__truediv__"):
        if "bool" in (d1, d2) and op == "__mod__":
            continue
        ours = getattr(tracer.tensor(a), op)(tracer.tensor(b))
        theirs = getattr(torch.tensor(a), op)(torch.tensor(b))
        assert ours.dtype == str(theirs.dtype).replace("torch.", ""), op
        np.testing.assert_allclose(ours.numpy().astype("float64"), theirs.numpy().astype("float64"), rtol=1e-6)
        traced = ir.Executor(tracer.trace(lambda x, y, op=op: getattr(x, op)(y), a, b))["main"](a, b)
        assert str(traced.dtype) == ours.dtype and np.array_equal(traced, ours.numpy()), op


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "int32", "int64", "bool", "float32"])
@pytest.mark.parametrize("scalar", [2.5, 2, True])
def test_python_numbers_are_weak(dtype, scalar):
    a = _t(dtype)
    theirs = torch.tensor(a) + scalar
    ours = tracer.tensor(a) + scalar
    assert ours.dtype == str(theirs.dtype).replace("torch.", "")
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    assert tracer.result_type(tracer.tensor(a), scalar) == ours.dtype


def test_uint8_wraps_and_indexes_as_torch():
    a = np.array([1, 200], "uint8")
    np.testing.assert_array_equal((tracer.tensor(a) - 2).numpy(), (torch.tensor(a) - 2).numpy())
    np.testing.assert_array_equal((tracer.tensor(a) + tracer.tensor(a)).numpy(), (torch.tensor(a) * 2).numpy())
    x = tracer.arange(6)
    assert x[tracer.tensor(np.array([5, 0], "int32"))].tolist() == [5, 0]
    assert x[tracer.tensor(np.int16(2))].item() == 2  # a 0-d integer tensor is a Python index, as torch
    with pytest.raises(IndexError):  # torch: "tensors used as indices must be long, int, byte or bool tensors"
        x[tracer.tensor(np.array([5, 0], "int8"))]
    assert tracer.tensor(a).to("int16").dtype == "int16" and tracer.tensor(a).type() == "torch.ByteTensor"
    assert tracer.tensor(a).type("torch.CharTensor").dtype == "int8"
    assert tracer.zeros((2,), dtype="int8").dtype == "int8" and tracer.ones((1,), dtype="uint8").tolist() == [1]


@pytest.mark.parametrize("name", ["exp", "log", "cos", "sin", "sqrt", "rsqrt", "sigmoid", "tanh"])
def test_float_ops_promote_integer_input(name):
    a = np.array([1, 2, 4], "int64")
    theirs = getattr(torch, name)(torch.tensor(a))
    for x in (tracer.tensor(a),):
        ours = getattr(tracer, name)(x)
        assert ours.dtype == "float32" == str(theirs.dtype).replace("torch.", "")
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-6)
    traced = ir.Executor(tracer.trace(getattr(tracer, name), a))["main"](a)
    np.testing.assert_allclose(traced, theirs.numpy(), rtol=1e-6)
    assert (tracer.tensor(a) / 2).dtype == "float32"


@pytest.mark.parametrize("name", ["mean", "var", "std"])
def test_integer_reductions_refuse_as_torch(name):
    a = np.array([1, 2, 4], "int64")
    with pytest.raises(RuntimeError):
        getattr(torch.tensor(a), name)()
    with pytest.raises(RuntimeError):
        getattr(tracer.tensor(a), name)()
