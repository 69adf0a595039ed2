"""VJP rules of the binary_math family (ir/ops/binary_math.py), with PyTorch's formulas and edge values:
atan2's gradient at (0, 0) is 0, hypot's is NaN there, xlogy's dx is 0 at x = 0 <= y, fmin/fmax give a
tie wholly to x1, and clamp routes the gradient among x, min and max as torch's clamp_backward_min_max."""
from __future__ import annotations

from ir import Constant, const

from .registry import register_vjp


def _c(value, like):
    return const(value, like.type.dtype)


@register_vjp("atan2")
def atan2_vjp(b, call, out, g):
    """Forward: y = atan2(x1, x2)
    Backward: dx1 = g * x2 / r, dx2 = -g * x1 / r, r = x1 * x1 + x2 * x2 (taken as 1 where r == 0: 0 there)"""
    y, x = call.args
    r = b.call("add", b.call("multiply", y, y), b.call("multiply", x, x))
    r = b.call("where", b.call("equal", r, _c(0.0, r)), _c(1.0, r), r)
    return [b.call("divide", b.call("multiply", g, x), r),
            b.call("negative", b.call("divide", b.call("multiply", g, y), r))]


@register_vjp("hypot")
def hypot_vjp(b, call, out, g):
    """Forward: y = sqrt(x1 * x1 + x2 * x2)
    Backward: dx1 = g * x1 / y, dx2 = g * x2 / y  (NaN at y = 0, as torch's)"""
    x1, x2 = call.args
    return [b.call("divide", b.call("multiply", g, x1), out), b.call("divide", b.call("multiply", g, x2), out)]


@register_vjp("copysign")
def copysign_vjp(b, call, out, g):
    """Forward: y = |x1| * sign(x2)  (the sign bit of x2, -0.0 included)
    Backward: dx1 = g * y / x1 (0 where x1 == 0), dx2 = none"""
    x1 = call.args[0]
    safe = b.call("where", b.call("equal", x1, _c(0.0, x1)), _c(1.0, x1), x1)  # y = +-0 there: a 0 ratio
    return [b.call("multiply", g, b.call("divide", out, safe)), None]


def _is_nan(b, x):
    return b.call("not_equal", x, x)


def _winner(b, call, out, g, wins):
    """x1 takes g where it wins or x2 is NaN (a tie goes to x1), x2 takes g elsewhere, as torch's fmax/fmin."""
    x1, x2 = call.args
    first = b.call("bitwise_or", b.call(wins, x1, x2), _is_nan(b, x2))
    zero = _c(0.0, out)
    return [b.call("where", first, g, zero), b.call("where", first, zero, g)]


@register_vjp("fmax")
def fmax_vjp(b, call, out, g):
    """Forward: y = fmax(x1, x2)  (the larger, NaN ignored)
    Backward: dx1 = g * [x1 >= x2 or isnan(x2)], dx2 = g - dx1"""
    return _winner(b, call, out, g, "greater_equal")


@register_vjp("fmin")
def fmin_vjp(b, call, out, g):
    """Forward: y = fmin(x1, x2)  (the smaller, NaN ignored)
    Backward: dx1 = g * [x1 <= x2 or isnan(x2)], dx2 = g - dx1"""
    return _winner(b, call, out, g, "less_equal")


@register_vjp("log_add_exp")
def log_add_exp_vjp(b, call, out, g):
    """Forward: y = log(exp(x1) + exp(x2))
    Backward: dx1 = g * exp(x1 - y), dx2 = g * exp(x2 - y)"""
    x1, x2 = call.args
    return [b.call("multiply", g, b.call("exp", b.call("subtract", x, out))) for x in (x1, x2)]


@register_vjp("xlogy")
def xlogy_vjp(b, call, out, g):
    """Forward: y = x1 * log(x2)  (0 where x1 == 0 and x2 is not NaN)
    Backward: dx1 = xlogy(g, x2) (0 where x1 == 0 and x2 <= 0), dx2 = g * x1 / x2"""
    x1, x2 = call.args
    flat = b.call("bitwise_and", b.call("equal", x1, _c(0.0, x1)), b.call("less_equal", x2, _c(0.0, x2)))
    dx1 = b.call("where", flat, _c(0.0, out), b.call("xlogy", g, x2))
    return [dx1, b.call("divide", b.call("multiply", g, x1), x2)]


@register_vjp("mod")
def mod_vjp(b, call, out, g):
    """Forward: y = fmod(x1, x2) = x1 - trunc(x1 / x2) * x2
    Backward: dx1 = g, dx2 = -g * trunc(x1 / x2)"""
    x1, x2 = call.args
    return [g, b.call("negative", b.call("multiply", g, b.call("trunc", b.call("divide", x1, x2))))]


@register_vjp("heaviside")
def heaviside_vjp(b, call, out, g):
    """Forward: y = values where x == 0, else [x > 0]
    Backward: dx = none (piecewise constant), dvalues = g * [x == 0]  (torch refuses to differentiate it)"""
    x = call.args[0]
    return [None, b.call("where", b.call("equal", x, _c(0.0, x)), g, _c(0.0, out))]


@register_vjp("clamp")
def clamp_vjp(b, call, out, g):
    """Forward: y = minimum(maximum(x, lo), hi)
    Backward: dx = g * [lo <= x <= hi], dlo = g * [x < lo and lo < hi], dhi = g * [x > hi or hi < lo]"""
    x, lo, hi = call.args
    zero = _c(0.0, out)
    inside = b.call("bitwise_and", b.call("greater_equal", x, lo), b.call("less_equal", x, hi))
    grads = [b.call("where", inside, g, zero), None, None]
    if not isinstance(lo, Constant):
        below = b.call("bitwise_and", b.call("less", x, lo), b.call("less", lo, hi))
        grads[1] = b.call("where", below, g, zero)
    if not isinstance(hi, Constant):
        above = b.call("bitwise_or", b.call("greater", x, hi), b.call("less", hi, lo))
        grads[2] = b.call("where", above, g, zero)
    return grads
