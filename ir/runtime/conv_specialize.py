"""Planned storage for the convolution, pooling and dropout kernels of a compiled step (issue 23, deliverable 1).

The conv family's kernels (ir.runtime.conv_kernels, numba_dropout) are called with `xp` and attributes, so the
executor ran them as generic kernels whose results it could not plan: each step allocated mnist's (64, 32, 26,
26) and (64, 64, 24, 24) activations, their gradients and the pool's and dropout's outputs anew, about 3,000
minor page faults a step. `BUILDERS` gives ir.runtime.specialize one entry per op: a callable of the arrays
alone, marked `planned`, that passes the executor's `out=` (and, for a convolution, the im2col buffer as
`scratch=`; for its input gradient, col2im's buffers; for a pool's backward, its masks) to the same kernel.
The kernels compute the same values into `out` as into their own arrays; where one cannot use `out` (a padded
input gradient, NumPy's fallbacks) it returns a new array, as `planned` allows.

Left to the generic kernels: groups > 1, other ranks, mixed or non-float dtypes, empty shapes, dropout at rate
0 (its result is x itself). A convolution's weight gradient is returned by the step, so it is never planned.
"""
from __future__ import annotations

import math

import numpy as np

from . import conv_kernels, numba_dropout

_FLOATS = ("float32", "float64")


def _same_floats(types, out) -> bool:
    return (out.dtype in _FLOATS and all(t.dtype == out.dtype for t in types) and 0 not in out.shape
            and all(0 not in t.shape for t in types))


def _call(kernel, attrs):
    def run(*arrays, out=None):
        return kernel(np, *arrays, **attrs, out=out)
    return run


def _conv(name, types, out, **attrs):
    from .specialize import planned
    if not _same_floats(types, out) or attrs.get("groups", 1) != 1 or any(t.ndim != 4 for t in types[:2]):
        return None
    kernel = conv_kernels.conv2d if name == "nn.conv2d" else conv_kernels.conv2d_bias_relu
    cols = conv_kernels.conv_columns(types[0].shape, types[1].shape, out.shape, np.dtype(out.dtype).itemsize)

    def conv(*arrays, out=None, scratch=()):
        return kernel(np, *arrays, **attrs, out=out, cols=scratch[0] if scratch else None)
    return planned(conv, scratch=[(cols, out.dtype)])


def _weight_backward(name, types, out, **attrs):
    from .specialize import planned
    if not _same_floats(types, out) or attrs.get("groups", 1) != 1 or any(t.ndim != 4 for t in types):
        return None
    g, data = types
    cols = conv_kernels.conv_columns(data.shape, out.shape, g.shape, np.dtype(out.dtype).itemsize)

    def weight_backward(g, data, out=None, scratch=()):
        return conv_kernels.conv2d_weight_backward(np, g, data, **attrs, out=out, cols=scratch[0] if scratch else None)
    return planned(weight_backward, scratch=[(cols, out.dtype)])


def _input_backward(name, types, out, **attrs):
    from .specialize import planned
    if not _same_floats(types, out) or attrs.get("groups", 1) != 1 or any(t.ndim != 4 for t in types):
        return None
    kernel = (conv_kernels.conv2d_input_backward if name == "grad.conv2d_input_backward"
              else conv_kernels.relu_conv2d_input_backward)
    sizes = conv_kernels.input_backward_work(types[0].shape, types[1].shape, out.shape, attrs["padding"],
                                             attrs["strides"], attrs["dilation"], np.dtype(out.dtype).itemsize)

    def input_backward(*arrays, out=None, scratch=()):  # col2im's widened g and column gradients from scratch
        return kernel(np, *arrays, **attrs, out=out, work=scratch if len(scratch) == 2 else None)
    return planned(input_backward, scratch=[((max(size, 1),), out.dtype) for size in sizes])


def _pool(name, types, out, **attrs):
    from .specialize import planned
    if not _same_floats(types, out) or any(t.ndim != 4 for t in types):
        return None
    kernel = _POOLS[name]
    if name == "nn.max_pool2d":
        return planned(_call(kernel, attrs))

    def pool_backward(g, data, out=None, scratch=()):  # NumPy's tiled path takes the masks from scratch
        return kernel(np, g, data, **attrs, out=out, work=scratch if len(scratch) == 5 else None)
    return planned(pool_backward, scratch=conv_kernels.pool_work(types[0].shape, out.dtype))


_POOLS = {"nn.max_pool2d": conv_kernels.max_pool2d, "grad.max_pool2d_backward": conv_kernels.max_pool2d_backward,
          "grad.relu_max_pool2d_backward": conv_kernels.relu_max_pool2d_backward}


def _dropout(name, types, out, rate):
    from .specialize import planned
    x = types[0]
    if rate == 0.0 or x.dtype not in _FLOATS or out.dtype != x.dtype or math.prod(x.shape) == 0:
        return None
    return planned(_call(numba_dropout.dropout, {"rate": rate}))


BUILDERS = {"nn.conv2d": _conv, "nn.conv2d_bias_relu": _conv, "grad.conv2d_input_backward": _input_backward,
            "grad.conv2d_weight_backward": _weight_backward,
            "grad.relu_conv2d_input_backward": _input_backward, "nn.dropout": _dropout, **dict.fromkeys(_POOLS, _pool)}

__all__ = ["BUILDERS"]
