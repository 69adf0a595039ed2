"""VJP rules of the elementwise family. Gradients may keep the broadcast shape: the pass sums them
back to each input's shape. Conventions follow PyTorch: relu'(0) = 0, abs'(0) = 0, and
maximum/minimum split a tie evenly."""
from __future__ import annotations

import math

from ir import Constant, const

from .registry import register_vjp


def _c(value, like):
    return const(value, like.type.dtype)


@register_vjp("add")
def add_vjp(b, call, out, g):
    """Forward: y = x1 + x2
    Backward: dx1 = g, dx2 = g"""
    return [g, g]


@register_vjp("subtract")
def subtract_vjp(b, call, out, g):
    """Forward: y = x1 - x2
    Backward: dx1 = g, dx2 = -g"""
    return [g, b.call("negative", g)]


@register_vjp("multiply")
def multiply_vjp(b, call, out, g):
    """Forward: y = x1 * x2
    Backward: dx1 = g * x2, dx2 = g * x1"""
    x1, x2 = call.args
    return [b.call("multiply", g, x2), b.call("multiply", g, x1)]


@register_vjp("divide")
def divide_vjp(b, call, out, g):
    """Forward: y = x1 / x2
    Backward: dx1 = g / x2, dx2 = -g * y / x2"""
    x1, x2 = call.args
    dx1 = b.call("divide", g, x2)
    return [dx1, b.call("negative", b.call("multiply", dx1, out))]


@register_vjp("power")
def power_vjp(b, call, out, g):
    """Forward: y = x1 ** x2
    Backward: dx1 = g * x2 * x1 ** (x2 - 1) (0 where x2 == 0), dx2 = g * y * log(x1) (0 where x1 == 0 <= x2)"""
    # PyTorch's pow_backward_self and pow_backward_exponent. Where x2 == 0, dx1 = 0 exactly, never
    # 0 * x1 ** -1 = nan at x1 = 0. A constant x2 (x ** 2) is decided here and x2 - 1 folded, so x ** 1's
    # derivatives of every order stay free of it; a constant x2 takes no gradient.
    x1, x2 = call.args
    constant = isinstance(x2, Constant)
    if constant and not x2.data.any():
        dx1 = None
    else:
        lower = const(x2.data - 1, x2.type.dtype) if constant else b.call("subtract", x2, _c(1.0, x2))
        slope = b.call("multiply", x2, b.call("power", x1, lower))
        if not constant or not x2.data.all():
            slope = b.call("where", b.call("equal", x2, _c(0.0, x2)), _c(0.0, x2), slope)
        dx1 = b.call("multiply", g, slope)
    if constant:
        return [dx1, None]
    # dx2 = g * y * log(x1), 0 where x1 == 0 and x2 >= 0 (the limit from x1 > 0); so -inf at 0 ** negative
    # (y = inf, log 0 = -inf) and NaN at a negative or -inf base (log < 0 is NaN), as PyTorch. log(x1) is
    # taken of a positive stand-in, its edge values selected, so the backward raises no RuntimeWarning.
    positive = b.call("greater", x1, _c(0.0, x1))
    zero = b.call("equal", x1, _c(0.0, x1))
    log = b.call("where", positive, b.call("log", b.call("where", positive, x1, _c(1.0, x1))),
                 b.call("where", zero, _c(-math.inf, x1), _c(math.nan, x1)))
    flat = b.call("multiply", zero, b.call("greater_equal", x2, _c(0.0, x2)))  # bool `and`
    dx2 = b.call("multiply", g, b.call("where", flat, _c(0.0, x1), b.call("multiply", out, log)))
    return [dx1, dx2]


def _tie_split(b, call, out, g, loses):
    """maximum/minimum as PyTorch: an input gets g unless it loses (then 0), and a tie gives each
    input g / 2. A NaN neither ties nor loses, so both inputs of a NaN result get g."""
    x1, x2 = call.args
    one, half, zero = _c(1.0, out), _c(0.5, out), _c(0.0, out)
    tie = b.call("equal", x1, x2)
    w1 = b.call("where", tie, half, b.call("where", b.call(loses, x1, x2), zero, one))
    w2 = b.call("where", tie, half, b.call("where", b.call(loses, x2, x1), zero, one))
    return [b.call("multiply", g, w1), b.call("multiply", g, w2)]


