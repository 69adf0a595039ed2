"""Stateless layers and losses, in PyTorch's spelling, built on tracer functions.

Everything here works eagerly and under tracing: nothing looks at the values of its inputs.

>>> import numpy as np, tracer
>>> logits = tracer.tensor(np.zeros((2, 4), "float32"))
>>> round(cross_entropy(logits, np.array([1, 3])).item(), 4)  # log(4)
1.3863
"""
from __future__ import annotations

import numpy as np

import tracer
from tracer import Tensor, gelu, relu, sigmoid, silu, tanh  # noqa: F401  (re-exported as F.relu, ...)
from tracer.attention import scaled_dot_product_attention  # noqa: F401  (F.scaled_dot_product_attention)
from tracer.products import normalize  # noqa: F401  (re-exported as F.normalize)
from tracer.tensor import active_trace as _active_trace
from tracer.torch_methods import torch_names

from . import layer_errors as _layer_errors
from . import pooling as _pooling
from .activations import elu, leaky_relu, mish, softplus  # noqa: F401  (re-exported as F.elu, ...)
from .activations_functional import *  # noqa: F401,F403  (hardtanh, relu6, selu, glu, softmin, ...)
from .activations_functional import __all__ as _activations
from .conv import conv1d, conv2d, conv3d, conv_transpose1d, conv_transpose2d, conv_transpose3d  # noqa: F401
from .ctc import ctc_loss  # noqa: F401  (F.ctc_loss)
from .embedding import embedding, embedding_bag  # noqa: F401  (F.embedding, F.embedding_bag)
from .loss_functions import *  # noqa: F401,F403  (cosine_embedding_loss, triplet_margin_loss, ...)
from .loss_functions import __all__ as _more_losses
from .norm_functional import __all__ as _norms
from .norm_functional import (  # noqa: F401  (re-exported as F.batch_norm, ...)
    batch_norm,
    group_norm,
    instance_norm,
    layer_norm,
    local_response_norm,
    rms_norm,
)
from .padding import pad  # noqa: F401
from .pooling import adaptive_max_pool1d, adaptive_max_pool2d, avg_pool1d, max_pool1d  # noqa: F401
from .resample import __all__ as _resample
from .resample import (  # noqa: F401
    adaptive_avg_pool1d,
    adaptive_avg_pool2d,
    adaptive_avg_pool3d,
    fold,
    interpolate,
    pixel_shuffle,
    pixel_unshuffle,
    unfold,
)

_REDUCTIONS = ("mean", "sum", "none")


def _tensor(x) -> Tensor:
    return x if isinstance(x, Tensor) else tracer.tensor(x)


def _check_reduction(reduction: str) -> None:
    if reduction not in _REDUCTIONS:
        raise ValueError(f"reduction must be one of {_REDUCTIONS}, got {reduction!r}")


@torch_names
def softmax(x, axis: int = -1) -> Tensor:
    """exp(x) normalized to sum 1 along `axis` (or torch's `dim=`)."""
    return tracer.softmax(_tensor(x), axis=axis)


@torch_names
def log_softmax(x, axis: int = -1) -> Tensor:
    """log(softmax(x)) along `axis` (or torch's `dim=`), computed stably."""
    return tracer.log_softmax(_tensor(x), axis=axis)


def dropout(x, p: float = 0.5, training: bool = True, seed: int | None = None) -> Tensor:
    """Zero each element with probability p and scale the rest by 1 / (1 - p); identity when not training."""
    return tracer.dropout(_tensor(x), p, seed=seed, training=training)


def linear(x, weight, bias=None) -> Tensor:
    """x @ weight.T + bias, with weight laid out (out_features, in_features) as in PyTorch."""
    y = tracer.matmul(_tensor(x), tracer.permute_dims(weight, [1, 0]))
    return y if bias is None else y + bias


def nll_loss(logp, targets, ignore_index: int = -100, reduction: str = "mean", weight=None) -> Tensor:
    """Negative log-likelihood of integer targets under log-probabilities `logp` (N, C, d1, ...) or (C,).

    `weight` (C,) scales each target's loss by its class's weight, and reduction "mean" then divides by the
    summed weights of the targets that are not ignore_index, as torch's.
    """
    _check_reduction(reduction)
    logp = _tensor(logp)
    if weight is None:
        return tracer.nll_loss(logp, _tensor(targets), reduction=reduction, ignore_index=ignore_index)
    losses, weights = _weighted_nll(logp, _tensor(targets), _tensor(weight), ignore_index)
    return tracer.sum(losses) / tracer.sum(weights) if reduction == "mean" else _reduce(losses, reduction)


