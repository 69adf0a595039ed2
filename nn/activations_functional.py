"""torch.nn.functional's activations (re-exported from nn.functional): relu, leaky_relu, elu, silu, mish, softplus,
prelu, hardsigmoid, hardswish, hardtanh, relu6, selu, celu, softsign, tanhshrink, softshrink, hardshrink, threshold,
glu, softmin.

`inplace=True` (accepted wherever torch's takes it) writes the result into the input, as torch's, when the input is
a plain tensor or a traced value. torch refuses an in-place op on a leaf that requires grad, and so does tracegrad
(RuntimeError, torch's message); on a recorded non-leaf (the output of another op, with loss.backward() to come)
the result is returned out of place and the input is left as it was: the recorded backward of most of these needs
the input's old values, which torch keeps by saving the output instead. Use the returned tensor, as nn.Sequential
and every torch model do.

Each is composed of tracer primitives with `where` selects whose conditions are torch's, so the
gradient at every kink is torch's too: hardtanh, relu6, hardsigmoid, softshrink, hardshrink and threshold
pass no gradient at their breakpoints (strict inequalities), hardswish's is 0 at -3 and 1 at 3, and the
elu family's slope at 0 is that of the negative branch, alpha * scale for selu.

>>> import tracer
>>> hardtanh(tracer.tensor([-2.0, 0.5, 2.0])).numpy().tolist()
[-1.0, 0.5, 1.0]
"""
from __future__ import annotations

import tracer
from ir.types import INT_DTYPES
from tracer import Tensor
from tracer.torch_methods import torch_names

# torch's SELU constants (Klambauer et al. 2017)
SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946


def _tensor(x) -> Tensor:
    return x if isinstance(x, Tensor) else tracer.tensor(x)


def _check_float(fn: str, x: Tensor) -> Tensor:
    if not x.dtype.startswith("float"):
        raise TypeError(f"{fn}: expects a floating tensor, got {x.dtype} (as torch)")
    return x


def inplace_result(x: Tensor, y: Tensor, inplace: bool) -> Tensor:
    """y, written into x when inplace (see the module docstring for the rule on tensors that require grad)."""
    if not inplace:
        return y
    if x._var is None and tracer.is_grad_enabled() and x.requires_grad:
        if x.is_leaf:
            raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
        return y
    return x.copy_(y)


def relu(input, inplace: bool = False) -> Tensor:  # noqa: A002
    """max(input, 0), gradient 0 at 0 (torch's)."""
    x = _tensor(input)
    return inplace_result(x, tracer.relu(x), inplace)


def silu(input, inplace: bool = False) -> Tensor:  # noqa: A002
    """input * sigmoid(input)."""
    x = _tensor(input)
    return inplace_result(x, tracer.silu(x), inplace)


def leaky_relu(input, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:  # noqa: A002
    """input where input > 0, else negative_slope * input (slope negative_slope at 0, as torch's)."""
    x = _tensor(input)
    return inplace_result(x, tracer.where(x > 0, x, x * negative_slope), inplace)


def elu(input, alpha: float = 1.0, inplace: bool = False) -> Tensor:  # noqa: A002
    """input where input > 0, else alpha * (exp(input) - 1); slope alpha at 0, as torch's."""
    x = _tensor(input)
    return inplace_result(x, _elu(x, alpha, 1.0, 1.0), inplace)


def softplus(input, beta: float = 1.0, threshold: float = 20.0) -> Tensor:  # noqa: A002
    """log(1 + exp(beta * input)) / beta, and input itself where beta * input > threshold, as torch's; written as
    max(z, 0) + log(1 + exp(-|z|)) so that exp never overflows."""
    x = _tensor(input)
    z = x * beta
    smooth = (tracer.maximum(z, 0.0) + tracer.log(tracer.exp(-tracer.abs(z)) + 1.0)) * (1.0 / beta)
    return tracer.where(z > threshold, x, smooth)


def mish(input, inplace: bool = False) -> Tensor:  # noqa: A002
    """input * tanh(softplus(input))."""
    x = _tensor(input)
    return inplace_result(x, x * tracer.tanh(softplus(x)), inplace)


def prelu(input, weight) -> Tensor:  # noqa: A002
    """input where input > 0, else weight * input, with weight (1,) or one slope per channel (axis 1), as
    torch's."""
    x, w = _tensor(input), _tensor(weight)
    if w.ndim > 1:
        raise RuntimeError(f"prelu: weight must be 0-d or 1-d, got shape {w.shape}")
    n = 1 if w.ndim == 0 else w.shape[0]
    if n != 1:
        channels = x.shape[1] if x.ndim >= 2 else None
        if channels != n:
            raise RuntimeError(f"prelu: mismatch of parameter numbers and input channel size: weight has {n} "
                               f"slopes, input of shape {x.shape} has {channels} channels (axis 1)")
        w = tracer.reshape(w, (1, n) + (1,) * (x.ndim - 2))
    elif w.ndim == 1 and x.ndim == 0:
        w = tracer.reshape(w, ())
    return tracer.where(x > 0, x, x * w)


def hardtanh(input, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False) -> Tensor:  # noqa: A002
    """input limited to [min_val, max_val]; gradient 1 strictly inside, 0 at and beyond the bounds (torch's)."""
    if min_val > max_val:
        raise ValueError(f"hardtanh: min_val ({min_val}) cannot be greater than max_val ({max_val})")
    x = _tensor(input)
    if x.dtype in INT_DTYPES:  # torch keeps an integer input's dtype, its bounds taken as integers
        min_val, max_val = int(min_val), int(max_val)
    y = tracer.where(x <= min_val, min_val, tracer.where(x >= max_val, max_val, x))
    return inplace_result(x, y, inplace)


def relu6(input, inplace: bool = False) -> Tensor:  # noqa: A002
    """min(max(input, 0), 6): hardtanh(input, 0, 6), as torch's."""
    return hardtanh(input, 0.0, 6.0, inplace)


def hardsigmoid(input, inplace: bool = False) -> Tensor:  # noqa: A002
    """relu6(input + 3) / 6; gradient 1/6 strictly inside (-3, 3), else 0."""
    x = _check_float("hardsigmoid", _tensor(input))
    y = tracer.where(x <= -3.0, 0.0, tracer.where(x >= 3.0, 1.0, (x + 3.0) / 6.0))
    return inplace_result(x, y, inplace)


def hardswish(input, inplace: bool = False) -> Tensor:  # noqa: A002
    """input * relu6(input + 3) / 6; gradient x/3 + 1/2 strictly inside (-3, 3), 0 at -3 and below, 1 from 3 up
    (torch's)."""
    x = _check_float("hardswish", _tensor(input))
    y = tracer.where(x <= -3.0, 0.0, tracer.where(x < 3.0, x * (x + 3.0) / 6.0, x))
    return inplace_result(x, y, inplace)


def _elu(x: Tensor, alpha: float, scale: float, input_scale: float) -> Tensor:
    # exp sees 0 where x > 0, so a large positive x never overflows into the unused branch's gradient; a select,
    # not minimum(x, 0), whose tie at 0 would halve the slope there (torch takes the negative branch's at 0)
    positive = x > 0
    negative = (tracer.exp(tracer.where(positive, 0.0, x) * input_scale) - 1.0) * (alpha * scale)
    return tracer.where(positive, x * scale, negative)


def selu(input, inplace: bool = False) -> Tensor:  # noqa: A002
    """scale * (max(0, x) + min(0, alpha * (exp(x) - 1))) with torch's alpha and scale."""
    x = _check_float("selu", _tensor(input))
    y = _elu(x, SELU_ALPHA, SELU_SCALE, 1.0)
    return inplace_result(x, y, inplace)


def celu(input, alpha: float = 1.0, inplace: bool = False) -> Tensor:  # noqa: A002
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1)); slope 1 at 0, as torch's."""
    if alpha == 0:
        raise ValueError("celu: alpha must not be 0 (it divides x)")
    x = _check_float("celu", _tensor(input))
    y = _elu(x, alpha, 1.0, 1.0 / alpha)
    return inplace_result(x, y, inplace)


