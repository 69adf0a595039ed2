"""int8, uint8 and int16 tensors behave as int32 does, as torch's: bitwise ops and shifts, sums and products
into int64, sorting descending, randint / arange / full in those dtypes (with torch's range errors), and the
floating functions (erf, lgamma, digamma, ...) computing integer and bool input in float32."""
import warnings

import numpy as np
import pytest

import ir
import nn.torch as tt
import tracer
from tests.torch_optional import torch

INTS = ["bool", "uint8", "int8", "int16", "int32", "int64"]
OPS = {
    "and": lambda m, a, b: a & b, "or": lambda m, a, b: a | b, "xor": lambda m, a, b: a ^ b,
    "not": lambda m, a, b: ~a, "lshift": lambda m, a, b: a << b, "rshift": lambda m, a, b: a >> b,
    "sum": lambda m, a, b: a.sum(), "prod": lambda m, a, b: a.prod(), "cumprod": lambda m, a, b: a.cumprod(0),
    "cumsum": lambda m, a, b: a.cumsum(0), "sort_desc": lambda m, a, b: a.sort(descending=True).values,
    "argsort_desc": lambda m, a, b: a.argsort(descending=True), "square": lambda m, a, b: a.square(),
    "arange": lambda m, a, b: m.arange(0, 5, dtype=a.dtype), "full": lambda m, a, b: m.full((2,), 1, dtype=a.dtype),
    "randint_dtype": lambda m, a, b: m.randint(0, 2, (3,), dtype=a.dtype).dtype,
}
FLOATING = ["erf", "erfc", "erfinv", "lgamma", "digamma", "tan", "asin", "atan", "sinh", "log1p", "expm1", "exp2",
            "log2", "sigmoid", "sqrt", "exp", "reciprocal", "rsqrt", "logit", "sinc"]


def _values(dtype):
    if dtype == "bool":
        return np.array([0, 1, 1, 0], bool), np.array([1, 1, 0, 0], bool)
    return np.array([1, 2, 3, 0], dtype), np.array([2, 1, 1, 3], dtype)


def _run(fn, m, a, b):
    try:
        return fn(m, m.tensor(a), m.tensor(b))
    except Exception as e:  # noqa: BLE001 (compared below: both raise, or neither)
        return e


ROWS = [(d, n) for d in INTS[1:] for n in OPS] + [(d, n) for d in INTS for n in FLOATING]  # bool: floating only


@pytest.mark.parametrize("dtype,name", ROWS, ids=[f"{n}-{d}" for d, n in ROWS])
def test_matches_torch(dtype, name):
    fn = OPS.get(name) or (lambda m, a, b: getattr(m, name)(a))
    a, b = _values(dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want, got = _run(fn, torch, a, b), _run(fn, tt, a, b)
    if isinstance(want, Exception):
        assert isinstance(got, Exception), f"torch raises {want!r}, tracegrad gives {got!r}"
        return
    assert not isinstance(got, Exception), got
    if isinstance(want, torch.dtype):
        assert str(want) == f"torch.{got}"
        return
    assert got.dtype == str(want.dtype).removeprefix("torch."), (got.dtype, want.dtype)
    np.testing.assert_allclose(np.asarray(got.numpy(), "float64"), want.double().numpy(), rtol=1e-6, atol=1e-7)


def test_range_errors_as_torch():
    with pytest.raises(RuntimeError):
        torch.randint(0, 300, (2,), dtype=torch.int8)
    with pytest.raises(RuntimeError, match="int8"):
        tt.randint(0, 300, (2,), dtype="int8")
    with pytest.raises(RuntimeError):
        torch.full((2,), 300, dtype=torch.int8)
    with pytest.raises(RuntimeError, match="int8"):
        tracer.full((2,), 300, dtype="int8")


def test_traced_bitwise_on_uint8():
    a = np.array([1, 2, 255], "uint8")
    out = ir.Executor(tracer.trace(lambda x: (x << 1) ^ ~x, a))["main"](a)
    assert out.dtype == np.uint8
    np.testing.assert_array_equal(out, ((torch.tensor(a) << 1) ^ ~torch.tensor(a)).numpy())