def _class_axis(logp: Tensor) -> int:
    return 1 if logp.ndim > 2 else -1  # torch's class axis: 1, or the last (only) one for (N, C) and (C,)


def _along_classes(t: Tensor, logp: Tensor) -> Tensor:
    """(..., C) class-last `t` laid out as logp's classes: (N, d1, ..., C) -> (N, C, d1, ...)."""
    if logp.ndim <= 2:
        return t
    last = t.ndim - 1
    return tracer.permute_dims(t, [0, last] + list(range(1, last)))


def _weighted_nll(logp: Tensor, targets: Tensor, weight: Tensor, ignore_index: int) -> tuple[Tensor, Tensor]:
    """Per-target losses -weight[t] * logp[t] and the weights weight[t] (0 where ignored), by one-hot rows."""
    axis, classes = _class_axis(logp), logp.shape[_class_axis(logp)]
    if weight.shape != (classes,):
        raise ValueError(f"nll_loss: weight must have shape ({classes},), one per class, got {weight.shape}")
    valid = targets != ignore_index
    rows = one_hot(tracer.where(valid, targets, 0), classes, logp.dtype) * tracer.expand_dims(
        tracer.astype(valid, logp.dtype), -1)
    rows = _along_classes(rows, logp) * _per_class(weight, logp)
    # ignored targets selected to 0, not only weighted by 0: when every target is ignored "mean" divides by a
    # zero total weight, and the select turns that g / 0 into torch's 0 gradient (inf * 0 would be NaN)
    return tracer.where(valid, -tracer.sum(rows * logp, axis=axis), 0.0), tracer.sum(rows, axis=axis)


def _per_class(weight: Tensor, logp: Tensor) -> Tensor:
    """weight (C,) shaped to broadcast along logp's class axis."""
    return weight if logp.ndim <= 2 else tracer.reshape(weight, (1, weight.shape[0]) + (1,) * (logp.ndim - 2))


def cross_entropy(logits, labels, ignore_index: int = -100, reduction: str = "mean", weight=None,
                  label_smoothing: float = 0.0) -> Tensor:
    """Softmax cross-entropy in torch's layout: logits (N, C, d1, ...) or (C,), with integer labels
    (N, d1, ...) or (), or class probabilities shaped like the logits. The class axis is 1 (0 for (C,)).

    With integer labels this is nll_loss(log_softmax(logits, axis=1), labels, weight=weight), as torch's; with
    probabilities it is -sum(weight * labels * log_softmax(logits, axis=1), axis=1), reduced (ignore_index
    does not apply). label_smoothing=eps mixes in the uniform distribution as torch does:
    (1 - eps) * loss + eps / C * (the loss against every class, weighted).

    >>> import numpy as np, tracer
    >>> logits = tracer.tensor([[2.0, 0.0, 0.0]])
    >>> round(cross_entropy(logits, np.array([0]), label_smoothing=0.3).item(), 4)
    0.6395
    """
    _check_reduction(reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"cross_entropy: label_smoothing must be in [0, 1], got {label_smoothing}")
    logits = _tensor(logits)
    axis = _class_axis(logits)
    logp = log_softmax(logits, axis=axis)
    labels = _tensor(labels)
    weight = None if weight is None else _tensor(weight)
    classes = logp.shape[axis]
    if labels.dtype not in ("int32", "int64"):
        if labels.shape != logp.shape:
            raise ValueError(f"cross_entropy: float labels must be class probabilities shaped like the logits "
                             f"{logp.shape}, got {labels.shape}; integer class labels must be int32 or int64")
        if label_smoothing:
            labels = labels * (1.0 - label_smoothing) + label_smoothing / classes
        terms = logp * labels if weight is None else logp * labels * _per_class(weight, logp)
        return _reduce(-tracer.sum(terms, axis=axis), reduction)
    if not label_smoothing:
        return nll_loss(logp, labels, ignore_index=ignore_index, reduction=reduction, weight=weight)
    # torch's cross_entropy_loss_label_smoothing: the nll part, plus the loss against every class
    nll = nll_loss(logp, labels, ignore_index=ignore_index, reduction=reduction, weight=weight)
    kept = labels != ignore_index
    valid = tracer.astype(kept, logp.dtype)
    # a select, not a product with valid: the "mean" divides by the number kept, and when every row is ignored
    # d/d every = g / 0 = inf, which a select turns into torch's 0 gradient (inf * 0 would be NaN)
    every = tracer.where(kept, -tracer.sum(logp if weight is None else logp * _per_class(weight, logp), axis=axis),
                         0.0)
    if reduction == "mean":
        divisor = tracer.sum(valid) if weight is None else tracer.sum(_weighted_nll(logp, labels, weight,
                                                                                    ignore_index)[1])
        smooth = tracer.sum(every) / divisor
    else:
        smooth = _reduce(every, reduction)
    return nll * (1.0 - label_smoothing) + smooth * (label_smoothing / classes)


