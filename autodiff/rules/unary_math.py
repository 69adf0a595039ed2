"""VJP rules of the unary_math family (ir/ops/unary_math.py), with PyTorch's formulas, so its values at
the domain's edges too: d asin(1) = inf, d acosh(1) = inf, d erfinv(1) = inf; rounding ops (sign, round,
trunc, floor, ceil) have gradient zero, as in torch."""
from __future__ import annotations

import math

from ir import const

from .registry import register_vjp


def _c(value, like):
    return const(value, like.type.dtype)


def _scaled(b, g, value, factor):
    return b.call("multiply", g, b.call("multiply", value, _c(factor, value)))


@register_vjp("tan")
def tan_vjp(b, call, out, g):
    """Forward: y = tan(x)
    Backward: dx = g * (1 + y * y)"""
    return [b.call("multiply", g, b.call("add", _c(1.0, out), b.call("multiply", out, out)))]


def _one_minus_square(b, x):
    return b.call("subtract", _c(1.0, x), b.call("multiply", x, x))


@register_vjp("asin")
def asin_vjp(b, call, out, g):
    """Forward: y = asin(x)
    Backward: dx = g / sqrt(1 - x * x)"""
    return [b.call("divide", g, b.call("sqrt", _one_minus_square(b, call.args[0])))]


@register_vjp("acos")
def acos_vjp(b, call, out, g):
    """Forward: y = acos(x)
    Backward: dx = -g / sqrt(1 - x * x)"""
    return [b.call("negative", b.call("divide", g, b.call("sqrt", _one_minus_square(b, call.args[0]))))]


@register_vjp("atan")
def atan_vjp(b, call, out, g):
    """Forward: y = atan(x)
    Backward: dx = g / (1 + x * x)"""
    x = call.args[0]
    return [b.call("divide", g, b.call("add", _c(1.0, x), b.call("multiply", x, x)))]


@register_vjp("sinh")
def sinh_vjp(b, call, out, g):
    """Forward: y = sinh(x)
    Backward: dx = g * cosh(x)"""
    return [b.call("multiply", g, b.call("cosh", call.args[0]))]


@register_vjp("cosh")
def cosh_vjp(b, call, out, g):
    """Forward: y = cosh(x)
    Backward: dx = g * sinh(x)"""
    return [b.call("multiply", g, b.call("sinh", call.args[0]))]


@register_vjp("asinh")
def asinh_vjp(b, call, out, g):
    """Forward: y = asinh(x)
    Backward: dx = g / sqrt(x * x + 1)"""
    x = call.args[0]
    return [b.call("divide", g, b.call("sqrt", b.call("add", b.call("multiply", x, x), _c(1.0, x))))]


@register_vjp("acosh")
def acosh_vjp(b, call, out, g):
    """Forward: y = acosh(x)
    Backward: dx = g / sqrt(x * x - 1)"""
    x = call.args[0]
    return [b.call("divide", g, b.call("sqrt", b.call("subtract", b.call("multiply", x, x), _c(1.0, x))))]


@register_vjp("atanh")
def atanh_vjp(b, call, out, g):
    """Forward: y = atanh(x)
    Backward: dx = g / (1 - x * x)"""
    return [b.call("divide", g, _one_minus_square(b, call.args[0]))]


def _gauss(b, x):
    """exp(-x * x)"""
    return b.call("exp", b.call("negative", b.call("multiply", x, x)))


@register_vjp("erf")
def erf_vjp(b, call, out, g):
    """Forward: y = erf(x)
    Backward: dx = g * 2 / sqrt(pi) * exp(-x * x)"""
    return [_scaled(b, g, _gauss(b, call.args[0]), 2.0 / math.sqrt(math.pi))]


@register_vjp("erfc")
def erfc_vjp(b, call, out, g):
    """Forward: y = erfc(x) = 1 - erf(x)
    Backward: dx = -g * 2 / sqrt(pi) * exp(-x * x)"""
    return [_scaled(b, g, _gauss(b, call.args[0]), -2.0 / math.sqrt(math.pi))]


@register_vjp("erfinv")
def erfinv_vjp(b, call, out, g):
    """Forward: y = erfinv(x)
    Backward: dx = g * sqrt(pi) / 2 * exp(y * y)"""
    return [_scaled(b, g, b.call("exp", b.call("multiply", out, out)), math.sqrt(math.pi) / 2.0)]


@register_vjp("log2")
def log2_vjp(b, call, out, g):
    """Forward: y = log2(x)
    Backward: dx = g / (x * ln 2)"""
    x = call.args[0]
    return [b.call("divide", g, b.call("multiply", x, _c(math.log(2.0), x)))]


@register_vjp("log10")
def log10_vjp(b, call, out, g):
    """Forward: y = log10(x)
    Backward: dx = g / (x * ln 10)"""
    x = call.args[0]
    return [b.call("divide", g, b.call("multiply", x, _c(math.log(10.0), x)))]


@register_vjp("log1p")
def log1p_vjp(b, call, out, g):
    """Forward: y = log(1 + x)
    Backward: dx = g / (x + 1)"""
    x = call.args[0]
    return [b.call("divide", g, b.call("add", x, _c(1.0, x)))]


@register_vjp("expm1")
def expm1_vjp(b, call, out, g):
    """Forward: y = exp(x) - 1
    Backward: dx = g * (y + 1)"""
    return [b.call("multiply", g, b.call("add", out, _c(1.0, out)))]


@register_vjp("exp2")
def exp2_vjp(b, call, out, g):
    """Forward: y = 2 ** x
    Backward: dx = g * y * ln 2"""
    return [_scaled(b, g, out, math.log(2.0))]


def _flat(name):
    def rule(b, call, out, g):
        return [None]
    rule.__name__ = f"{name}_vjp"
    rule.__doc__ = f"""Forward: y = {name}(x)
    Backward: dx = none  (piecewise constant: zero wherever it is defined, as torch's)"""
    return register_vjp(name)(rule)


sign_vjp, round_vjp, trunc_vjp, floor_vjp, ceil_vjp = map(_flat, ("sign", "round", "trunc", "floor", "ceil"))
