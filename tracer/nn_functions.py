"""Neural-network functions: softmax, layer_norm, conv2d, pooling, dropout and the losses.

Arguments follow PyTorch (NCHW data, OIHW weights, int-or-tuple sizes); the IR ops take Relax's
spelling (strides, 4-element padding top/left/bottom/right, pool_size, rate).
"""
from __future__ import annotations

import numbers

import numpy as np

from .math import add, as_tensor
from .placement import place, tensor_device
from .rng import draw_seed
from .tensor import Tensor, active_trace, apply

__all__ = ["avg_pool2d", "binary_cross_entropy", "conv2d", "conv3d", "cross_entropy_with_logits", "dropout",
           "layer_norm", "log_softmax", "max_pool2d", "nll_loss", "pad", "softmax"]

# seed=None dropout draws its seeds here; eager calls and every traced step get a fresh one


def softmax(x, axis: int = -1) -> Tensor:
    """exp(x) normalized to sum 1 along `axis`.

    >>> import tracer
    >>> tracer.softmax(tracer.tensor([0.0, 0.0])).numpy().tolist()
    [0.5, 0.5]
    """
    return _scalar_as_row("nn.softmax", as_tensor(x), _int(axis, "softmax", "axis"))


def _scalar_as_row(op: str, x: Tensor, axis: int) -> Tensor:
    """op along axis; a 0-d x with axis 0 or -1 as the one-element row it is to torch (softmax(2.0) is 1.0)."""
    if x.ndim == 0 and axis in (0, -1):
        return apply("reshape", [apply(op, [apply("reshape", [x], shape=(1,))], axis=0)], shape=())
    return apply(op, [x], axis=axis)


def log_softmax(x, axis: int = -1) -> Tensor:
    """log(softmax(x, axis)), computed without forming softmax (stable for large logits)."""
    return _scalar_as_row("nn.log_softmax", as_tensor(x), _int(axis, "log_softmax", "axis"))


def layer_norm(x, weight=None, bias=None, eps: float = 1e-5) -> Tensor:
    """Normalize over the last axis to mean 0 and variance 1, then scale by weight and shift by bias."""
    x = as_tensor(x)
    if not x.ndim:
        raise ValueError("layer_norm: x must have at least one dimension, got a 0-d tensor")
    dim = x.shape[-1:]
    # None stands for the identity affine: constants of ones and zeros keep the IR to one op
    gamma = as_tensor(weight) if weight is not None else place(Tensor(np.ones(dim, dtype=x.dtype)), tensor_device(x))
    beta = as_tensor(bias) if bias is not None else place(Tensor(np.zeros(dim, dtype=x.dtype)), tensor_device(x))
    return apply("nn.layer_norm", [x, gamma, beta], axes=[-1], epsilon=float(eps))


def conv2d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups: int = 1) -> Tensor:
    """2-D cross-correlation of x (N, C, H, W) with weight (O, C/groups, kh, kw), as torch's conv2d.

    padding: int, (pad_h, pad_w) or (top, left, bottom, right).
    """
    x, weight = as_tensor(x), as_tensor(weight)
    out = apply("nn.conv2d", [x, weight], strides=_pair(stride, "conv2d", "stride"),
                padding=_padding(padding, "conv2d"), dilation=_pair(dilation, "conv2d", "dilation"),
                groups=_int(groups, "conv2d", "groups"))
    if bias is None:
        return out
    bias = as_tensor(bias)
    if bias.shape != (weight.shape[0],):
        raise ValueError(f"conv2d: bias must have shape ({weight.shape[0]},) (one per output channel), "
                         f"got {bias.shape}")
    return add(out, apply("reshape", [bias], shape=(1, bias.shape[0], 1, 1)))


def conv3d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups: int = 1) -> Tensor:
    """3-D cross-correlation of x (N, C, D, H, W) with weight (O, C/groups, kd, kh, kw), as torch's conv3d.

    padding: int, (pad_d, pad_h, pad_w) or (front, top, left, back, bottom, right).
    """
    x, weight = as_tensor(x), as_tensor(weight)
    pads = _ints(padding, 3, "conv3d", "padding")
    out = apply("nn.conv3d", [x, weight], strides=_ints(stride, 3, "conv3d", "stride"),
                padding=pads + pads if len(pads) == 3 else pads, dilation=_ints(dilation, 3, "conv3d", "dilation"),
                groups=_int(groups, "conv3d", "groups"))
    if bias is None:
        return out
    bias = as_tensor(bias)
    if bias.shape != (weight.shape[0],):
        raise ValueError(f"conv3d: bias must have shape ({weight.shape[0]},) (one per output channel), "
                         f"got {bias.shape}")
    return add(out, apply("reshape", [bias], shape=(1, bias.shape[0], 1, 1, 1)))