@register_vjp("maximum")
def maximum_vjp(b, call, out, g):
    """Forward: y = maximum(x1, x2)
    Backward: dx1 = g * [not x1 < x2] (g / 2 where x1 == x2), dx2 likewise"""
    return _tie_split(b, call, out, g, "less")


@register_vjp("minimum")
def minimum_vjp(b, call, out, g):
    """Forward: y = minimum(x1, x2)
    Backward: dx1 = g * [not x1 > x2] (g / 2 where x1 == x2), dx2 likewise"""
    return _tie_split(b, call, out, g, "greater")


@register_vjp("floor_divide")
def floor_divide_vjp(b, call, out, g):
    """Forward: y = floor(x1 / x2)
    Backward: dx1 = none, dx2 = none  (piecewise constant: zero wherever it is defined)"""
    return [None, None]


@register_vjp("floor_mod")
def floor_mod_vjp(b, call, out, g):
    """Forward: y = x1 - floor(x1 / x2) * x2
    Backward: dx1 = g, dx2 = -g * floor(x1 / x2)  (as PyTorch's remainder)"""
    x1, x2 = call.args
    return [g, b.call("negative", b.call("multiply", g, b.call("floor_divide", x1, x2)))]


@register_vjp("negative")
def negative_vjp(b, call, out, g):
    """Forward: y = -x
    Backward: dx = -g"""
    return [b.call("negative", g)]


@register_vjp("exp")
def exp_vjp(b, call, out, g):
    """Forward: y = exp(x)
    Backward: dx = g * y"""
    return [b.call("multiply", g, out)]


@register_vjp("log")
def log_vjp(b, call, out, g):
    """Forward: y = log(x)
    Backward: dx = g / x"""
    return [b.call("divide", g, call.args[0])]


@register_vjp("sqrt")
def sqrt_vjp(b, call, out, g):
    """Forward: y = sqrt(x)
    Backward: dx = g / (2 * y)"""
    return [b.call("divide", g, b.call("multiply", out, _c(2.0, out)))]


@register_vjp("rsqrt")
def rsqrt_vjp(b, call, out, g):
    """Forward: y = x ** -0.5
    Backward: dx = -0.5 * g * y ** 3"""
    cube = b.call("multiply", out, b.call("multiply", out, out))
    return [b.call("multiply", g, b.call("multiply", cube, _c(-0.5, out)))]


@register_vjp("abs")
def abs_vjp(b, call, out, g):
    """Forward: y = |x|
    Backward: dx = g * sign(x), with sign(0) = 0"""
    x = call.args[0]
    zero = _c(0.0, x)
    sign = b.call("subtract", b.call("astype", b.call("greater", x, zero), dtype=x.type.dtype),
                  b.call("astype", b.call("less", x, zero), dtype=x.type.dtype))
    return [b.call("multiply", g, sign)]


@register_vjp("sin")
def sin_vjp(b, call, out, g):
    """Forward: y = sin(x)
    Backward: dx = g * cos(x)"""
    return [b.call("multiply", g, b.call("cos", call.args[0]))]


@register_vjp("cos")
def cos_vjp(b, call, out, g):
    """Forward: y = cos(x)
    Backward: dx = -g * sin(x)"""
    return [b.call("negative", b.call("multiply", g, b.call("sin", call.args[0])))]


@register_vjp("tanh")
def tanh_vjp(b, call, out, g):
    """Forward: y = tanh(x)
    Backward: dx = g * (1 - y * y)"""
    return [b.call("multiply", g, b.call("subtract", _c(1.0, out), b.call("multiply", out, out)))]


@register_vjp("sigmoid")
def sigmoid_vjp(b, call, out, g):
    """Forward: y = sigmoid(x)
    Backward: dx = g * y * sigmoid(-x)"""
    # sigmoid(-x), not 1 - y: 1 - y rounds to 0 once y rounds to 1 (x > 17 in float32)
    flipped = b.call("sigmoid", b.call("negative", call.args[0]))
    return [b.call("multiply", g, b.call("multiply", out, flipped))]