def logsigmoid(x) -> Tensor:
    """log(sigmoid(x)), finite and accurate for every logit (one primitive op, nn.log_sigmoid)."""
    return tracer.log_sigmoid(_tensor(x))


def binary_cross_entropy_with_logits(input, target, weight=None, *, reduction: str = "mean",
                                     pos_weight=None) -> Tensor:
    """Binary cross-entropy of probabilities `target` under logits `input`, as PyTorch's (deprecated
    size_average and reduce left out, so reduction and pos_weight go by keyword):

    loss = -weight * (pos_weight * target * log(sigmoid(input)) + (1 - target) * log(1 - sigmoid(input)))

    computed as (1 - target) * input - (1 + (pos_weight - 1) * target) * log_sigmoid(input), which is
    finite for every logit: the only nonlinear piece is the stable log_sigmoid primitive (log(1 - s(x))
    = log_sigmoid(x) - x), so the gradient, from the primitives' rules, is stable too.

    >>> import tracer
    >>> x = tracer.tensor([-200.0, 0.0, 200.0])
    >>> binary_cross_entropy_with_logits(x, tracer.tensor([1.0, 1.0, 0.0]), reduction="none").numpy().tolist()
    [200.0, 0.6931471824645996, 200.0]
    """
    _check_reduction(reduction)
    input, target = _tensor(input), _tensor(target)
    if input.shape != target.shape:
        raise ValueError(f"binary_cross_entropy_with_logits: target of shape {target.shape} must have the "
                         f"shape of input {input.shape}")
    log_weight = 1.0 if pos_weight is None else (_tensor(pos_weight) - 1.0) * target + 1.0
    losses = (1.0 - target) * input - log_weight * logsigmoid(input)
    if weight is not None:
        losses = losses * weight
    return _reduce(losses, reduction)


def mse_loss(pred, target, reduction: str = "mean") -> Tensor:
    """Mean (or summed, or elementwise) squared error."""
    _check_reduction(reduction)
    _layer_errors.warn_broadcast("mse_loss", pred, target)
    diff = _tensor(pred) - target
    return _reduce(diff * diff, reduction)


def l1_loss(pred, target, reduction: str = "mean") -> Tensor:
    """Mean (or summed, or elementwise) absolute error."""
    _check_reduction(reduction)
    _layer_errors.warn_broadcast("l1_loss", pred, target)
    return _reduce(tracer.abs(_tensor(pred) - target), reduction)


def smooth_l1_loss(pred, target, reduction: str = "mean", beta: float = 1.0) -> Tensor:
    """0.5 * d**2 / beta where |d| < beta, else |d| - 0.5 * beta (d = pred - target), as torch's."""
    _check_reduction(reduction)
    _layer_errors.warn_broadcast("smooth_l1_loss", pred, target)
    d = tracer.abs(_tensor(pred) - target)
    if beta == 0.0:
        return _reduce(d, reduction)
    return _reduce(tracer.where(d < beta, d * d * (0.5 / beta), d - 0.5 * beta), reduction)


def huber_loss(pred, target, reduction: str = "mean", delta: float = 1.0) -> Tensor:
    """0.5 * d**2 where |d| <= delta, else delta * (|d| - 0.5 * delta), as torch's (smooth_l1 times delta)."""
    _check_reduction(reduction)
    _layer_errors.warn_broadcast("huber_loss", pred, target)
    d = tracer.abs(_tensor(pred) - target)
    return _reduce(tracer.where(d <= delta, d * d * 0.5, (d - 0.5 * delta) * delta), reduction)


def binary_cross_entropy(probs, target, weight=None, reduction: str = "mean") -> Tensor:
    """-weight * (target * log(probs) + (1 - target) * log(1 - probs)), each log clamped at -100 as torch's,
    with torch's gradient (p - t) / max(p (1 - p), 1e-12): finite where probs is exactly 0 or 1 (one primitive,
    nn.binary_cross_entropy). Prefer binary_cross_entropy_with_logits, which is stable for every logit."""
    _check_reduction(reduction)
    probs, target = _tensor(probs), _tensor(target)
    if probs.shape != target.shape:
        raise ValueError(f"binary_cross_entropy: target of shape {target.shape} must have the shape of input "
                         f"{probs.shape}")
    if target.dtype != probs.dtype:
        target = tracer.astype(target, probs.dtype)
    losses = tracer.binary_cross_entropy(probs, target)
    return _reduce(losses if weight is None else losses * weight, reduction)


