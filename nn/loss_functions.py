"""torch.nn.functional's remaining losses (re-exported from nn.functional): cosine_embedding_loss,
margin_ranking_loss, triplet_margin_loss, hinge_embedding_loss, multilabel_soft_margin_loss, multi_margin_loss,
poisson_nll_loss, gaussian_nll_loss, soft_margin_loss. Each follows torch's formula (the same eps, clamps and
masks), composed of tracer primitives, so values and gradients are torch's eagerly, traced and with backward().

>>> import tracer
>>> margin_ranking_loss(tracer.tensor([1.0, 0.0]), tracer.tensor([0.0, 1.0]), tracer.tensor([1.0, 1.0])).item()
0.5
"""
from __future__ import annotations

import math

import tracer
from tracer import Tensor

_REDUCTIONS = ("mean", "sum", "none")


def _tensor(x) -> Tensor:
    return x if isinstance(x, Tensor) else tracer.tensor(x)


def reduce(fn: str, losses: Tensor, reduction: str) -> Tensor:
    if reduction == "mean":
        return tracer.mean(losses)
    if reduction == "sum":
        return tracer.sum(losses)
    if reduction == "none":
        return losses
    raise ValueError(f"{fn}: reduction must be one of {_REDUCTIONS}, got {reduction!r}")


def _relu(x: Tensor) -> Tensor:
    return tracer.where(x > 0, x, 0.0)  # torch's clamp_min(0): gradient 0 at 0


def cosine_embedding_loss(input1, input2, target, margin: float = 0.0, reduction: str = "mean") -> Tensor:
    """1 - cos(x1, x2) where target is 1, max(0, cos(x1, x2) - margin) where it is -1 (cos with torch's 1e-12
    added to each squared norm); (N, D) inputs with (N,) targets, or (D,) with a 0-d target."""
    x1, x2, y = _tensor(input1), _tensor(input2), _tensor(target)
    if x1.shape != x2.shape or x1.ndim not in (1, 2) or y.shape != x1.shape[:-1]:
        raise RuntimeError(f"cosine_embedding_loss: expected inputs of the same shape (N, D) or (D,) and a target "
                           f"(N,) or 0-d, got {x1.shape}, {x2.shape} and {y.shape}")
    eps = 1e-12
    prod = tracer.sum(x1 * x2, axis=-1)
    denom = tracer.sqrt((tracer.sum(x1 * x1, axis=-1) + eps) * (tracer.sum(x2 * x2, axis=-1) + eps))
    cos = prod / denom
    losses = tracer.where(y == 1, 1.0 - cos, 0.0) + tracer.where(y == -1, _relu(cos - margin), 0.0)
    return reduce("cosine_embedding_loss", losses, reduction)


def margin_ranking_loss(input1, input2, target, margin: float = 0.0, reduction: str = "mean") -> Tensor:
    """max(0, -target * (x1 - x2) + margin)."""
    x1, x2, y = _tensor(input1), _tensor(input2), _tensor(target)
    return reduce("margin_ranking_loss", _relu(-y * (x1 - x2) + margin), reduction)


def hinge_embedding_loss(input, target, margin: float = 1.0, reduction: str = "mean") -> Tensor:  # noqa: A002
    """x where target is 1, max(0, margin - x) where it is -1 (torch's masks: each term where target != -1 / 1)."""
    x, y = _tensor(input), _tensor(target)
    losses = tracer.where(y != 1, _relu(margin - x), 0.0) + tracer.where(y != -1, x, 0.0)
    return reduce("hinge_embedding_loss", losses, reduction)


def soft_margin_loss(input, target, reduction: str = "mean") -> Tensor:  # noqa: A002
    """log(1 + exp(-target * x)), as -log_sigmoid(target * x) (finite for every x)."""
    x, y = _tensor(input), _tensor(target)
    return reduce("soft_margin_loss", -tracer.log_sigmoid(y * x), reduction)


def multilabel_soft_margin_loss(input, target, weight=None, reduction: str = "mean") -> Tensor:  # noqa: A002
    """-(t * log_sigmoid(x) + (1 - t) * log_sigmoid(-x)), times weight, averaged over the classes (last axis)."""
    x, y = _tensor(input), _tensor(target)
    losses = -(y * tracer.log_sigmoid(x) + (1.0 - y) * tracer.log_sigmoid(-x))
    if weight is not None:
        losses = losses * _tensor(weight)
    return reduce("multilabel_soft_margin_loss", tracer.sum(losses, axis=-1) / x.shape[-1], reduction)


