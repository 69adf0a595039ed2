"""Loss modules, as torch.nn's: each holds its options and calls the function of the same name in
nn.functional, so `criterion = nn.CrossEntropyLoss(); loss = criterion(logits, labels)` reads as in torch.

>>> import numpy as np
>>> criterion = CrossEntropyLoss(label_smoothing=0.1)
>>> round(criterion(np.zeros((2, 4), "float32"), np.array([1, 3])).item(), 4)  # log(4) whatever the smoothing
1.3863
"""
from __future__ import annotations

import tracer

from . import functional as F
from .layer_errors import check_class_loss, check_pair_loss, explained
from .module import Module


def _optional_tensor(value):
    return value if value is None or isinstance(value, tracer.Tensor) else tracer.tensor(value)


class _Loss(Module):
    def __init__(self, reduction: str = "mean"):
        super().__init__()
        allowed = ("mean", "sum", "none") + (("batchmean",) if isinstance(self, KLDivLoss) else ())
        if reduction not in allowed:
            raise ValueError(f"{type(self).__name__}: reduction must be one of {allowed}, got {reduction!r}")
        self.reduction = reduction



class CrossEntropyLoss(_Loss):
    """F.cross_entropy(logits, target, ...) with torch's options: weight (C,), ignore_index, reduction,
    label_smoothing."""

    def __init__(self, weight=None, ignore_index: int = -100, reduction: str = "mean", label_smoothing: float = 0.0):
        super().__init__(reduction)
        self.weight, self.ignore_index, self.label_smoothing = _optional_tensor(weight), ignore_index, label_smoothing

    @explained(check_class_loss)
    def forward(self, input, target):
        return F.cross_entropy(input, target, ignore_index=self.ignore_index, reduction=self.reduction,
                               weight=self.weight, label_smoothing=self.label_smoothing)


class NLLLoss(_Loss):
    """F.nll_loss(log_probs, target, ...) with torch's options: weight (C,), ignore_index, reduction."""

    def __init__(self, weight=None, ignore_index: int = -100, reduction: str = "mean"):
        super().__init__(reduction)
        self.weight, self.ignore_index = _optional_tensor(weight), ignore_index

    @explained(check_class_loss)
    def forward(self, input, target):
        return F.nll_loss(input, target, ignore_index=self.ignore_index, reduction=self.reduction, weight=self.weight)


class MSELoss(_Loss):
    """Squared error, reduced."""

    @explained(check_pair_loss)
    def forward(self, input, target):
        return F.mse_loss(input, target, reduction=self.reduction)


class L1Loss(_Loss):
    """Absolute error, reduced."""

    @explained(check_pair_loss)
    def forward(self, input, target):
        return F.l1_loss(input, target, reduction=self.reduction)


class SmoothL1Loss(_Loss):
    """Squared error below `beta`, absolute error above it (F.smooth_l1_loss)."""

    def __init__(self, reduction: str = "mean", beta: float = 1.0):
        super().__init__(reduction)
        self.beta = beta

    @explained(check_pair_loss)
    def forward(self, input, target):
        return F.smooth_l1_loss(input, target, reduction=self.reduction, beta=self.beta)


class HuberLoss(_Loss):
    """Squared error below `delta`, delta-scaled absolute error above it (F.huber_loss)."""

    def __init__(self, reduction: str = "mean", delta: float = 1.0):
        super().__init__(reduction)
        self.delta = delta

    @explained(check_pair_loss)
    def forward(self, input, target):
        return F.huber_loss(input, target, reduction=self.reduction, delta=self.delta)


class BCEWithLogitsLoss(_Loss):
    """Binary cross-entropy of logits (F.binary_cross_entropy_with_logits), with weight and pos_weight."""

    def __init__(self, weight=None, reduction: str = "mean", pos_weight=None):
        super().__init__(reduction)
        self.weight, self.pos_weight = _optional_tensor(weight), _optional_tensor(pos_weight)

    @explained(check_pair_loss)
    def forward(self, input, target):
        return F.binary_cross_entropy_with_logits(input, target, self.weight, reduction=self.reduction,
                                                  pos_weight=self.pos_weight)


class BCELoss(_Loss):
    """Binary cross-entropy of probabilities (F.binary_cross_entropy), with weight."""

    def __init__(self, weight=None, reduction: str = "mean"):
        super().__init__(reduction)
        self.weight = _optional_tensor(weight)

    @explained(check_pair_loss)
    def forward(self, input, target):
        return F.binary_cross_entropy(input, target, self.weight, reduction=self.reduction)


class KLDivLoss(_Loss):
    """KL divergence of log-probabilities `input` from `target` (F.kl_div); reduction may be "batchmean"."""

    def __init__(self, reduction: str = "mean", log_target: bool = False):
        super().__init__(reduction)
        self.log_target = log_target

    @explained(check_pair_loss)
    def forward(self, input, target):
        return F.kl_div(input, target, reduction=self.reduction, log_target=self.log_target)


__all__ = ["BCELoss", "BCEWithLogitsLoss", "CrossEntropyLoss", "HuberLoss", "KLDivLoss", "L1Loss", "MSELoss",
           "NLLLoss", "SmoothL1Loss"]