def kl_div(input, target, reduction: str = "mean", log_target: bool = False) -> Tensor:
    """Pointwise KL divergence target * (log(target) - input) of log-probabilities `input`, as torch's (0 where
    target is 0); reduction "batchmean" divides the sum by the batch size, the mathematically right mean."""
    if reduction not in _REDUCTIONS + ("batchmean",):
        raise ValueError(f"reduction must be one of {_REDUCTIONS + ('batchmean',)}, got {reduction!r}")
    input, target = _tensor(input), _tensor(target)
    if log_target:
        losses = tracer.exp(target) * (target - input)
    else:
        positive = target > 0
        losses = tracer.where(positive, target * tracer.log(tracer.where(positive, target, 1.0)), 0.0) - target * input
    if reduction == "batchmean":
        return tracer.sum(losses) / (input.shape[0] if input.ndim else 1)
    return _reduce(losses, reduction)


def _reduce(losses: Tensor, reduction: str) -> Tensor:
    if reduction == "mean":
        return tracer.mean(losses)
    if reduction == "sum":
        return tracer.sum(losses)
    return losses


def one_hot(labels, num_classes: int = -1, dtype: str = "float32") -> Tensor:
    """(…,) integer labels -> (…, num_classes) one-hot rows, built by comparison (no scatter needed).
    num_classes=-1 (torch's default) is max(labels) + 1, which needs the values (a TraceError inside a trace);
    eagerly a negative or too-large class is torch's RuntimeError (inside a trace its row stays all zeros)."""
    labels = _tensor(labels)
    data = None if labels._data is None or _active_trace() is not None else labels.numpy()
    if num_classes == -1:
        if data is None:
            raise tracer.TraceError("one_hot inside a trace: num_classes=-1 takes max(labels) + 1, a value the trace "
                                    "does not know; pass num_classes")
        num_classes = int(data.max()) + 1 if data.size else 0
    if data is not None and data.size and data.min() < 0:
        raise RuntimeError("one_hot: Class values must be non-negative.")
    if data is not None and data.size and data.max() >= num_classes:
        raise RuntimeError(f"one_hot: Class values must be smaller than num_classes ({num_classes}).")
    classes = tracer.tensor(np.arange(num_classes, dtype=labels.dtype))
    return tracer.astype(tracer.expand_dims(labels, -1) == classes, dtype)


def max_pool2d(x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """The maximum of each window of x (N, C, H, W), as torch's: stride defaults to kernel_size, padding at most
    half the window, ceil_mode=True rounds the window count up (a window starting past the input dropped);
    return_indices=True also gives torch's int64 indices (row * W + column in each plane)."""
    return _pooling.max_pool2d(_tensor(x), kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def avg_pool2d(x, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None) -> Tensor:
    """The mean of each window of x (N, C, H, W), as torch's: padded zeros counted unless count_include_pad=False
    (never the extra room of ceil_mode), or the window's sum divided by divisor_override."""
    return _pooling.avg_pool2d(_tensor(x), kernel_size, stride, padding, ceil_mode, count_include_pad,
                               divisor_override)


__all__ = ["avg_pool2d", "binary_cross_entropy", "binary_cross_entropy_with_logits", "conv2d", "cross_entropy",
           "dropout", "elu", "gelu", "huber_loss", "kl_div", "l1_loss", "layer_norm", "leaky_relu", "linear",
           "log_softmax", "logsigmoid", "max_pool2d", "mish", "mse_loss", "nll_loss", "one_hot", "relu", "sigmoid",
           "silu", "smooth_l1_loss", "softmax", "softplus", "tanh"] + _activations
__all__ += [n for n in _norms if n not in __all__]
__all__ += ["ctc_loss", "embedding", "embedding_bag"] + _more_losses
__all__ += ["normalize"]
__all__ += ["adaptive_max_pool1d", "adaptive_max_pool2d", "avg_pool1d", "conv1d", "conv3d", "conv_transpose1d",
            "conv_transpose2d", "conv_transpose3d", "max_pool1d", "pad"]
__all__ += [n for n in _resample if n[0].islower()]

from .unpool import max_unpool1d, max_unpool2d  # noqa: E402

__all__ += ["max_unpool1d", "max_unpool2d"]

def __getattr__(name: str):
    """A torch.nn.functional name tracegrad lacks: an AttributeError naming it and the nearest tracegrad
    spelling (nn/torch/hints.py)."""
    if name.startswith("__"):
        raise AttributeError(f"module 'nn.functional' has no attribute {name!r}")
    from .torch import hints

    return hints.module_getattr("nn.functional", "torch.nn.functional", globals())(name)