def softsign(input) -> Tensor:  # noqa: A002
    """input / (1 + |input|)."""
    x = _tensor(input)
    return x / (tracer.abs(x) + 1.0)


def tanhshrink(input) -> Tensor:  # noqa: A002
    """input - tanh(input)."""
    x = _tensor(input)
    return x - tracer.tanh(x)


def _check_lambd(fn: str, lambd: float) -> None:
    if lambd < 0:
        raise ValueError(f"{fn}: lambd must be non-negative, got {lambd}")


def softshrink(input, lambd: float = 0.5) -> Tensor:  # noqa: A002
    """input - lambd above lambd, input + lambd below -lambd, 0 between (bounds included, gradient 0 there)."""
    _check_lambd("softshrink", lambd)
    x = _check_float("softshrink", _tensor(input))
    return tracer.where(x > lambd, x - lambd, tracer.where(x < -lambd, x + lambd, 0.0))


def hardshrink(input, lambd: float = 0.5) -> Tensor:  # noqa: A002
    """input where |input| > lambd, else 0 (gradient 0 at +-lambd, as torch's)."""
    _check_lambd("hardshrink", lambd)
    x = _check_float("hardshrink", _tensor(input))
    return tracer.where(x > lambd, x, tracer.where(x < -lambd, x, 0.0))


def threshold(input, threshold: float, value: float, inplace: bool = False) -> Tensor:  # noqa: A002
    """input where input > threshold, else value (gradient 0 at the threshold, as torch's)."""
    x = _tensor(input)
    y = tracer.where(x > threshold, x, value)
    return inplace_result(x, y, inplace)


class GLUSizeError(ValueError, RuntimeError):
    """glu along a dimension of odd size: torch raises RuntimeError; a ValueError too, as before."""


@torch_names
def glu(input, axis: int = -1) -> Tensor:  # noqa: A002
    """a * sigmoid(b), where a and b are the halves of input along `axis` (torch's `dim=`; default -1)."""
    x = _tensor(input)
    if x.ndim == 0:
        raise ValueError("glu: does not support 0-d tensors")
    n = x.shape[axis % x.ndim] if -x.ndim <= axis < x.ndim else None
    if n is None:
        raise IndexError(f"glu: dim {axis} out of range for a tensor of {x.ndim} dimension(s)")
    if n % 2:
        raise GLUSizeError(f"glu: halving dimension must be even, but dimension {axis} is size {n} (shape {x.shape})")
    a, b = tracer.split(x, 2, axis=axis)
    return a * tracer.sigmoid(b)


def softmin(input, dim: int | None = None, _stacklevel: int = 3, dtype: str | None = None) -> Tensor:  # noqa: A002
    """softmax(-input, dim); dim=None takes torch's legacy choice (0 for 0-, 1- and 3-d input, else 1)."""
    x = _tensor(input)
    if dtype is not None:
        x = tracer.astype(x, dtype)
    if dim is None:
        dim = 0 if x.ndim in (0, 1, 3) else 1
    return tracer.softmax(-x, axis=dim)


__all__ = ["celu", "elu", "glu", "hardshrink", "hardsigmoid", "hardswish", "hardtanh", "leaky_relu", "mish", "prelu",
           "relu", "relu6", "selu", "silu", "softmin", "softplus", "softshrink", "softsign", "tanhshrink", "threshold"]
