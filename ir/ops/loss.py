"""Loss ops of the nn family: nll_loss (and its backward helper), cross_entropy_with_logits,
binary_cross_entropy."""
from __future__ import annotations

import contextlib

import numpy as np

from ..types import TensorType
from .common import require_float
from .registry import Attr, declare, tensor_arg

REDUCTIONS = ("mean", "sum", "none")
_NLL_ATTRS = (Attr("reduction", "str", "mean"), Attr("ignore_index", "int", -100))

# ---------------------------------------------------------------- nll_loss
# PyTorch's layout: predictions (N, C, d1, ...) with targets (N, d1, ...), or (C,) with a 0-d target;
# the class axis is 1 (0 for a single sample). "mean" divides by the number of targets that are
# not ignore_index (0/0 = nan when all are ignored, as PyTorch).


def _class_axis(ndim: int) -> int:
    return 0 if ndim == 1 else 1


def _infer_nll(op, types, reduction, ignore_index):
    pred, targets = tensor_arg(op, types, 0), tensor_arg(op, types, 1)
    require_float(op, pred, "predictions")
    if targets.dtype not in ("int32", "int64"):
        raise op.error(f"argument targets must be an integer tensor, got dtype {targets.dtype}")
    if pred.ndim == 0:
        raise op.error("argument predictions must be (C,) or (N, C, ...), got a 0-d tensor")
    want = () if pred.ndim == 1 else pred.shape[:1] + pred.shape[2:]
    if targets.shape != want:
        raise op.error(f"argument targets of shape {targets.shape} does not fit predictions of shape "
                       f"{pred.shape}: expected targets of shape {want}")
    if reduction not in REDUCTIONS:
        raise op.error(f"reduction must be one of {REDUCTIONS}, got {reduction!r}")
    return TensorType(want if reduction == "none" else (), pred.dtype)


def _checked_targets(xp, pred, targets, ignore_index):
    """Targets with ignored entries replaced by 0, and the mask of entries that count."""
    valid = targets != ignore_index
    n_classes = pred.shape[_class_axis(pred.ndim)]
    bad = valid & ((targets < 0) | (targets >= n_classes))
    if bool(bad.any()):  # a silent wrap-around (target -1 reading the last class) would be a wrong answer
        raise IndexError(f"nll_loss: target {int(targets[bad].reshape(-1)[0])} out of range for "
                         f"{n_classes} classes (ignore_index={ignore_index})")
    return xp.where(valid, targets, 0), valid


def _reduce(xp, per_item, valid, reduction):
    if reduction == "none":
        return per_item
    total = per_item.sum()
    if reduction == "sum":
        return total
    count = valid.sum()
    # all targets ignored: nan, as PyTorch, without a divide-by-zero warning
    mean = total / xp.maximum(count, 1).astype(per_item.dtype)
    return xp.where(count > 0, mean, per_item.dtype.type(xp.nan))


def _nll_loss(xp, pred, targets, reduction, ignore_index):
    safe, valid = _checked_targets(xp, pred, targets, ignore_index)
    axis = _class_axis(pred.ndim)
    picked = xp.take_along_axis(pred, xp.expand_dims(safe, axis), axis=axis).squeeze(axis)
    # a select, not -picked * valid: an ignored row may hold -inf (masked logits), and -inf * 0 is nan
    return _reduce(xp, xp.where(valid, -picked, pred.dtype.type(0)), valid, reduction)


def _infer_nll_backward(op, types, reduction, ignore_index):
    g, pred = tensor_arg(op, types, 0), tensor_arg(op, types, 1)
    out = _infer_nll(op, types[1:], reduction, ignore_index)
    if g.shape != out.shape or g.dtype != out.dtype:
        raise op.error(f"argument output_grad must be {out} (the loss's type), got {g}")
    return pred


def _nll_loss_backward(xp, g, pred, targets, reduction, ignore_index):
    # d loss / d pred[n, c] = -g[n] * [c == target[n]] * valid[n] (/ count for "mean"): a one-hot
    # product, so no scatter is needed.
    safe, valid = _checked_targets(xp, pred, targets, ignore_index)
    coef = -g * valid
    if reduction == "mean":
        coef = coef / xp.maximum(valid.sum(), 1).astype(pred.dtype)  # nothing counted: all zero
    axis = _class_axis(pred.ndim)
    classes = xp.arange(pred.shape[axis]).reshape((-1,) + (1,) * (pred.ndim - axis - 1))
    one_hot = classes == xp.expand_dims(safe, axis)
    return (one_hot * xp.expand_dims(coef, axis)).astype(pred.dtype, copy=False)


declare("nn.nll_loss", ("predictions", "targets"), _NLL_ATTRS, infer=_infer_nll, kernel=_nll_loss)
declare("grad.nll_loss_backward", ("output_grad", "predictions", "targets"), _NLL_ATTRS,
        infer=_infer_nll_backward, kernel=_nll_loss_backward)

# ---------------------------------------------------------------- cross_entropy_with_logits
# Relax's semantics: -sum(predictions * labels), divided by the batch size predictions.shape[0]
# when ndim >= 2. The op applies no log_softmax itself (the tracer's cross_entropy_with_logits
# feeds it log_softmax(logits)), so its gradient is linear and needs no helper op.


def _infer_cross_entropy(op, types):
    pred, labels = tensor_arg(op, types, 0), tensor_arg(op, types, 1)
    require_float(op, pred, "predictions")
    if pred.shape != labels.shape or pred.dtype != labels.dtype:
        raise op.error(f"arguments predictions {pred} and labels {labels} must have one shape and dtype")
    return TensorType((), pred.dtype)


def _cross_entropy(xp, pred, labels):
    total = -(pred * labels).sum()
    return total / pred.dtype.type(pred.shape[0]) if pred.ndim >= 2 else total


declare("nn.cross_entropy_with_logits", ("predictions", "labels"), infer=_infer_cross_entropy,
        kernel=_cross_entropy)

# ---------------------------------------------------------------- binary_cross_entropy
# PyTorch's elementwise loss of probabilities (reduction="none"; the caller reduces):
# -(t * max(log(p), -100) + (1 - t) * max(log1p(-p), -100)). A primitive, not a composite of log and
# maximum, for its gradient: PyTorch's (p - t) / max(p * (1 - p), 1e-12) stays finite where p is exactly
# 0 or 1 (a saturated float32 sigmoid), where the composite's d log(p) / dp = 1 / 0 meets maximum's 0
# and makes NaN; and below p = 1e-12 the clamped denominator, not 1 / p, is PyTorch's slope.


def _infer_binary_cross_entropy(op, types):
    probs, target = tensor_arg(op, types, 0), tensor_arg(op, types, 1)
    require_float(op, probs, "probs")
    if probs.shape != target.shape or probs.dtype != target.dtype:
        raise op.error(f"arguments probs {probs} and target {target} must have one shape and dtype")
    return probs


def _binary_cross_entropy(xp, p, t):
    floor = p.dtype.type(-100)
    # log(0) = -inf is the edge the clamp is for: no divide-by-zero warning
    with np.errstate(divide="ignore", invalid="ignore") if xp is np else contextlib.nullcontext():
        log_p = xp.maximum(xp.log(p), floor)
        log_q = xp.maximum(xp.log1p(-p), floor)
    return ((t - p.dtype.type(1)) * log_q - t * log_p).astype(p.dtype, copy=False)


declare("nn.binary_cross_entropy", ("probs", "target"), infer=_infer_binary_cross_entropy,
        kernel=_binary_cross_entropy)
