"""torch's max unpooling: `F.max_unpool1d/2d` and `nn.MaxUnpool1d/2d`, the inverse of max pooling with
`return_indices=True` (torch's layout: each index is the flat position in its (N, C) plane of the unpooled
output). Built on scatter_elements, whose VJP gives the gradient (the output's gradient gathered at the
indices, as torch's).
"""
from __future__ import annotations

import tracer
from tracer import Tensor
from tracer.index_ops import scatter

from .module import Module


class UnpoolIndexError(IndexError, RuntimeError):
    """An index from outside the unpooled output (torch raises a RuntimeError; an IndexError as scatter's)."""


def _check_range(fn: str, indices, plane: int, size: tuple) -> None:
    """Eagerly, torch's 'Found an invalid max index' for an index outside the output plane (a traced index
    is checked by scatter_elements when it runs)."""
    data = indices._data if indices._var is None else None  # the concrete values (NumPy or CuPy), else None
    if data is None or data.size == 0:
        return
    bad = (data < 0) | (data >= plane)
    if bool(bad.any()):
        first = int(data[bad].ravel()[0])
        raise UnpoolIndexError(f"{fn}: Found an invalid max index: {first} (output volumes are of size "
                               f"{'x'.join(map(str, size))}); pass output_size= the pooled input's size")


def _tuple(v, n: int, fn: str, name: str) -> tuple:
    t = tuple(v) if isinstance(v, (tuple, list)) else (v,) * n
    if len(t) != n or not all(isinstance(i, int) for i in t):
        raise ValueError(f"{fn}: {name} must be an int or {n} ints, got {v!r}")
    return t


def _max_unpool(fn: str, nd: int, input, indices, kernel_size, stride, padding, output_size):  # noqa: A002
    if not isinstance(input, Tensor) or not isinstance(indices, Tensor):
        raise TypeError(f"{fn}: input and indices must be Tensors")
    if input.ndim not in (nd + 1, nd + 2):
        raise ValueError(f"{fn}: expected a {nd + 1}-d (unbatched) or {nd + 2}-d input, got shape {input.shape}")
    if indices.shape != input.shape:
        raise ValueError(f"{fn}: indices shape {indices.shape} must equal the input's shape {input.shape}")
    if indices.dtype not in ("int64", "int32"):
        raise TypeError(f"{fn}: indices must be int64 (max pooling's return_indices), got {indices.dtype}")
    k = _tuple(kernel_size, nd, fn, "kernel_size")
    s = k if stride is None else _tuple(stride, nd, fn, "stride")
    p = _tuple(padding, nd, fn, "padding")
    spatial = input.shape[-nd:]
    default = tuple((i - 1) * st - 2 * pd + ks for i, st, pd, ks in zip(spatial, s, p, k, strict=True))
    if output_size is None:
        size = default
    else:
        size = tuple(output_size)[-nd:]
        if len(size) != nd or any(not d - st < o < d + st for o, d, st in zip(size, default, s, strict=True)):
            raise ValueError(f"{fn}: output_size {tuple(output_size)} must be within a stride of {default}")
    batch = input.shape[:-nd]
    plane = 1
    for d in size:
        plane *= d
    n_in = 1
    for d in spatial:
        n_in *= d
    _check_range(fn, indices, plane, size)
    flat = tracer.reshape(input, (*batch, n_in))
    base = tracer.zeros((*batch, plane), dtype=input.dtype)
    out = scatter(base, len(batch), tracer.reshape(indices, (*batch, n_in)).astype("int64"), flat)
    return tracer.reshape(out, (*batch, *size))


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):  # noqa: A002
    """torch.nn.functional.max_unpool1d: input and indices from max_pool1d(return_indices=True)."""
    return _max_unpool("max_unpool1d", 1, input, indices, kernel_size, stride, padding, output_size)


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):  # noqa: A002
    """torch.nn.functional.max_unpool2d: input and indices from max_pool2d(return_indices=True)."""
    return _max_unpool("max_unpool2d", 2, input, indices, kernel_size, stride, padding, output_size)


class MaxUnpool1d(Module):
    """torch.nn.MaxUnpool1d(kernel_size, stride=None, padding=0); forward(input, indices, output_size=None)."""

    _nd, _fn = 1, staticmethod(max_unpool1d)

    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        name, n = type(self).__name__, self._nd  # stored as tuples, as torch's _single / _pair
        self.kernel_size = _tuple(kernel_size, n, name, "kernel_size")
        self.stride = self.kernel_size if stride is None else _tuple(stride, n, name, "stride")
        self.padding = _tuple(padding, n, name, "padding")

    def forward(self, input, indices, output_size=None):  # noqa: A002
        """Scatter input's values to the positions indices name; zeros elsewhere."""
        return self._fn(input, indices, self.kernel_size, self.stride, self.padding, output_size)

    def extra_repr(self) -> str:
        """torch's: kernel_size, stride and padding."""
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxUnpool2d(MaxUnpool1d):
    """torch.nn.MaxUnpool2d(kernel_size, stride=None, padding=0); forward(input, indices, output_size=None)."""

    _nd, _fn = 2, staticmethod(max_unpool2d)


__all__ = ["MaxUnpool1d", "MaxUnpool2d", "max_unpool1d", "max_unpool2d"]