_PAD_MODES = ("constant", "reflect", "replicate", "circular")


def pad(x, pad, mode: str = "constant", value=None) -> Tensor:
    """torch.nn.functional.pad: `pad` lists (before, after) pairs from the last axis backwards; negative
    entries crop. constant pads any number of axes with `value`; reflect (the edge not repeated),
    replicate and circular pad the last 1, 2 or 3 axes of a 2-3, 3-4 or 4-5-d input, as torch.

    >>> import tracer
    >>> tracer.pad(tracer.tensor([1.0, 2.0, 3.0]), (2, -1), mode="constant", value=9.0).numpy().tolist()
    [9.0, 9.0, 1.0, 2.0]
    """
    x = as_tensor(x)
    if mode not in _PAD_MODES:
        raise NotImplementedError(f"pad: unrecognised padding mode {mode!r}; use one of {_PAD_MODES}")
    widths = [_int(p, "pad", "pad") for p in pad]
    if len(widths) % 2:
        raise RuntimeError(f"pad: padding length must be divisible by 2, got {len(widths)} entries {tuple(pad)}")
    axes = len(widths) // 2
    if axes > x.ndim:
        raise RuntimeError(f"pad: padding length {len(widths)} is too large for a {x.ndim}-d input of shape "
                           f"{x.shape} (at most {2 * x.ndim})")
    if mode != "constant":
        if value is not None and value != 0:
            raise RuntimeError(f"pad: padding mode {mode!r} doesn't take in value argument (got {value!r})")
        if axes not in (1, 2, 3) or x.ndim not in (axes + 1, axes + 2):
            raise NotImplementedError(f"pad: padding size {len(widths)} is not supported for a {x.ndim}-d input "
                                      f"with mode {mode!r}: sizes 2, 4, 6 pad the last 1, 2, 3 axes of a 2-3, 3-4 "
                                      f"or 4-5-d input")
    pairs = [(0, 0)] * (x.ndim - axes) + [(widths[2 * i], widths[2 * i + 1]) for i in reversed(range(axes))]
    if any(b < 0 or a < 0 for b, a in pairs):  # crop first: torch's negative pads, then pad what is left
        x = x[tuple(slice(max(0, -b), n - max(0, -a)) for (b, a), n in zip(pairs, x.shape, strict=True))]
        pairs = [(max(0, b), max(0, a)) for b, a in pairs]
    for axis, ((b, a), n) in enumerate(zip(pairs, x.shape, strict=True)):
        if mode == "reflect" and max(b, a) >= n and max(b, a):
            raise RuntimeError(f"pad: reflect padding ({b}, {a}) of axis {axis} must be less than its size {n} "
                               f"(input of shape {x.shape})")
        if mode == "circular" and max(b, a) > n:
            raise RuntimeError(f"pad: circular padding ({b}, {a}) of axis {axis} wraps around more than once "
                               f"(size {n}, input of shape {x.shape})")
    if not any(b or a for b, a in pairs):
        return x
    return apply("nn.pad", [x], pad_width=[w for pair in pairs for w in pair], pad_mode=mode,
                 pad_value=0.0 if value is None else float(value))


def max_pool2d(x, kernel_size, stride=None, padding=0, dilation=1) -> Tensor:
    """The maximum of each window (padding never wins: it is -inf)."""
    return apply("nn.max_pool2d", [as_tensor(x)], **_pool_attrs("max_pool2d", kernel_size, stride, padding, dilation))


def avg_pool2d(x, kernel_size, stride=None, padding=0) -> Tensor:
    """The mean of each window; padded zeros count in the divisor (PyTorch's count_include_pad=True)."""
    return apply("nn.avg_pool2d", [as_tensor(x)], **_pool_attrs("avg_pool2d", kernel_size, stride, padding, 1))


