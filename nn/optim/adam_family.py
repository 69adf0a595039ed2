"""Adamax, NAdam and RAdam with torch.optim's update rules (its single-tensor code, operation for operation).

Each takes torch's constructor arguments and defaults, skips a parameter whose gradient is None (its own step
count then lags, as torch's per-parameter "step"), and keeps its state under torch's names.
"""
from __future__ import annotations

import math

import numpy as np

from tracer.tensor import array_module_of

from .groups import refuse_differentiable
from .optimizers import Adam, Optimizer, _check_nonnegative


def _zeros(state: dict, p, *names) -> None:
    for name in names:
        if name not in state:
            state[name] = array_module_of(p).zeros_like(p)


def _grad(g, p, group):
    """g negated for maximize=True, plus coupled weight decay (decoupled decay scales p first, in place)."""
    if group["maximize"]:
        g = -g
    wd = group["weight_decay"]
    if wd and group.get("decoupled_weight_decay", False):
        p *= 1 - group["lr"] * wd
    elif wd:
        g = g + wd * p
    return g


class Adamax(Optimizer):
    """Adamax (torch.optim.Adamax): m = lerp(m, g, 1 - beta1); u = max(beta2 * u, |g| + eps);
    p -= lr / (1 - beta1**t) * m / u. State: "exp_avg", "exp_inf"."""

    def __init__(self, params, lr: float = 2e-3, betas=(0.9, 0.999), eps: float = 1e-8, weight_decay: float = 0.0,
                 foreach=None, *, maximize: bool = False, differentiable: bool = False, capturable: bool = False):
        refuse_differentiable(self, differentiable)
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, maximize=maximize))

    _check_options = Adam._check_options

    def _update(self, p, g, state, t, group):
        xp = array_module_of(p)
        beta1, beta2 = group["betas"]
        g = _grad(g, p, group)
        _zeros(state, p, "exp_avg", "exp_inf")
        m, u = state["exp_avg"], state["exp_inf"]
        m += (g - m) * (1 - beta1)
        u *= beta2
        xp.maximum(u, xp.abs(g) + group["eps"], out=u)
        p -= (m / u) * (group["lr"] / (1 - beta1 ** t))


class NAdam(Optimizer):
    """NAdam (torch.optim.NAdam): Adam with Nesterov momentum, mu_t = beta1 * (1 - 0.5 * 0.96**(t * momentum_decay)).
    State: "mu_product" (the product of the mu_t, a float32 scalar as torch's), "exp_avg", "exp_avg_sq"."""

    def __init__(self, params, lr: float = 2e-3, betas=(0.9, 0.999), eps: float = 1e-8, weight_decay: float = 0.0,
                 momentum_decay: float = 4e-3, decoupled_weight_decay: bool = False, *, foreach=None,
                 maximize: bool = False, capturable: bool = False, differentiable: bool = False):
        refuse_differentiable(self, differentiable)
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      momentum_decay=momentum_decay, decoupled_weight_decay=decoupled_weight_decay,
                                      maximize=maximize))

    def _check_options(self, group, where):
        Adam._check_options(self, group, where)
        _check_nonnegative(self, where, momentum_decay=group["momentum_decay"])

    def _update(self, p, g, state, t, group):
        xp = array_module_of(p)
        beta1, beta2 = group["betas"]
        lr, eps, md = group["lr"], group["eps"], group["momentum_decay"]
        if "mu_product" not in state:
            state["mu_product"] = 1.0
        _zeros(state, p, "exp_avg", "exp_avg_sq")
        m, v = state["exp_avg"], state["exp_avg_sq"]
        bias_correction2 = 1 - beta2 ** t
        g = _grad(g, p, group)
        mu = beta1 * (1.0 - 0.5 * 0.96 ** (t * md))
        mu_next = beta1 * (1.0 - 0.5 * 0.96 ** ((t + 1) * md))
        # torch keeps mu_product in a float32 tensor: mu is rounded to float32, then the product
        mu_product = state["mu_product"] = float(np.float32(state["mu_product"]) * np.float32(mu))
        m += (g - m) * (1 - beta1)
        v *= beta2
        v += g * g * (1 - beta2)
        denom = xp.sqrt(v / bias_correction2) + eps
        p += (g / denom) * (-lr * (1.0 - mu) / (1.0 - mu_product))
        p += (m / denom) * ((-lr * mu_next) / (1.0 - mu_product * mu_next))


class RAdam(Optimizer):
    """RAdam (torch.optim.RAdam): Adam whose adaptive step is rectified (switched on once rho_t > 5; before that
    an SGD-with-momentum step). State: "exp_avg", "exp_avg_sq"."""

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8, weight_decay: float = 0.0,
                 decoupled_weight_decay: bool = False, *, foreach=None, maximize: bool = False,
                 capturable: bool = False, differentiable: bool = False):
        refuse_differentiable(self, differentiable)
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, maximize=maximize,
                                      decoupled_weight_decay=decoupled_weight_decay))

    _check_options = Adam._check_options

    def _update(self, p, g, state, t, group):
        xp = array_module_of(p)
        beta1, beta2 = group["betas"]
        lr = group["lr"]
        g = _grad(g, p, group)
        _zeros(state, p, "exp_avg", "exp_avg_sq")
        m, v = state["exp_avg"], state["exp_avg_sq"]
        m += (g - m) * (1 - beta1)
        v *= beta2
        v += g * g * (1 - beta2)
        bias_correction1, bias_correction2 = 1 - beta1 ** t, 1 - beta2 ** t
        corrected = m / bias_correction1
        rho_inf = 2 / (1 - beta2) - 1
        rho_t = rho_inf - 2 * t * (beta2 ** t) / bias_correction2
        if rho_t > 5.0:
            rect = math.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
            adaptive = bias_correction2 ** 0.5 / (xp.sqrt(v) + group["eps"])
            p -= corrected * lr * adaptive * rect
        else:
            p -= corrected * lr


__all__ = ["Adamax", "NAdam", "RAdam"]
