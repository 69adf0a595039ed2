"""F.ctc_loss and nn.CTCLoss, as torch's: the connectionist temporal classification loss of (T, N, C) log-probs.

The loss is the log-space forward (alpha) recursion over the extended label sequence (blank, l1, blank, l2, ...,
blank), written with tracer ops and unrolled over the T time steps, so the gradient is the traced forward's:
no dedicated op, and the same code runs eagerly, in a compiled step and with loss.backward(). Impossible paths
hold a large finite negative (-1e30) rather than -inf, so logsumexp's gradient never meets inf - inf; a sample
whose whole likelihood stays there (input too short for its target) has loss inf as torch's (0 with
zero_infinity=True, with a zero gradient).

torch's gradient with respect to log_probs is exp(log_probs) - (the alignment posteriors), the gradient of the
loss with respect to the logits before a log_softmax, not the derivative with respect to log_probs itself
(which is -posteriors). tracegrad gives torch's: a term whose value is exactly 0 adds exp(log_probs) to the
gradient of each time step within the input length. Through log_softmax (the documented use) both are the same.

>>> import numpy as np, tracer
>>> lp = tracer.log_softmax(tracer.tensor(np.zeros((3, 1, 2), "float32")), axis=-1)
>>> round(ctc_loss(lp, np.array([[1]]), [3], [1], reduction="sum").item(), 4)  # 6 of the 8 paths collapse to "1"
0.2877
"""
from __future__ import annotations

import numpy as np

import tracer
from tracer import Tensor

from .loss_functions import reduce

_NEG = -1e30  # log(0) for paths that cannot happen: finite, so exp(_NEG - _NEG) is 1, never nan


def _tensor(x) -> Tensor:
    return x if isinstance(x, Tensor) else tracer.tensor(x)


def _lengths(fn: str, name: str, v, n: int) -> Tensor:
    t = _tensor(np.asarray(v, dtype="int64")) if not isinstance(v, Tensor) else v
    t = tracer.astype(tracer.reshape(t, (-1,)) if t.ndim == 0 else t, "int64")
    if t.shape != (n,):
        raise RuntimeError(f"{fn}: {name} must have one length per batch entry ({n}), got shape {t.shape}")
    return t


def _padded_targets(fn: str, targets: Tensor, target_lengths, n: int) -> Tensor:
    """1-d concatenated targets laid out (N, S) by their lengths (which must then be known values)."""
    if targets.ndim == 2:
        return targets
    if isinstance(target_lengths, Tensor) and target_lengths._var is not None or targets._var is not None:
        raise tracer.TraceError(f"{fn}: 1-d (concatenated) targets inside a trace need their values; pass targets "
                                "padded to (N, S)")
    lengths = np.asarray(target_lengths.numpy() if isinstance(target_lengths, Tensor) else target_lengths,
                         dtype="int64").reshape(-1)
    flat = targets.numpy()
    if lengths.sum() != flat.size:
        raise RuntimeError(f"{fn}: 1-d targets hold {flat.size} labels but target_lengths sum to {lengths.sum()}")
    s = max(int(lengths.max()) if lengths.size else 0, 1)
    out = np.zeros((n, s), "int64")
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    for i, (a, k) in enumerate(zip(starts, lengths, strict=True)):
        out[i, :k] = flat[a:a + k]
    return tracer.tensor(out)


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank: int = 0, reduction: str = "mean",
             zero_infinity: bool = False) -> Tensor:
    """The CTC loss of log_probs (T, N, C) (or (T, C) unbatched) against targets (N, S) padded, or 1-d
    concatenated, with input_lengths and target_lengths (N,) (tensors or sequences), as torch's F.ctc_loss.
    reduction "mean" divides each loss by its target length (at least 1), then averages over the batch."""
    fn = "ctc_loss"
    lp = _tensor(log_probs)
    unbatched = lp.ndim == 2
    if unbatched:
        lp = tracer.expand_dims(lp, 1)
    if lp.ndim != 3:
        raise RuntimeError(f"{fn}: log_probs must be (T, N, C) or (T, C), got shape {lp.shape}")
    steps, n, classes = lp.shape
    if not 0 <= blank < classes:
        raise RuntimeError(f"{fn}: blank must be in label range [0, {classes}), got {blank}")
    targets = _tensor(targets)
    if unbatched and targets.ndim == 1 and not isinstance(target_lengths, (list, tuple)) and \
            (not isinstance(target_lengths, Tensor) or target_lengths.ndim == 0):
        targets = tracer.expand_dims(targets, 0)
    targets = tracer.astype(_padded_targets(fn, targets, target_lengths, n), "int64")
    in_len = _lengths(fn, "input_lengths", input_lengths, n)
    tgt_len = _lengths(fn, "target_lengths", target_lengths, n)
    s = targets.shape[1]
    width = 2 * s + 1
    blanks = tracer.full((n, 1), blank, "int64")
    ext = tracer.concat([tracer.reshape(tracer.stack([tracer.full((n, s), blank, "int64"), targets], axis=-1),
                                        (n, 2 * s)), blanks], axis=1)  # (N, 2S + 1): blank, l1, blank, ..., blank
    lp_ext = tracer.take_along_dim(lp, tracer.broadcast_to(tracer.expand_dims(ext, 0), (steps, n, width)), dim=2)
    before2 = tracer.concat([tracer.full((n, 2), -1, "int64"), ext[:, :-2]], axis=1)
    skip = (ext != blank) & (ext != before2)  # a label may follow the previous label directly (no blank between)
    pos = tracer.expand_dims(tracer.arange(width, dtype="int64"), 0)  # (1, 2S + 1)
    tl = tracer.expand_dims(tgt_len, 1)  # (N, 1)
    neg_col = tracer.full((n, 1), _NEG, lp.dtype)
    alpha = tracer.where((pos == 0) | ((pos == 1) & (tl > 0)), lp_ext[0], _NEG)
    for t in range(1, steps):
        one = tracer.concat([neg_col, alpha[:, :-1]], axis=1)
        two = tracer.where(skip, tracer.concat([neg_col, neg_col, alpha[:, :-2]], axis=1), _NEG)
        new = tracer.logsumexp(tracer.stack([alpha, one, two]), axis=0) + lp_ext[t]
        alpha = tracer.where(tracer.expand_dims(in_len, 1) > t, new, alpha)  # past its input length a sample waits
    end = tracer.sum(tracer.where(pos == 2 * tl, alpha, 0.0), axis=1)
    before_end = tracer.where(tgt_len > 0, tracer.sum(tracer.where(pos == 2 * tl - 1, alpha, 0.0), axis=1), _NEG)
    nll = -tracer.logsumexp(tracer.stack([end, before_end]), axis=0)  # (N,)
    # torch's gradient: + exp(log_probs) at every step within the input length (the value added is exactly 0)
    probs = tracer.exp(lp)
    within = tracer.astype(tracer.expand_dims(tracer.arange(steps, dtype="int64"), 1) < tracer.expand_dims(in_len, 0),
                           lp.dtype)  # (T, N)
    nll = nll + tracer.sum(tracer.sum(probs - tracer.stop_gradient(probs), axis=2) * within, axis=0)
    impossible = nll > -_NEG / 2
    nll = tracer.where(impossible, 0.0 if zero_infinity else float("inf"), nll)
    if reduction == "mean":
        per = nll / tracer.astype(tracer.maximum(tgt_len, 1), lp.dtype)
        return tracer.mean(per)
    out = reduce(fn, nll, reduction)
    return tracer.reshape(out, ()) if unbatched and reduction == "none" else out


__all__ = ["ctc_loss"]