def dropout(x, p: float, *, seed=None, training: bool = True) -> Tensor:
    """Zero each element with probability p and scale the rest by 1 / (1 - p).

    seed=None draws a fresh mask on every call (and every step of a traced, compiled function);
    an int seed fixes the mask. Not training, or p == 0, returns x unchanged; p == 1 drops everything.

    >>> import tracer
    >>> x = tracer.ones((1000,))
    >>> y = tracer.dropout(x, 0.5, seed=0)
    >>> bool((y.numpy() == tracer.dropout(x, 0.5, seed=0).numpy()).all()), set(y.numpy().tolist())
    (True, {0.0, 2.0})
    """
    if isinstance(p, bool) or not isinstance(p, numbers.Real) or not 0.0 <= float(p) <= 1.0:
        raise ValueError(f"dropout: p must be a probability in [0, 1], got {p!r}")
    x = as_tensor(x)
    if not training or float(p) == 0.0:
        return x
    if float(p) == 1.0:  # every element dropped, as torch; no mask to draw and no gradient
        return apply("zeros_like", [x])
    if seed is None and active_trace() is not None:
        # a parameter that each call of the compiled step draws; tracing draws nothing, so a seeded run
        # gives the same masks whether its first call traced or replayed
        seed_tensor = Tensor(np.zeros((), "int64"), name="seed")
        seed_tensor._fresh_seed = True
    elif seed is None:
        seed_tensor = Tensor(draw_seed(), name="seed")
    elif isinstance(seed, Tensor):
        seed_tensor = seed
    else:
        seed_tensor = Tensor(np.asarray(_int(seed, "dropout", "seed"), dtype="int64"))
    return apply("nn.dropout", [x, seed_tensor], rate=float(p))


def nll_loss(logp, targets, reduction: str = "mean", ignore_index: int = -100) -> Tensor:
    """Negative log-likelihood of integer targets under log-probabilities logp (N, C) or (C,).

    reduction "mean" divides by the number of targets that are not ignore_index, as PyTorch.
    """
    targets = as_tensor(targets)
    return apply("nn.nll_loss", [as_tensor(logp), targets], reduction=reduction,
                 ignore_index=_int(ignore_index, "nll_loss", "ignore_index"))


def binary_cross_entropy(probs, target) -> Tensor:
    """Elementwise -(target * log(probs) + (1 - target) * log(1 - probs)), each log clamped at -100, with
    PyTorch's gradient (finite where probs is exactly 0 or 1); nn.functional.binary_cross_entropy reduces it.

    >>> import tracer
    >>> tracer.binary_cross_entropy(tracer.tensor([0.0, 0.5]), tracer.tensor([1.0, 1.0])).numpy().tolist()
    [100.0, 0.6931471824645996]
    """
    return apply("nn.binary_cross_entropy", [as_tensor(probs), as_tensor(target)])


def cross_entropy_with_logits(logits, probs) -> Tensor:
    """-sum(probs * log_softmax(logits, -1)), divided by the batch size logits.shape[0] when 2-d or more."""
    return apply("nn.cross_entropy_with_logits", [log_softmax(logits, -1), as_tensor(probs)])


# ---------------------------------------------------------------- argument normalization


def _int(v, fn: str, name: str) -> int:
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        raise TypeError(f"{fn}: {name} must be an int, got {v!r}")
    return int(v)


def _pair(v, fn: str, name: str) -> tuple[int, int]:
    if isinstance(v, numbers.Integral) and not isinstance(v, bool):
        return (int(v), int(v))
    if isinstance(v, (tuple, list)) and len(v) == 2:
        return (_int(v[0], fn, name), _int(v[1], fn, name))
    raise ValueError(f"{fn}: {name} must be an int or a pair of ints, got {v!r}")


def _ints(v, n: int, fn: str, name: str) -> tuple[int, ...]:
    """An int (repeated n times) or n ints; for padding also 2n ints (every before, then every after)."""
    if isinstance(v, numbers.Integral) and not isinstance(v, bool):
        return (int(v),) * n
    if isinstance(v, (tuple, list)) and (len(v) == n or name == "padding" and len(v) == 2 * n):
        return tuple(_int(i, fn, name) for i in v)
    raise ValueError(f"{fn}: {name} must be an int or {n} ints, got {v!r}")


def _padding(v, fn: str) -> tuple[int, int, int, int]:
    if isinstance(v, (tuple, list)) and len(v) == 4:
        return tuple(_int(p, fn, "padding") for p in v)
    try:
        h, w = _pair(v, fn, "padding")
    except ValueError:
        raise ValueError(f"{fn}: padding must be an int, (pad_h, pad_w) or (top, left, bottom, right), "
                         f"got {v!r}") from None
    return (h, w, h, w)


def _pool_attrs(fn, kernel_size, stride, padding, dilation) -> dict:
    pool_size = _pair(kernel_size, fn, "kernel_size")
    strides = pool_size if stride is None else _pair(stride, fn, "stride")
    return dict(pool_size=pool_size, strides=strides, padding=_padding(padding, fn),
                dilation=_pair(dilation, fn, "dilation"))


OPERATORS: dict = {}
METHODS = {"softmax": softmax, "log_softmax": log_softmax}
