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
from tracer import Tensor, gelu, relu, sigmoid, tanh  # noqa: F401  (re-exported as F.relu, ...)

_REDUCTIONS = ("mean", "sum", "none")


def _tensor(x) -> Tensor:
    return x if isinstance(x, Tensor) else tracer.tensor(x)


def _check_reduction(reduction: str) -> None:
    if reduction not in _REDUCTIONS:
        raise ValueError(f"reduction must be one of {_REDUCTIONS}, got {reduction!r}")


def softmax(x, axis: int = -1) -> Tensor:
    return tracer.softmax(_tensor(x), axis=axis)


def log_softmax(x, axis: int = -1) -> Tensor:
    return tracer.log_softmax(_tensor(x), axis=axis)


def dropout(x, p: float = 0.5, training: bool = True, seed: int | None = None) -> Tensor:
    """Zero each element with probability p and scale the rest by 1 / (1 - p); identity when not training."""
    return tracer.dropout(_tensor(x), p, seed=seed, training=training)


def linear(x, weight, bias=None) -> Tensor:
    """x @ weight.T + bias, with weight laid out (out_features, in_features) as in PyTorch."""
    y = tracer.matmul(_tensor(x), tracer.permute_dims(weight, [1, 0]))
    return y if bias is None else y + bias


def layer_norm(x, weight=None, bias=None, eps: float = 1e-5) -> Tensor:
    """Normalise over the last axis, then scale and shift."""
    return tracer.layer_norm(_tensor(x), weight, bias, eps=eps)


def nll_loss(logp, targets, ignore_index: int = -100, reduction: str = "mean") -> Tensor:
    """Negative log-likelihood of integer targets under log-probabilities `logp` (N, C)."""
    _check_reduction(reduction)
    return tracer.nll_loss(_tensor(logp), _tensor(targets), reduction=reduction, ignore_index=ignore_index)


def cross_entropy(logits, labels, ignore_index: int = -100, reduction: str = "mean") -> Tensor:
    """Softmax cross-entropy in torch's layout: logits (N, C, d1, ...) or (C,), with integer labels
    (N, d1, ...) or (), or class probabilities shaped like the logits. The class axis is 1 (0 for (C,)).

    With integer labels this is nll_loss(log_softmax(logits, axis=1), labels), as torch's; with probabilities
    it is -sum(labels * log_softmax(logits, axis=1), axis=1), reduced (ignore_index does not apply).
    torch's `weight` and `label_smoothing` arguments are not supported (passing them is a TypeError); for
    label smoothing, pass probabilities: (1 - eps) * one_hot(labels, C) + eps / C.
    """
    _check_reduction(reduction)
    logits = _tensor(logits)
    axis = 1 if logits.ndim > 2 else -1  # torch's class axis, the one nll_loss picks from (-1 when last)
    logp = log_softmax(logits, axis=axis)
    labels = _tensor(labels)
    if labels.dtype not in ("int32", "int64"):
        if labels.shape != logp.shape:
            raise ValueError(f"cross_entropy: float labels must be class probabilities shaped like the logits "
                             f"{logp.shape}, got {labels.shape}; integer class labels must be int32 or int64")
        losses = -tracer.sum(logp * labels, axis=axis)
        return _reduce(losses, reduction)
    return nll_loss(logp, labels, ignore_index=ignore_index, reduction=reduction)


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
    diff = _tensor(pred) - target
    return _reduce(diff * diff, reduction)


def _reduce(losses: Tensor, reduction: str) -> Tensor:
    if reduction == "mean":
        return tracer.mean(losses)
    if reduction == "sum":
        return tracer.sum(losses)
    return losses


def one_hot(labels, num_classes: int, dtype: str = "float32") -> Tensor:
    """(…,) integer labels -> (…, num_classes) one-hot rows, built by comparison (no scatter needed)."""
    labels = _tensor(labels)
    classes = tracer.tensor(np.arange(num_classes, dtype=labels.dtype))
    return tracer.astype(tracer.expand_dims(labels, -1) == classes, dtype)


def conv2d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups: int = 1) -> Tensor:
    return tracer.conv2d(_tensor(x), weight, bias, stride=stride, padding=padding, dilation=dilation, groups=groups)


def max_pool2d(x, kernel_size, stride=None, padding=0) -> Tensor:
    return tracer.max_pool2d(_tensor(x), kernel_size, stride=stride, padding=padding)


def avg_pool2d(x, kernel_size, stride=None, padding=0) -> Tensor:
    return tracer.avg_pool2d(_tensor(x), kernel_size, stride=stride, padding=padding)


__all__ = ["avg_pool2d", "binary_cross_entropy_with_logits", "conv2d", "cross_entropy", "dropout", "gelu",
           "layer_norm", "linear", "log_softmax", "logsigmoid", "max_pool2d", "mse_loss", "nll_loss", "one_hot",
           "relu", "sigmoid", "softmax", "tanh"]
