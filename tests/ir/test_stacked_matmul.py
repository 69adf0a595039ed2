"""The stacked matmul kernel (ir.runtime.specialize._stacked): operands copied or not, the same products."""
import numpy as np
import pytest

import ir
import tracer
from ir.runtime import specialize


def _qkv(dtype="float32"):
    return np.random.default_rng(0).standard_normal((2, 8, 3, 4, 5)).astype(dtype)


def test_far_apart_transposed_operand_is_copied_others_are_left():
    qkv = _qkv()
    k_t = qkv[:, :, 1].transpose(0, 2, 3, 1)  # (2, 4, 5, 8): columns 3*4*5 elements apart
    assert specialize._spread(k_t).flags.c_contiguous
    q = qkv[:, :, 0].transpose(0, 2, 1, 3)  # row-major strided: left as it is
    assert specialize._spread(q) is q
    dense_t = np.ascontiguousarray(q).transpose(0, 1, 3, 2)  # a dense transposed block: BLAS transposes it
    assert specialize._spread(dense_t) is dense_t
    b = np.broadcast_to(k_t[:1], k_t.shape)  # stride 0: never materialised
    assert specialize._spread(b) is b


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_compiled_attention_scores_equal_numpy(dtype):
    qkv = _qkv(dtype)

    def scores(a):
        q = a[:, :, 0].permute(0, 2, 1, 3)
        k = a[:, :, 1].permute(0, 2, 3, 1)
        return q @ k

    mod = tracer.trace(scores, tracer.spec(qkv.shape, dtype))
    got = ir.Executor(mod)["main"](qkv)
    want = qkv[:, :, 0].transpose(0, 2, 1, 3) @ qkv[:, :, 1].transpose(0, 2, 3, 1)
    np.testing.assert_allclose(got, want, rtol=1e-6 if dtype == "float32" else 1e-13)
    out = np.empty_like(want)
    assert specialize._stacked(qkv[:, :, 0].transpose(0, 2, 1, 3), qkv[:, :, 1].transpose(0, 2, 3, 1), out=out) is out
    np.testing.assert_allclose(out, want, rtol=1e-6 if dtype == "float32" else 1e-13)
