"""Op cases of the nn family: softmax, log_softmax, layer_norm, dropout and the losses.

References loop in float64 over rows and samples, independently of the vectorized kernels.
"""
import math

import numpy as np

import tracer as T
from tests.cases import OpCase, rand
from tracer.tensor import apply

# ---------------------------------------------------------------- references


def _rows(x, axis):
    """x moved so that `axis` is last, as a list of 1-d float64 rows, and a function putting rows back."""
    moved = np.moveaxis(x.astype(np.float64), axis, -1)
    shape = moved.shape

    def back(rows):
        return np.moveaxis(np.array(rows).reshape(shape), -1, axis).astype(x.dtype)
    return list(moved.reshape(-1, shape[-1])), back


def _logsumexp(row):
    m = max(row)
    return m + math.log(math.fsum(math.exp(v - m) for v in row))


def softmax_ref(x, axis=-1):
    rows, back = _rows(x, axis)
    return back([[math.exp(v - _logsumexp(r)) for v in r] for r in rows])


def log_softmax_ref(x, axis=-1):
    rows, back = _rows(x, axis)
    return back([[v - _logsumexp(r) for v in r] for r in rows])


def layer_norm_ref(x, gamma=None, beta=None, eps=1e-5):
    rows, back = _rows(x, -1)
    out = []
    for r in rows:
        mean = math.fsum(r) / len(r)
        var = math.fsum((v - mean) ** 2 for v in r) / len(r)
        out.append([(v - mean) / math.sqrt(var + eps) for v in r])
    out = np.array(out)
    if gamma is not None:
        out = out * gamma.astype(np.float64)
    if beta is not None:
        out = out + beta.astype(np.float64)
    return back(out)


_M64 = (1 << 64) - 1


