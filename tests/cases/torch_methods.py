"""PyTorch's Tensor methods (tracer/torch_methods.py), built from primitives: values and gradients."""
import numpy as np

import tracer as T
from tests.cases import OpCase, rand

x3 = rand(2, 3, 4)


def _lse(a, axis=None, keepdims=False):
    m = a.max(axis=axis, keepdims=True)
    out = np.log(np.exp(a - m).sum(axis=axis, keepdims=True)) + m
    return out if keepdims else (out.reshape(()) if axis is None else out.squeeze(axis))


def _np_chunk(a, chunks, axis):
    step = -(-a.shape[axis] // chunks)
    return tuple(np.split(a, list(range(step, a.shape[axis], step)), axis=axis))


CASES = [
    OpCase("view_varargs", lambda x: x.view(4, -1), lambda a: a.reshape(4, -1), [x3], ("reshape",)),
    OpCase("flatten_from_1", lambda x: x.flatten(1), lambda a: a.reshape(2, 12), [x3], ("reshape",)),
    OpCase("flatten_middle", lambda x: x.flatten(0, -2), lambda a: a.reshape(6, 4), [x3], ("reshape",)),
    OpCase("unflatten", lambda x: x.unflatten(2, (2, -1)), lambda a: a.reshape(2, 3, 2, 2), [x3], ("reshape",)),
    OpCase("unsqueeze_neg", lambda x: x.unsqueeze(-1), lambda a: a[..., None], [x3], ("expand_dims",)),
    OpCase("permute_varargs", lambda x: x.permute(2, 0, 1), lambda a: a.transpose(2, 0, 1), [x3], ("permute_dims",)),
    OpCase("expand_keep_and_new", lambda x: x.expand(2, -1, 3), lambda a: np.broadcast_to(a, (2, 4, 3)),
           [rand(4, 1)], ("broadcast_to",)),
    OpCase("repeat", lambda x: x.repeat(2, 1, 3), lambda a: np.tile(a, (2, 1, 3)), [rand(3, 2)],
           ("reshape", "broadcast_to")),
    OpCase("chunk_uneven", lambda x: x.chunk(3, dim=2), lambda a: _np_chunk(a, 3, 2), [rand(2, 2, 7)], ("split",)),
    OpCase("clamp_both", lambda x: x.clamp(-0.5, 0.25), lambda a: np.clip(a, -0.5, 0.25), [x3], ("clamp",)),
    OpCase("clamp_min_tensor", lambda x, lo: x.clamp(min=lo), lambda a, lo: np.maximum(a, lo),
           [rand(3, 4), rand(4, seed=1)], ("clamp",)),
    OpCase("clip_max", lambda x: x.clip(max=0.0), lambda a: np.minimum(a, np.float32(0)), [x3], ("clamp",)),
    OpCase("masked_fill", lambda x: x.masked_fill(x > 0.5, -1.0), lambda a: np.where(a > 0.5, np.float32(-1), a),
           [x3], ("where",)),
    OpCase("argmin_dim", lambda x: x.argmin(dim=1), lambda a: a.argmin(1), [x3], ("argmax", "negative"), grad=False),
    OpCase("argmin_int", lambda x: x.argmin(), lambda a: np.argmin(a),
           [np.array([5, -2**63, 3], "int64")], ("argmax",), grad=False),
    OpCase("logsumexp_dim", lambda x: x.logsumexp(dim=1), lambda a: _lse(a, 1), [x3 * 30], ("exp", "log")),
    OpCase("logsumexp_all", lambda x: x.logsumexp(), lambda a: _lse(a), [x3], ("exp", "log")),
    OpCase("logsumexp_keepdim", lambda x: x.logsumexp(dim=(0, 2), keepdim=True), lambda a: _lse(a, (0, 2), True),
           [x3], ("exp", "log")),
    OpCase("logsumexp_neg_inf", lambda x: T.logsumexp(x, 0),
           lambda a: np.array([-np.inf, np.log(2)], "float32"), [np.array([[-np.inf, 0], [-np.inf, 0]], "float32")],
           ("exp", "log"), grad=False),
    OpCase("std_unbiased_dim", lambda x: x.std(dim=(0, 2), correction=1), lambda a: a.std(axis=(0, 2), ddof=1),
           [x3], ("variance", "sqrt")),
    OpCase("var_correction", lambda x: x.var(1, keepdim=True, correction=1), lambda a: a.var(1, keepdims=True, ddof=1),
           [x3], ("variance",)),
    OpCase("norm_2", lambda x: x.norm(), lambda a: np.linalg.norm(a.reshape(-1)), [x3], ("sqrt",), rtol=1e-5),
    OpCase("norm_1_dim", lambda x: x.norm(1, dim=-1), lambda a: np.abs(a).sum(-1), [x3], ("abs", "sum")),
    OpCase("norm_inf", lambda x: x.norm(float("inf")), lambda a: np.abs(a).max(), [x3], ("abs", "max")),
    OpCase("norm_3", lambda x: x.norm(3, dim=0), lambda a: (np.abs(a) ** 3).sum(0) ** (1 / 3), [x3], ("power",)),
    OpCase("detach", lambda x: x * x.detach(), lambda a: a * a, [x3], ("grad.stop_gradient", "multiply"),
           grad=False),  # finite differences see both factors; test_torch_methods checks the gradient is x
    OpCase("to_float64_mT", lambda x: x.to("float64").mT, lambda a: a.astype("float64").swapaxes(-1, -2), [x3],
           ("astype", "permute_dims")),
    OpCase("double", lambda x: x.double() * x.to(dtype="float64"),
           lambda a: a.astype("float64") * a.astype("float64"), [x3], ("astype", "multiply")),
    OpCase("float_long_int_bool", lambda x: T.stack([x.float(), x.long().float(), x.int().float(), x.bool().float()]),
           lambda a: np.stack([a, a, a, a != 0]).astype("float32"), [rand(5, dtype="int64", low=-2, high=3)],
           ("astype", "stack"), grad=False),
    OpCase("half", lambda x: x.half(), lambda a: a.astype("float16"), [x3], ("astype",), grad=False),
    OpCase("cat_dim", lambda a, b: T.cat([a, b], dim=1), lambda a, b: np.concatenate([a, b], 1),
           [rand(2, 3), rand(2, 2, seed=1)], ("concat",)),
    OpCase("sum_dim_keepdim", lambda x: x.sum(dim=(0, 2), keepdim=True), lambda a: a.sum((0, 2), keepdims=True),
           [x3], ("sum",)),
    OpCase("softmax_dim", lambda x: T.softmax(x, dim=1), lambda a: np.exp(a) / np.exp(a).sum(1, keepdims=True),
           [x3], ("nn.softmax",)),
    OpCase("arange_times_x", lambda x: x * T.arange(0.0, 4.0) + T.linspace(0, 1, 4) + T.eye(3, 4),
           lambda a: a * np.arange(4, dtype="float32") + np.linspace(0, 1, 4, dtype="float32")
           + np.eye(3, 4, dtype="float32"),
           [rand(3, 4)], ("multiply", "add")),
]
