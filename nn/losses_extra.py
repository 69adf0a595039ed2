"""The remaining torch.nn loss modules: CosineEmbeddingLoss, MarginRankingLoss, TripletMarginLoss,
HingeEmbeddingLoss, MultiLabelSoftMarginLoss, MultiMarginLoss, PoissonNLLLoss, GaussianNLLLoss, SoftMarginLoss and
CTCLoss, with torch's constructor signatures (the deprecated size_average / reduce mapped to a reduction as
torch's); each calls its function in nn/loss_functions.py or nn/ctc.py."""
from __future__ import annotations

from . import loss_functions as LF
from .ctc import ctc_loss
from .losses import _Loss, _optional_tensor


def _legacy(size_average, reduce, reduction: str) -> str:
    """torch's _Reduction.legacy_get_string: reduce=False is "none", else size_average=False is "sum"."""
    if size_average is None and reduce is None:
        return reduction
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    return "none" if not reduce else "mean" if size_average else "sum"


class _Margin(_Loss):
    _default = 0.0

    def __init__(self, margin: float | None = None, size_average=None, reduce=None, reduction: str = "mean"):
        super().__init__(_legacy(size_average, reduce, reduction))
        self.margin = self._default if margin is None else margin


class CosineEmbeddingLoss(_Margin):
    """F.cosine_embedding_loss(input1, input2, target, margin)."""

    def forward(self, input1, input2, target):
        return LF.cosine_embedding_loss(input1, input2, target, self.margin, self.reduction)


class MarginRankingLoss(_Margin):
    """F.margin_ranking_loss(input1, input2, target, margin)."""

    def forward(self, input1, input2, target):
        return LF.margin_ranking_loss(input1, input2, target, self.margin, self.reduction)


class HingeEmbeddingLoss(_Margin):
    """F.hinge_embedding_loss(input, target, margin=1.0)."""

    _default = 1.0

    def forward(self, input, target):  # noqa: A002
        return LF.hinge_embedding_loss(input, target, self.margin, self.reduction)


class SoftMarginLoss(_Loss):
    """F.soft_margin_loss(input, target)."""

    def __init__(self, size_average=None, reduce=None, reduction: str = "mean"):
        super().__init__(_legacy(size_average, reduce, reduction))

    def forward(self, input, target):  # noqa: A002
        return LF.soft_margin_loss(input, target, self.reduction)


class MultiLabelSoftMarginLoss(_Loss):
    """F.multilabel_soft_margin_loss(input, target, weight)."""

    def __init__(self, weight=None, size_average=None, reduce=None, reduction: str = "mean"):
        super().__init__(_legacy(size_average, reduce, reduction))
        self.weight = _optional_tensor(weight)

    def forward(self, input, target):  # noqa: A002
        return LF.multilabel_soft_margin_loss(input, target, self.weight, self.reduction)


class MultiMarginLoss(_Loss):
    """F.multi_margin_loss(input, target, p, margin, weight)."""

    def __init__(self, p: int = 1, margin: float = 1.0, weight=None, size_average=None, reduce=None,
                 reduction: str = "mean"):
        super().__init__(_legacy(size_average, reduce, reduction))
        if p not in (1, 2):
            raise ValueError("MultiMarginLoss: only p == 1 and p == 2 supported")
        self.p, self.margin, self.weight = p, margin, _optional_tensor(weight)

    def forward(self, input, target):  # noqa: A002
        return LF.multi_margin_loss(input, target, self.p, self.margin, self.weight, self.reduction)


class TripletMarginLoss(_Loss):
    """F.triplet_margin_loss(anchor, positive, negative, margin, p, eps, swap)."""

    def __init__(self, margin: float = 1.0, p: float = 2.0, eps: float = 1e-6, swap: bool = False,
                 size_average=None, reduce=None, reduction: str = "mean"):
        super().__init__(_legacy(size_average, reduce, reduction))
        if margin <= 0:
            raise ValueError(f"TripletMarginLoss: expected margin to be greater than 0, got {margin} instead")
        self.margin, self.p, self.eps, self.swap = margin, p, eps, swap

    def forward(self, anchor, positive, negative):
        return LF.triplet_margin_loss(anchor, positive, negative, self.margin, self.p, self.eps, self.swap,
                                      self.reduction)


class PoissonNLLLoss(_Loss):
    """F.poisson_nll_loss(log_input, target, log_input, full, eps)."""

    def __init__(self, log_input: bool = True, full: bool = False, size_average=None, eps: float = 1e-8,
                 reduce=None, reduction: str = "mean"):
        super().__init__(_legacy(size_average, reduce, reduction))
        self.log_input, self.full, self.eps = log_input, full, eps

    def forward(self, log_input, target):
        return LF.poisson_nll_loss(log_input, target, self.log_input, self.full, self.eps, self.reduction)


class GaussianNLLLoss(_Loss):
    """F.gaussian_nll_loss(input, target, var, full, eps)."""

    def __init__(self, *, full: bool = False, eps: float = 1e-6, reduction: str = "mean"):
        super().__init__(reduction)
        self.full, self.eps = full, eps

    def forward(self, input, target, var):  # noqa: A002
        return LF.gaussian_nll_loss(input, target, var, self.full, self.eps, self.reduction)


class CTCLoss(_Loss):
    """F.ctc_loss(log_probs, targets, input_lengths, target_lengths, blank, zero_infinity)."""

    def __init__(self, blank: int = 0, reduction: str = "mean", zero_infinity: bool = False):
        super().__init__(reduction)
        self.blank, self.zero_infinity = blank, zero_infinity

    def forward(self, log_probs, targets, input_lengths, target_lengths):
        return ctc_loss(log_probs, targets, input_lengths, target_lengths, self.blank, self.reduction,
                        self.zero_infinity)


__all__ = ["CTCLoss", "CosineEmbeddingLoss", "GaussianNLLLoss", "HingeEmbeddingLoss", "MarginRankingLoss",
           "MultiLabelSoftMarginLoss", "MultiMarginLoss", "PoissonNLLLoss", "SoftMarginLoss", "TripletMarginLoss"]