@register_vjp("nn.log_sigmoid")
def nn_log_sigmoid_vjp(b, call, out, g):
    """Forward: y = log(sigmoid(x))
    Backward: dx = g * sigmoid(-x)"""
    return [b.call("multiply", g, b.call("sigmoid", b.call("negative", call.args[0])))]


@register_vjp("nn.relu")
def nn_relu_vjp(b, call, out, g):
    """Forward: y = max(x, 0)
    Backward: dx = g * [not y <= 0]  (0 at x = 0 and g at nan, as PyTorch), read from the output"""
    # from the output, as torch's threshold_backward: x.relu_() on a recorded result needs no value the write replaced
    return [b.call("where", b.call("less_equal", out, _c(0, out)), _c(0, out), g)]


@register_vjp("nn.silu")
def nn_silu_vjp(b, call, out, g):
    """Forward: y = x * sigmoid(x)
    Backward: dx = g * s * (1 + x * (1 - s)), s = sigmoid(x)"""
    x = call.args[0]
    s = b.call("sigmoid", x)
    inner = b.call("add", _c(1.0, x), b.call("multiply", x, b.call("subtract", _c(1.0, x), s)))
    return [b.call("multiply", g, b.call("multiply", s, inner))]


@register_vjp("nn.gelu")
def nn_gelu_vjp(b, call, out, g):
    """Forward: y = x * Phi(x)  (or its tanh approximation)
    Backward: dx = g * (Phi(x) + x * phi(x))  (or the derivative of the approximation)"""
    x = call.args[0]
    if call.attrs["approximate"] == "tanh":
        k = math.sqrt(2.0 / math.pi)
        x2 = b.call("multiply", x, x)
        inner = b.call("multiply", _c(k, x), b.call("add", x, b.call("multiply", _c(0.044715, x),
                                                                           b.call("multiply", x2, x))))
        dinner = b.call("multiply", _c(k, x), b.call("add", _c(1.0, x), b.call("multiply", _c(3 * 0.044715, x), x2)))
        t = b.call("tanh", inner)
        # emitted in the order that lets each temporary die soonest (x2, then sech2 and dinner): the values
        # are the same products, and a transformer block's backward holds two fewer full-size arrays
        slope = b.call("multiply", b.call("subtract", _c(1.0, x), b.call("multiply", t, t)), dinner)
        left = b.call("multiply", _c(0.5, x), b.call("add", _c(1.0, x), t))
        right = b.call("multiply", b.call("multiply", _c(0.5, x), x), slope)
        return [b.call("multiply", g, b.call("add", left, right))]
    phi = b.call("multiply", _c(1.0 / math.sqrt(2.0 * math.pi), x),
                 b.call("exp", b.call("multiply", _c(-0.5, x), b.call("multiply", x, x))))
    cdf = _normal_cdf(b, x)
    return [b.call("multiply", g, b.call("add", cdf, b.call("multiply", x, phi)))]


def _normal_cdf(b, x):
    """Phi(x) = 0.5 * (1 + erf(x / sqrt 2)). There is no erf op, so use Phi(x) = gelu(x) / x where
    x != 0 (one rounding of relative error) and Phi(0) = 0.5."""
    nonzero = b.call("not_equal", x, _c(0.0, x))
    safe_x = b.call("where", nonzero, x, _c(1.0, x))
    ratio = b.call("divide", b.call("nn.gelu", safe_x, approximate="none"), safe_x)
    return b.call("where", nonzero, ratio, _c(0.5, x))


@register_vjp("where")
def where_vjp(b, call, out, g):
    """Forward: y = where(c, x1, x2)
    Backward: dc = none, dx1 = where(c, g, 0), dx2 = where(c, 0, g)"""
    c = call.args[0]
    zero = _c(0.0, out)
    return [None, b.call("where", c, g, zero), b.call("where", c, zero, g)]


@register_vjp("astype")
def astype_vjp(b, call, out, g):
    """Forward: y = astype(x, dtype)
    Backward: dx = astype(g, x.dtype)  (none for non-floating x)"""
    x = call.args[0]
    if not x.type.is_float:
        return [None]
    return [b.call("astype", g, dtype=x.type.dtype)]
