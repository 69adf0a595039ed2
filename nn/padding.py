"""torch's padding modules (nn.ZeroPad2d, nn.ReflectionPad1d, ...) over F.pad (tracer.pad, the nn.pad op)."""
from __future__ import annotations

import numpy as np

import tracer

from .module import Module

pad = tracer.pad  # F.pad: torch.nn.functional.pad(input, pad, mode="constant", value=None)


def _padding(name: str, padding, nd: int) -> tuple[int, ...]:
    """An int (every side) or 2 * nd ints (left, right, top, bottom, front, back), as torch's _ntuple."""
    if isinstance(padding, (int, np.integer)) and not isinstance(padding, bool):
        return (int(padding),) * (2 * nd)
    if isinstance(padding, (tuple, list)) and len(padding) == 2 * nd and all(
            isinstance(p, (int, np.integer)) and not isinstance(p, bool) for p in padding):
        return tuple(int(p) for p in padding)
    raise ValueError(f"{name}: padding must be an int or {2 * nd} ints, got {padding!r}")


class _PadNd(Module):
    mode = "constant"
    _nd = 1

    def __init__(self, padding):
        super().__init__()
        self.padding = _padding(type(self).__name__, padding, self._nd)

    def forward(self, input):
        return pad(input, self.padding, mode=self.mode)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class _ConstantPadNd(_PadNd):
    def __init__(self, padding, value: float):
        super().__init__(padding)
        self.value = value

    def forward(self, input):
        return pad(input, self.padding, mode="constant", value=self.value)

    def extra_repr(self) -> str:
        return f"padding={self.padding}, value={self.value}"


class ConstantPad1d(_ConstantPadNd):
    """Pads the last axis with `value`: padding (left, right) or an int."""


class ConstantPad2d(_ConstantPadNd):
    """Pads the last two axes with `value`: padding (left, right, top, bottom) or an int."""

    _nd = 2


class ConstantPad3d(_ConstantPadNd):
    """Pads the last three axes with `value`: padding (left, right, top, bottom, front, back) or an int."""

    _nd = 3


class ZeroPad1d(ConstantPad1d):
    """Pads the last axis with zeros."""

    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class ZeroPad2d(ConstantPad2d):
    """Pads the last two axes with zeros: padding (left, right, top, bottom) or an int.

    >>> ZeroPad2d((1, 0, 2, -1))(np.ones((1, 3, 3), "float32")).shape
    (1, 4, 4)
    """

    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class ZeroPad3d(ConstantPad3d):
    """Pads the last three axes with zeros."""

    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class ReflectionPad1d(_PadNd):
    """Pads the last 1 axis of a 2-d or 3-d input, mirrored, the edge not repeated (F.pad mode 'reflect')."""

    mode, _nd = 'reflect', 1


class ReflectionPad2d(_PadNd):
    """Pads the last 2 axes of a 3-d or 4-d input, mirrored, the edge not repeated (F.pad mode 'reflect')."""

    mode, _nd = 'reflect', 2


class ReflectionPad3d(_PadNd):
    """Pads the last 3 axes of a 4-d or 5-d input, mirrored, the edge not repeated (F.pad mode 'reflect')."""

    mode, _nd = 'reflect', 3


class ReplicationPad1d(_PadNd):
    """Pads the last 1 axis of a 2-d or 3-d input, the edge repeated (F.pad mode 'replicate')."""

    mode, _nd = 'replicate', 1


class ReplicationPad2d(_PadNd):
    """Pads the last 2 axes of a 3-d or 4-d input, the edge repeated (F.pad mode 'replicate')."""

    mode, _nd = 'replicate', 2


class ReplicationPad3d(_PadNd):
    """Pads the last 3 axes of a 4-d or 5-d input, the edge repeated (F.pad mode 'replicate')."""

    mode, _nd = 'replicate', 3


class CircularPad1d(_PadNd):
    """Pads the last 1 axis of a 2-d or 3-d input, wrapped around (F.pad mode 'circular')."""

    mode, _nd = 'circular', 1


class CircularPad2d(_PadNd):
    """Pads the last 2 axes of a 3-d or 4-d input, wrapped around (F.pad mode 'circular')."""

    mode, _nd = 'circular', 2


class CircularPad3d(_PadNd):
    """Pads the last 3 axes of a 4-d or 5-d input, wrapped around (F.pad mode 'circular')."""

    mode, _nd = 'circular', 3


__all__ = ["CircularPad1d", "CircularPad2d", "CircularPad3d", "ConstantPad1d", "ConstantPad2d", "ConstantPad3d",
           "ReflectionPad1d", "ReflectionPad2d", "ReflectionPad3d", "ReplicationPad1d", "ReplicationPad2d",
           "ReplicationPad3d", "ZeroPad1d", "ZeroPad2d", "ZeroPad3d", "pad"]
