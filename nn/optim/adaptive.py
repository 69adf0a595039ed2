"""RMSprop, Adagrad and Adadelta with torch.optim's update rules (its single-tensor code, operation for operation),
torch's constructor arguments and defaults, None gradients skipped, state under torch's names."""
from __future__ import annotations

from tracer.tensor import array_module_of

from . import flat
from .adam_family import _grad, _zeros
from .groups import refuse_differentiable
from .optimizers import Optimizer, _check_nonnegative


class RMSprop(Optimizer):
    """RMSprop (torch.optim.RMSprop): v = alpha * v + (1 - alpha) * g*g; centered subtracts the squared running
    mean of g; with momentum, buf = momentum * buf + g / (sqrt(v) + eps) and p -= lr * buf, else
    p -= lr * g / (sqrt(v) + eps). State: "square_avg", "momentum_buffer" (momentum > 0), "grad_avg" (centered)."""

    _flat_kind, _flat_order = "rmsprop", ("square_avg", "momentum_buffer", "grad_avg")

    def __init__(self, params, lr: float = 1e-2, alpha: float = 0.99, eps: float = 1e-8, weight_decay: float = 0.0,
                 momentum: float = 0.0, centered: bool = False, capturable: bool = False, foreach=None,
                 maximize: bool = False, differentiable: bool = False):
        refuse_differentiable(self, differentiable)
        super().__init__(params, dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps, centered=centered,
                                      weight_decay=weight_decay, maximize=maximize))

    def _check_options(self, group, where):
        _check_nonnegative(self, where, lr=group["lr"], eps=group["eps"], momentum=group["momentum"],
                           weight_decay=group["weight_decay"], alpha=group["alpha"])

    def _flat_names(self, group):
        return ("square_avg", *(["momentum_buffer"] if group["momentum"] > 0 else []),
                *(["grad_avg"] if group["centered"] else []))

    def _flat_coefs(self, group, t):
        wd, alpha, momentum = group["weight_decay"], group["alpha"], group["momentum"]
        return (group["maximize"], 1 if wd else 0, wd, alpha, 1 - alpha, group["centered"], group["eps"],
                momentum > 0, momentum, group["lr"])

    def _update(self, p, g, state, t, group):
        xp = array_module_of(p)
        alpha, momentum = group["alpha"], group["momentum"]
        g = _grad(g, p, group)
        _zeros(state, p, "square_avg", *(["momentum_buffer"] if momentum > 0 else []),
               *(["grad_avg"] if group["centered"] else []))
        v = state["square_avg"]
        v *= alpha
        v += g * g * (1 - alpha)
        if group["centered"]:
            mean = state["grad_avg"]
            mean += (g - mean) * (1 - alpha)
            avg = xp.sqrt(v - mean * mean)
        else:
            avg = xp.sqrt(v)
        avg += group["eps"]
        if momentum > 0:
            buf = state["momentum_buffer"]
            buf *= momentum
            buf += g / avg
            p -= buf * group["lr"]
        else:
            p -= (g / avg) * group["lr"]


class Adagrad(Optimizer):
    """Adagrad (torch.optim.Adagrad): sum += g*g; p -= lr / (1 + (t - 1) * lr_decay) * g / (sqrt(sum) + eps).
    As torch's, every parameter's state ("sum" = initial_accumulator_value) exists from the constructor on."""

    _flat_kind, _flat_order = "adagrad", ("sum", "", "")

    def __init__(self, params, lr: float = 1e-2, lr_decay: float = 0.0, weight_decay: float = 0.0,
                 initial_accumulator_value: float = 0.0, eps: float = 1e-10, foreach=None, *,
                 maximize: bool = False, differentiable: bool = False, fused=None):
        refuse_differentiable(self, differentiable)
        super().__init__(params, dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                                      initial_accumulator_value=initial_accumulator_value, maximize=maximize))
        flat.adopt(self)  # "sum" in the flat state's views from here on (a reference taken to it stays live)

    def _add_group(self, group, where):
        names = super()._add_group(group, where)
        added = self.param_groups[-1]
        for p, state in zip(added["params"], self.state[-len(added["params"]):], strict=True):
            state["sum"] = array_module_of(p._data).full(p.shape, added["initial_accumulator_value"], p.dtype)
        return names

    def _check_options(self, group, where):
        _check_nonnegative(self, where, lr=group["lr"], lr_decay=group["lr_decay"], eps=group["eps"],
                           weight_decay=group["weight_decay"],
                           initial_accumulator_value=group["initial_accumulator_value"])

    def _flat_coefs(self, group, t):
        wd = group["weight_decay"]
        return group["maximize"], 1 if wd else 0, wd, group["eps"], group["lr"] / (1 + (t - 1) * group["lr_decay"])

    def _flat_init(self, group, name):
        return group["initial_accumulator_value"]

    def _update(self, p, g, state, t, group):
        xp = array_module_of(p)
        g = _grad(g, p, group)
        clr = group["lr"] / (1 + (t - 1) * group["lr_decay"])
        if "sum" not in state:  # a state dict that had none for this parameter
            state["sum"] = xp.full(p.shape, group["initial_accumulator_value"], p.dtype)
        total = state["sum"]
        total += g * g
        p -= (g / (xp.sqrt(total) + group["eps"])) * clr


class Adadelta(Optimizer):
    """Adadelta (torch.optim.Adadelta): v = rho * v + (1 - rho) * g*g; d = sqrt(a + eps) / sqrt(v + eps) * g;
    a = rho * a + (1 - rho) * d*d; p -= lr * d. State: "square_avg", "acc_delta"."""

    _flat_kind, _flat_order = "adadelta", ("square_avg", "acc_delta", "")

    def __init__(self, params, lr: float = 1.0, rho: float = 0.9, eps: float = 1e-6, weight_decay: float = 0.0,
                 foreach=None, *, capturable: bool = False, maximize: bool = False, differentiable: bool = False):
        refuse_differentiable(self, differentiable)
        super().__init__(params, dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize))

    def _check_options(self, group, where):
        _check_nonnegative(self, where, lr=group["lr"], eps=group["eps"], weight_decay=group["weight_decay"])
        if not 0.0 <= group["rho"] <= 1.0:
            raise ValueError(f"Adadelta: rho must be in [0, 1], got {group['rho']}" + (f" ({where})" if where else ""))

    def _flat_coefs(self, group, t):
        wd, rho = group["weight_decay"], group["rho"]
        return group["maximize"], 1 if wd else 0, wd, rho, 1 - rho, group["eps"], group["lr"]

    def _update(self, p, g, state, t, group):
        xp = array_module_of(p)
        rho, eps = group["rho"], group["eps"]
        g = _grad(g, p, group)
        _zeros(state, p, "square_avg", "acc_delta")
        v, acc = state["square_avg"], state["acc_delta"]
        v *= rho
        v += g * g * (1 - rho)
        delta = xp.sqrt(acc + eps) / xp.sqrt(v + eps) * g
        acc *= rho
        acc += delta * delta * (1 - rho)
        p -= delta * group["lr"]


__all__ = ["Adadelta", "Adagrad", "RMSprop"]