def multi_margin_loss(input, target, p: int = 1, margin: float = 1.0, weight=None,  # noqa: A002
                      reduction: str = "mean") -> Tensor:
    """sum over j != y of max(0, margin - x[y] + x[j])**p / C (times weight[y]), for (N, C) or (C,) input."""
    if p not in (1, 2):
        raise ValueError(f"multi_margin_loss: only p == 1 and p == 2 supported, got {p}")
    x, y = _tensor(input), _tensor(target)
    if x.ndim not in (1, 2) or y.shape != x.shape[:-1]:
        raise RuntimeError(f"multi_margin_loss: expected input (N, C) with target (N,), or (C,) with a 0-d target, "
                           f"got {x.shape} and {y.shape}")
    classes = x.shape[-1]
    onehot = tracer.expand_dims(y, -1) == tracer.arange(classes, dtype=y.dtype)
    picked = tracer.sum(tracer.where(onehot, x, 0.0), axis=-1, keepdims=True)
    z = _relu(margin - picked + x)
    z = z * z if p == 2 else z
    if weight is not None:
        z = z * tracer.expand_dims(tracer.take(_tensor(weight), y, axis=0), -1)
    losses = tracer.sum(tracer.where(onehot, 0.0, z), axis=-1) / classes
    return reduce("multi_margin_loss", losses, reduction)


def poisson_nll_loss(input, target, log_input: bool = True, full: bool = False, eps: float = 1e-8,  # noqa: A002
                     reduction: str = "mean") -> Tensor:
    """exp(x) - t * x (log_input), or x - t * log(x + eps); full adds Stirling's t log t - t + log(2 pi t) / 2
    where t > 1, as torch's."""
    x, t = _tensor(input), _tensor(target)
    losses = tracer.exp(x) - t * x if log_input else x - t * tracer.log(x + eps)
    if full:
        safe = tracer.where(t > 1, t, 1.0)
        stirling = safe * tracer.log(safe) - safe + 0.5 * tracer.log(safe * (2 * math.pi))
        losses = losses + tracer.where(t > 1, stirling, 0.0)
    return reduce("poisson_nll_loss", losses, reduction)


def gaussian_nll_loss(input, target, var, full: bool = False, eps: float = 1e-6,  # noqa: A002
                      reduction: str = "mean") -> Tensor:
    """(log(max(var, eps)) + (x - t)**2 / max(var, eps)) / 2 (+ log(2 pi) / 2 when full), as torch's: var is
    shaped like the input, or like it without its last axis (one variance per sample), or with a last axis of 1;
    the clamp at eps passes the gradient through unchanged (torch clamps under no_grad)."""
    x, t = _tensor(input), _tensor(target)
    var = tracer.full(x.shape, float(var), x.dtype) if not isinstance(var, Tensor) and isinstance(var, (int, float)) \
        else _tensor(var)
    if var.shape != x.shape:
        if x.shape[:-1] == var.shape:
            var = tracer.expand_dims(var, -1)
        elif not (x.shape[:-1] == var.shape[:-1] and var.shape[-1:] == (1,)):
            raise ValueError(f"gaussian_nll_loss: var is of incorrect size: {var.shape} for input {x.shape}")
    if reduction not in _REDUCTIONS:
        raise ValueError(f"gaussian_nll_loss: {reduction} is not a valid value for reduction")
    if var._var is None and bool((var.numpy() < 0).any()):
        raise ValueError("gaussian_nll_loss: var has negative entry/entries")
    clamped = var + tracer.stop_gradient(tracer.maximum(var, eps) - var)
    losses = 0.5 * (tracer.log(clamped) + (x - t) * (x - t) / clamped)
    if full:
        losses = losses + 0.5 * math.log(2 * math.pi)
    return reduce("gaussian_nll_loss", losses, reduction)


def pairwise_distance(x1, x2, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False) -> Tensor:
    """||x1 - x2 + eps||_p over the last axis, as torch's."""
    d = _tensor(x1) - _tensor(x2) + eps
    if p == 2:
        return tracer.sqrt(tracer.sum(d * d, axis=-1, keepdims=keepdim))
    if p == 1:
        return tracer.sum(tracer.abs(d), axis=-1, keepdims=keepdim)
    return tracer.power(tracer.sum(tracer.power(tracer.abs(d), p), axis=-1, keepdims=keepdim), 1.0 / p)


def triplet_margin_loss(anchor, positive, negative, margin: float = 1.0, p: float = 2, eps: float = 1e-6,
                        swap: bool = False, reduction: str = "mean") -> Tensor:
    """max(0, margin + d(anchor, positive) - d(anchor, negative)), d the pairwise_distance; swap takes the smaller
    of d(anchor, negative) and d(positive, negative), as torch's."""
    a, pos, neg = _tensor(anchor), _tensor(positive), _tensor(negative)
    if not (a.ndim == pos.ndim == neg.ndim) or a.ndim not in (1, 2):
        raise RuntimeError(f"triplet_margin_loss: expected anchor, positive and negative all 1-d or all 2-d, got "
                           f"shapes {a.shape}, {pos.shape} and {neg.shape}")
    d_pos = pairwise_distance(a, pos, p, eps)
    d_neg = pairwise_distance(a, neg, p, eps)
    if swap:
        d_neg = tracer.minimum(d_neg, pairwise_distance(pos, neg, p, eps))
    return reduce("triplet_margin_loss", _relu(d_pos - d_neg + margin), reduction)


__all__ = ["cosine_embedding_loss", "gaussian_nll_loss", "hinge_embedding_loss", "margin_ranking_loss",
           "multi_margin_loss", "multilabel_soft_margin_loss", "pairwise_distance", "poisson_nll_loss",
           "soft_margin_loss", "triplet_margin_loss"]