def _splitmix64(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return z ^ (z >> 31)


def dropout_ref(x, p, seed):
    """Element i survives when splitmix64(key + (i + 1) * golden) / 2**64 >= p, key = splitmix64(seed)."""
    key = _splitmix64(seed & _M64)
    flat = x.astype(np.float64).reshape(-1)
    out = [v / (1 - p) if (_splitmix64((key + (i + 1) * 0x9E3779B97F4A7C15) & _M64) >> 11) / 2.0**53 >= p else 0.0
           for i, v in enumerate(flat)]
    return np.array(out).reshape(x.shape).astype(x.dtype)


def _nll_terms(logp, targets, ignore_index):
    """-logp at each target (0 where ignored), the count of counted targets, and the target positions."""
    logp = logp.astype(np.float64)
    if logp.ndim == 1:
        logp, targets = logp[None], np.asarray(targets)[None]
    per, count, where = np.zeros(targets.shape), 0, []
    for idx in np.ndindex(targets.shape):
        t = int(targets[idx])
        if t == ignore_index:
            continue
        per[idx] = -logp[(idx[0], t) + idx[1:]]
        count += 1
        where.append((idx, t))
    return per, count, where


def binary_cross_entropy_ref(p, t):
    """-(t log p + (1 - t) log(1 - p)) with each log clamped at -100, one element at a time in float64."""
    def clamped_log(v):
        return max(math.log(v), -100.0) if v > 0 else -100.0
    out = [-(b * clamped_log(a) + (1.0 - b) * clamped_log(1.0 - a))
           for a, b in zip(p.astype(np.float64).ravel().tolist(), t.astype(np.float64).ravel().tolist(), strict=True)]
    return np.array(out).reshape(p.shape).astype(p.dtype)


def nll_loss_ref(logp, targets, reduction="mean", ignore_index=-100):
    per, count, _ = _nll_terms(logp, targets, ignore_index)
    if reduction == "none":
        return per.reshape(np.shape(targets)).astype(logp.dtype)
    total = math.fsum(per.reshape(-1))
    with np.errstate(invalid="ignore", divide="ignore"):
        value = np.float64(total) / count if reduction == "mean" else total
    return np.asarray(value, dtype=logp.dtype)


def nll_loss_backward_ref(g, logp, targets, reduction="mean", ignore_index=-100):
    _, count, where = _nll_terms(logp, targets, ignore_index)
    out = np.zeros(logp.shape if logp.ndim > 1 else (1,) + logp.shape)
    g = np.asarray(g, dtype=np.float64)
    for idx, t in where:
        scale = g[idx] if reduction == "none" else g / (count if reduction == "mean" else 1)
        out[(idx[0], t) + idx[1:]] -= scale
    return out.reshape(logp.shape).astype(logp.dtype)


def cross_entropy_ref(logits, probs):
    lsm = log_softmax_ref(logits).astype(np.float64)
    total = -math.fsum((lsm * probs.astype(np.float64)).reshape(-1))
    return np.asarray(total / (logits.shape[0] if logits.ndim >= 2 else 1), dtype=logits.dtype)


# ---------------------------------------------------------------- cases

_logits = rand(5, 4, low=-3, high=3)
_targets = np.array([1, -100, 3, 0, -100], dtype="int64")
_probs = rand(5, 4, low=0.0, high=1.0, seed=3)
_probs = _probs / _probs.sum(axis=1, keepdims=True)
_logp3 = rand(2, 3, 4, seed=5)
_targets3 = np.array([[0, 2, -100, 1], [2, 2, 0, -100]], dtype="int64")

CASES = [
    OpCase("softmax_last", T.softmax, softmax_ref, [rand(3, 4)], ("nn.softmax",)),
    OpCase("softmax_axis0", lambda x: T.softmax(x, axis=0), lambda x: softmax_ref(x, 0), [rand(3, 4)],
           ("nn.softmax",)),
    OpCase("softmax_1d", lambda x: x.softmax(), softmax_ref, [rand(6)], ("nn.softmax",)),
    OpCase("softmax_3d_axis1", lambda x: T.softmax(x, 1), lambda x: softmax_ref(x, 1), [rand(2, 3, 4)],
           ("nn.softmax",)),
    OpCase("softmax_large_logits", T.softmax, softmax_ref, [rand(2, 5, low=-80, high=80)], ("nn.softmax",)),
    OpCase("log_softmax_last", T.log_softmax, log_softmax_ref, [rand(3, 4)], ("nn.log_softmax",)),
    OpCase("log_softmax_axis0", lambda x: x.log_softmax(0), lambda x: log_softmax_ref(x, 0), [rand(3, 4)],
           ("nn.log_softmax",)),
    OpCase("log_softmax_1d", T.log_softmax, log_softmax_ref, [rand(5)], ("nn.log_softmax",)),
    OpCase("log_softmax_large_logits", T.log_softmax, log_softmax_ref, [rand(2, 5, low=-120, high=120)],
           ("nn.log_softmax",), rtol=1e-5, atol=1e-4),
    OpCase("layer_norm_affine", T.layer_norm, layer_norm_ref, [rand(4, 6), rand(6, seed=1), rand(6, seed=2)],
           ("nn.layer_norm",), atol=1e-5),
    OpCase("layer_norm_3d_plain", T.layer_norm, layer_norm_ref, [rand(2, 3, 5)], ("nn.layer_norm",), atol=1e-5),
    OpCase("layer_norm_3d_weight_only", lambda x, w: T.layer_norm(x, w), layer_norm_ref,
           [rand(2, 3, 5), rand(5, seed=1)], ("nn.layer_norm",), atol=1e-5),
    OpCase("layer_norm_1d_eps", lambda x, w, b: T.layer_norm(x, w, b, eps=0.1),
           lambda x, w, b: layer_norm_ref(x, w, b, eps=0.1), [rand(7), rand(7, seed=1), rand(7, seed=2)],
           ("nn.layer_norm",), atol=1e-5),
    OpCase("dropout_seeded", lambda x: T.dropout(x, 0.3, seed=7), lambda x: dropout_ref(x, 0.3, 7), [rand(4, 5)],
           ("nn.dropout",)),
    OpCase("dropout_3d_high_rate", lambda x: T.dropout(x, 0.9, seed=-9), lambda x: dropout_ref(x, 0.9, -9),
           [rand(2, 3, 4)], ("nn.dropout",)),  # keeps 3 of 24
    OpCase("dropout_p0_identity", lambda x: T.dropout(x, 0.0) * 1.0, lambda x: x, [rand(3, 3)], ("multiply",)),
    OpCase("dropout_eval_identity", lambda x: T.dropout(x, 0.5, training=False) * 1.0, lambda x: x, [rand(3, 3)],
           ("multiply",)),
    OpCase("nll_loss_mean_ignored", T.nll_loss, nll_loss_ref, [_logits, _targets], ("nn.nll_loss",)),
    OpCase("nll_loss_sum", lambda p, t: T.nll_loss(p, t, reduction="sum"),
           lambda p, t: nll_loss_ref(p, t, "sum"), [_logits, _targets], ("nn.nll_loss",)),
    OpCase("nll_loss_none", lambda p, t: T.nll_loss(p, t, reduction="none"),
           lambda p, t: nll_loss_ref(p, t, "none"), [_logits, _targets], ("nn.nll_loss",)),
    OpCase("nll_loss_ignore_index_1", lambda p, t: T.nll_loss(p, t, ignore_index=1),
           lambda p, t: nll_loss_ref(p, t, ignore_index=1), [_logits, np.array([1, 2, 1, 0, 3], "int32")],
           ("nn.nll_loss",)),
    OpCase("nll_loss_single_sample", T.nll_loss, nll_loss_ref, [rand(4), np.array(2, "int64")], ("nn.nll_loss",)),
    OpCase("nll_loss_spatial", T.nll_loss, nll_loss_ref, [_logp3, _targets3], ("nn.nll_loss",)),
    OpCase("nll_loss_all_ignored_is_nan", T.nll_loss, nll_loss_ref,
           [rand(2, 3), np.array([-100, -100], "int64")], ("nn.nll_loss",), grad=False),
    OpCase("nll_loss_backward_mean", lambda g, p, t: apply("grad.nll_loss_backward", [g, p, t]),
           nll_loss_backward_ref, [rand(seed=1), _logits, _targets], ("grad.nll_loss_backward",)),
    OpCase("nll_loss_backward_none",
           lambda g, p, t: apply("grad.nll_loss_backward", [g, p, t], reduction="none", ignore_index=0),
           lambda g, p, t: nll_loss_backward_ref(g, p, t, "none", 0),
           [rand(2, 4, seed=2), _logp3, np.array([[0, 2, 1, 1], [2, 0, 0, 1]], "int64")], ("grad.nll_loss_backward",)),
    OpCase("cross_entropy_with_logits", T.cross_entropy_with_logits, cross_entropy_ref, [_logits, _probs],
           ("nn.cross_entropy_with_logits", "nn.log_softmax")),
    OpCase("cross_entropy_with_logits_1d", T.cross_entropy_with_logits, cross_entropy_ref,
           [rand(6), np.full(6, 1 / 6, "float32")], ("nn.cross_entropy_with_logits", "nn.log_softmax")),
    OpCase("binary_cross_entropy", T.binary_cross_entropy, binary_cross_entropy_ref,
           [rand(3, 4, low=0.05, high=0.95), rand(3, 4, low=0.0, high=1.0, seed=1)], ("nn.binary_cross_entropy",)),
    OpCase("binary_cross_entropy_clamped", T.binary_cross_entropy, binary_cross_entropy_ref,
           [np.array([0.0, 1.0, 1e-45, 0.5], "float32"), np.array([1.0, 0.0, 1.0, 0.25], "float32")],
           ("nn.binary_cross_entropy",), grad=False),  # the logs at -100; no finite differences at 0 and 1
    OpCase("cross_entropy_op_relax", lambda p, y: apply("nn.cross_entropy_with_logits", [p, y]),
           lambda p, y: np.asarray(-(p.astype(np.float64) * y).sum() / p.shape[0], dtype=p.dtype),
           [rand(3, 4), rand(3, 4, seed=1)], ("nn.cross_entropy_with_logits",)),
]
