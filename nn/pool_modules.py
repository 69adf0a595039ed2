"""torch's pooling modules beyond nn.layers' MaxPool2d / AvgPool2d: 1-d pools, return_indices, adaptive pools."""
from __future__ import annotations

from . import pooling as P
from . import resample as R
from .conv import ntuple
from .module import Module


def _check(name: str, nd: int, kernel_size, stride, padding, dilation=1) -> None:
    """torch's constructor checks, each error naming the module and the argument."""
    k = ntuple(name, "kernel_size", kernel_size, nd, 1)
    if stride is not None and not (isinstance(stride, (tuple, list)) and not stride):
        ntuple(name, "stride", stride, nd, 1)
    ntuple(name, "dilation", dilation, nd, 1)
    if any(2 * p > ki for p, ki in zip(ntuple(name, "padding", padding, nd, 0), k, strict=True)):
        raise ValueError(f"{name}: padding ({padding}) must be at most half of kernel_size ({kernel_size})")


class _Pool(Module):
    def extra_repr(self) -> str:
        return ", ".join(f"{name}={getattr(self, name)}" for name in self._shown)


class MaxPool1d(_Pool):
    """torch.nn.MaxPool1d: stride defaults to kernel_size; return_indices adds torch's int64 positions."""

    _shown = ("kernel_size", "stride", "padding", "dilation", "ceil_mode")
    _nd = 1

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False, ceil_mode=False):
        super().__init__()
        _check(type(self).__name__, self._nd, kernel_size, stride, padding, dilation)
        self.kernel_size, self.stride, self.padding = kernel_size, stride or kernel_size, padding
        self.dilation = dilation
        self.return_indices, self.ceil_mode = return_indices, ceil_mode

    def forward(self, input):
        return P.max_pool1d(input, self.kernel_size, self.stride, self.padding, self.dilation, self.ceil_mode,
                            self.return_indices)


class MaxPool2d(MaxPool1d):
    """torch.nn.MaxPool2d, return_indices included (nn.layers' MaxPool2d refuses it)."""

    _nd = 2

    def forward(self, input):
        return P.max_pool2d(input, self.kernel_size, self.stride, self.padding, self.dilation, self.ceil_mode,
                            self.return_indices)


class AvgPool1d(_Pool):
    """torch.nn.AvgPool1d: stride defaults to kernel_size, padding counted unless count_include_pad=False."""

    _shown = ("kernel_size", "stride", "padding")

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
        super().__init__()
        _check(type(self).__name__, 1, kernel_size, stride, padding)
        self.kernel_size, self.stride, self.padding = kernel_size, stride or kernel_size, padding
        self.ceil_mode, self.count_include_pad = ceil_mode, count_include_pad

    def forward(self, input):
        return P.avg_pool1d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode, self.count_include_pad)


class _Adaptive(_Pool):
    _shown = ("output_size",)
    _fn = staticmethod(R.adaptive_avg_pool2d)

    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, input):
        return self._fn(input, self.output_size)


class AdaptiveAvgPool1d(_Adaptive):
    """torch.nn.AdaptiveAvgPool1d(output_size)."""

    _fn = staticmethod(R.adaptive_avg_pool1d)


class AdaptiveAvgPool2d(_Adaptive):
    """torch.nn.AdaptiveAvgPool2d(output_size): an int or a pair, None keeping that axis."""


class AdaptiveAvgPool3d(_Adaptive):
    """torch.nn.AdaptiveAvgPool3d(output_size)."""

    _fn = staticmethod(R.adaptive_avg_pool3d)


class AdaptiveMaxPool1d(_Adaptive):
    """torch.nn.AdaptiveMaxPool1d(output_size, return_indices=False)."""

    _fn = staticmethod(P.adaptive_max_pool1d)

    def __init__(self, output_size, return_indices=False):
        super().__init__(output_size)
        self.return_indices = return_indices

    def forward(self, input):
        return self._fn(input, self.output_size, self.return_indices)


class AdaptiveMaxPool2d(AdaptiveMaxPool1d):
    """torch.nn.AdaptiveMaxPool2d(output_size, return_indices=False): any output size, torch's windows."""

    _fn = staticmethod(P.adaptive_max_pool2d)


__all__ = ["AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveAvgPool3d", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d",
           "AvgPool1d", "MaxPool1d", "MaxPool2d"]
