"""VJP rules of the nn family: softmax, log_softmax, layer_norm, dropout and the losses.

Each is composed of primitives (and the nn ops themselves), so every rule is differentiable again.
"""
from __future__ import annotations

import math

import numpy as np

from ir import const

from .registry import register_vjp

_BCE_EPSILON = float(np.float32(1e-12))


def _c(value, like):
    return const(value, like.type.dtype)


def _sum(b, x, axes):
    return b.call("sum", x, axis=axes, keepdims=True)


@register_vjp("nn.softmax")
def nn_softmax_vjp(b, call, out, g):
    """Forward: y = softmax(x, axis)
    Backward: dx = y * (g - sum(g * y, axis, keepdims))"""
    axis = call.attrs["axis"]
    return [b.call("multiply", out, b.call("subtract", g, _sum(b, b.call("multiply", g, out), [axis])))]


@register_vjp("nn.log_softmax")
def nn_log_softmax_vjp(b, call, out, g):
    """Forward: y = log_softmax(x, axis)
    Backward: dx = g - exp(y) * sum(g, axis, keepdims)"""
    axis = call.attrs["axis"]
    return [b.call("subtract", g, b.call("multiply", b.call("exp", out), _sum(b, g, [axis])))]


@register_vjp("nn.layer_norm")
def nn_layer_norm_vjp(b, call, out, g):
    """Forward: y = (x - mean) * rstd * gamma + beta, rstd = 1 / sqrt(var + epsilon), over axes
    Backward: dx = rstd * (d - mean(d) - xhat * mean(d * xhat)) with d = g * gamma, dgamma = g * xhat, dbeta = g"""
    data, gamma, _ = call.args
    axes = list(call.attrs["axes"])
    dtype = data.type.dtype
    if dtype == "float16":  # statistics in float32, as the forward kernel (and PyTorch) computes them
        data, gamma, g = (b.call("astype", v, dtype="float32") for v in (data, gamma, g))
    # xhat and rstd are recomputed from data: y cannot be inverted where gamma is 0
    inv_n = _c(1.0 / math.prod(data.type.shape[a] for a in axes), data)
    centered = b.call("subtract", data, b.call("multiply", _sum(b, data, axes), inv_n))
    var = b.call("multiply", _sum(b, b.call("multiply", centered, centered), axes), inv_n)
    rstd = b.call("rsqrt", b.call("add", var, _c(call.attrs["epsilon"], data)))
    xhat = b.call("multiply", centered, rstd)
    d = b.call("multiply", g, gamma)
    mean_d = b.call("multiply", _sum(b, d, axes), inv_n)
    mean_dx = b.call("multiply", _sum(b, b.call("multiply", d, xhat), axes), inv_n)
    dx = b.call("multiply", rstd, b.call("subtract", b.call("subtract", d, mean_d), b.call("multiply", xhat, mean_dx)))
    grads = [dx, b.call("multiply", g, xhat), g]
    if dtype != data.type.dtype:  # float16: sum gamma's and beta's over the leading axes before rounding
        lead = list(range(data.type.ndim - len(axes)))
        if lead:
            grads[1:] = [b.call("sum", v, axis=lead) for v in grads[1:]]
        return [b.call("astype", v, dtype=dtype) for v in grads]
    # gamma and beta broadcast over the leading axes: the pass sums these back to their shape
    return grads


@register_vjp("nn.dropout")
def nn_dropout_vjp(b, call, out, g):
    """Forward: y = x * mask(seed, rate) / (1 - rate)
    Backward: dx = dropout(g, seed, rate) (the same mask), no gradient to seed"""
    _, seed = call.args
    return [b.call("nn.dropout", g, seed, rate=call.attrs["rate"]), None]


@register_vjp("nn.nll_loss")
def nn_nll_loss_vjp(b, call, out, g):
    """Forward: y = reduce(-predictions[n, targets[n]]) over the targets that are not ignore_index
    Backward: dpredictions = nll_loss_backward(g, predictions, targets), no gradient to targets"""
    predictions, targets = call.args
    return [b.call("grad.nll_loss_backward", g, predictions, targets, **call.attrs), None]


@register_vjp("grad.nll_loss_backward")
def grad_nll_loss_backward_vjp(b, call, out, g):
    """Forward: y = d nll_loss(predictions, targets) / d predictions, scaled by output_grad (linear in it)
    Backward: doutput_grad = nll_loss(g, targets), none to predictions (only its shape is read) or targets"""
    _, _, targets = call.args
    return [b.call("nn.nll_loss", g, targets, **call.attrs), None, None]


@register_vjp("nn.cross_entropy_with_logits")
def nn_cross_entropy_with_logits_vjp(b, call, out, g):
    """Forward: y = -sum(predictions * labels) / N (N = predictions.shape[0] when 2-d or more, else 1)
    Backward: dpredictions = -g * labels / N, dlabels = -g * predictions / N"""
    predictions, labels = call.args
    shape = predictions.type.shape
    scale = b.call("multiply", g, _c(-1.0 / (shape[0] if len(shape) >= 2 else 1), predictions))
    return [b.call("multiply", scale, labels), b.call("multiply", scale, predictions)]


@register_vjp("nn.binary_cross_entropy")
def nn_binary_cross_entropy_vjp(b, call, out, g):
    """Forward: y = -(t * max(log(p), -100) + (1 - t) * max(log(1 - p), -100))
    Backward: dp = g * (p - t) / max(p * (1 - p), 1e-12), dt = -g * log(p / (1 - p))  (PyTorch's formulas)"""
    # PyTorch's binary_cross_entropy_backward and _target_backward, in its order of operations: the
    # clamped denominator keeps dp finite at p = 0 or 1, where the logs' own slopes are infinite. The
    # clamp is PyTorch's float EPSILON = 1e-12f in every dtype (9.99999996e-13 in float64).
    p, t = call.args
    q = b.call("subtract", _c(1.0, p), p)
    dp = b.call("divide", b.call("multiply", g, b.call("subtract", p, t)),
                b.call("maximum", b.call("multiply", q, p), _c(_BCE_EPSILON, p)))
    dt = b.call("negative", b.call("multiply", g, b.call("log", b.call("divide", p, q))))
    return [dp, dt]
