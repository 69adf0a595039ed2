"""torch.optim.lr_scheduler: the same classes, arguments, defaults and numbers (torch's chainable, recursive
forms, so sequences equal torch's to rounding), driving an optimizer's `param_groups`.

Each group follows the schedule from its own base rate, kept in the group as "initial_lr" (as torch's). Every
scheduler has `step()`, `get_last_lr()`, `last_epoch`, `state_dict()` and `load_state_dict()`. A state dict
holds what torch's holds, except configuration that the constructor sets and `nn.save` cannot store (strings,
functions, None), which `load_state_dict` leaves as the constructor made it; it reads torch's own state dicts too.
"""
from __future__ import annotations

import math
import types
import warnings
from bisect import bisect_right
from collections import Counter
from collections.abc import Mapping

import numpy as np

_UNSAVED = ("optimizer", "_schedulers", "lr_lambdas", "_schedule_phases")


def _groups(optimizer) -> list[dict]:
    groups = getattr(optimizer, "param_groups", None)
    if not isinstance(groups, list):
        raise TypeError(f"{type(optimizer).__name__} is not an Optimizer (it has no param_groups)")
    return groups


def _format_param(name: str, optimizer, value) -> list:
    """One value per group: a list as long as the groups, or one value for all of them."""
    n = len(_groups(optimizer))
    if isinstance(value, (list, tuple)):
        if len(value) != n:
            raise ValueError(f"{name} must have the same length as optimizer.param_groups. {name} has "
                             f"{len(value)} values, param_groups has {n}.")
        return list(value)
    return [value] * n


def _restore(current, value):
    """A saved value (a Python one, or its nn.load form: arrays, string keys) as the type the attribute has."""
    if isinstance(current, Counter):
        return Counter({int(k): int(np.asarray(v)) for k, v in value.items()})
    if isinstance(value, np.ndarray):
        value = value.item() if value.ndim == 0 and not isinstance(current, list) else value.tolist()
    elif isinstance(value, np.generic):
        value = value.item()
    if isinstance(current, list) and not isinstance(value, list):
        value = list(value) if isinstance(value, tuple) else [value]
    return value


def _saved_list(value) -> list:
    if isinstance(value, Mapping):  # nn.load's form of a list of dicts
        return [value[k] for k in sorted(value, key=int)]
    return list(value)


class LRScheduler:
    """Base class, as torch's: the constructor records each group's "initial_lr" and takes the first step."""

    def __init__(self, optimizer, last_epoch: int = -1):
        groups = _groups(optimizer)
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in groups:
                group.setdefault("initial_lr", group["lr"])
        else:
            for i, group in enumerate(groups):
                if "initial_lr" not in group:
                    raise KeyError(f"param 'initial_lr' is not specified in param_groups[{i}] when resuming a "
                                   "scheduler with last_epoch >= 0 (load the optimizer's state dict first)")
        self.base_lrs = [group["initial_lr"] for group in groups]
        self.last_epoch = last_epoch
        self._initial_step()

    def _initial_step(self) -> None:
        self._step_count = 0
        self._is_initial = True
        try:
            self.step()
        finally:
            self._is_initial = False

    def get_lr(self) -> list[float]:
        """Each group's rate for `last_epoch` (called by step(); read rates with get_last_lr())."""
        raise NotImplementedError

    def get_last_lr(self) -> list[float]:
        """The rate of each group after the last step."""
        return self._last_lr

    def step(self, epoch=None) -> None:
        """Advance one epoch (or iteration) and set every group's "lr"; step(epoch) is torch's deprecated form."""
        self._step_count += 1
        if epoch is not None:
            warnings.warn("scheduler.step(epoch) is deprecated in torch; the closed form is used", UserWarning,
                          stacklevel=2)
        self._update_lr(epoch)

    def _update_lr(self, epoch=None) -> None:
        if epoch is None:
            self.last_epoch += 1
            values = self.get_lr()
        else:
            self.last_epoch = epoch
            values = self._get_closed_form_lr() if hasattr(self, "_get_closed_form_lr") else self.get_lr()
        for group, lr in zip(self.optimizer.param_groups, values, strict=True):
            group["lr"] = lr
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def state_dict(self) -> dict:
        """The scheduler's counters and per-group values (torch's keys), savable with nn.save."""
        return {k: v for k, v in self.__dict__.items()
                if k not in _UNSAVED and v is not None and not isinstance(v, str) and not callable(v)}

    def load_state_dict(self, state_dict: Mapping) -> None:
        """Restore from state_dict() (or its nn.load form, or torch's scheduler state dict)."""
        for k, v in state_dict.items():
            if k not in _UNSAVED and v is not None:
                setattr(self, k, _restore(getattr(self, k, None), v))


class _LambdaBase(LRScheduler):
    """LambdaLR and MultiplicativeLR: one function per group (or one for all)."""

    def __init__(self, optimizer, lr_lambda, last_epoch: int = -1):
        n = len(_groups(optimizer))
        if isinstance(lr_lambda, (list, tuple)):
            if len(lr_lambda) != n:
                raise ValueError(f"Expected {n} lr_lambdas, but got {len(lr_lambda)}")
            self.lr_lambdas = list(lr_lambda)
        else:
            self.lr_lambdas = [lr_lambda] * n
        for fn in self.lr_lambdas:
            if not callable(fn):
                raise TypeError(f"lr_lambda should be a function, but got {type(fn).__name__}")
        super().__init__(optimizer, last_epoch)

    def state_dict(self) -> dict:
        """As torch's: a callable object's attributes are saved, a plain function's nothing ({} here)."""
        out = super().state_dict()
        out["lr_lambdas"] = [{} if isinstance(fn, types.FunctionType) else dict(fn.__dict__) for fn in self.lr_lambdas]
        return out

    def load_state_dict(self, state_dict: Mapping) -> None:
        super().load_state_dict(state_dict)
        for fn, saved in zip(self.lr_lambdas, _saved_list(state_dict.get("lr_lambdas", [])), strict=False):
            if saved:
                fn.__dict__.update({k: _restore(fn.__dict__.get(k), v) for k, v in saved.items()})


class LambdaLR(_LambdaBase):
    """lr = initial_lr * lr_lambda(epoch)."""

    def get_lr(self):
        return [base * fn(self.last_epoch) for fn, base in zip(self.lr_lambdas, self.base_lrs, strict=True)]


class MultiplicativeLR(_LambdaBase):
    """lr *= lr_lambda(epoch) at every step after the first."""

    def get_lr(self):
        if self._is_initial:
            return [g["lr"] for g in self.optimizer.param_groups]
        return [g["lr"] * fn(self.last_epoch) for fn, g in zip(self.lr_lambdas, self.optimizer.param_groups,
                                                                strict=True)]


class StepLR(LRScheduler):
    """lr *= gamma every step_size epochs."""

    def __init__(self, optimizer, step_size: int, gamma: float = 0.1, last_epoch: int = -1):
        if step_size < 1:
            raise ValueError(f"StepLR: step_size must be >= 1, got {step_size}")
        self.step_size, self.gamma = step_size, gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return [g["lr"] for g in self.optimizer.param_groups]
        return [g["lr"] * self.gamma for g in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        return [base * self.gamma ** (self.last_epoch // self.step_size) for base in self.base_lrs]


class MultiStepLR(LRScheduler):
    """lr *= gamma at each milestone (a milestone given twice multiplies twice)."""

    def __init__(self, optimizer, milestones, gamma: float = 0.1, last_epoch: int = -1):
        self.milestones, self.gamma = Counter(milestones), gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch not in self.milestones:
            return [g["lr"] for g in self.optimizer.param_groups]
        return [g["lr"] * self.gamma ** self.milestones[self.last_epoch] for g in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        milestones = sorted(self.milestones.elements())
        return [base * self.gamma ** bisect_right(milestones, self.last_epoch) for base in self.base_lrs]


class ConstantLR(LRScheduler):
    """lr = initial_lr * factor until total_iters, then initial_lr."""

    def __init__(self, optimizer, factor: float = 1.0 / 3, total_iters: int = 5, last_epoch: int = -1):
        if factor > 1.0 or factor < 0:
            raise ValueError("Constant multiplicative factor expected to be between 0 and 1.")
        self.factor, self.total_iters = factor, total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        groups = self.optimizer.param_groups
        if self.last_epoch == 0:
            return [g["lr"] * self.factor for g in groups]
        if self.last_epoch != self.total_iters:
            return [g["lr"] for g in groups]
        return [g["lr"] * (1.0 / self.factor) for g in groups]

    def _get_closed_form_lr(self):
        return [base * (self.factor + (self.last_epoch >= self.total_iters) * (1 - self.factor))
                for base in self.base_lrs]


class LinearLR(LRScheduler):
    """The factor goes linearly from start_factor to end_factor over total_iters."""

    def __init__(self, optimizer, start_factor: float = 1.0 / 3, end_factor: float = 1.0, total_iters: int = 5,
                 last_epoch: int = -1):
        if start_factor > 1.0 or start_factor <= 0:
            raise ValueError("Starting multiplicative factor expected to be greater than 0 and less or equal to 1.")
        if end_factor > 1.0 or end_factor < 0:
            raise ValueError("Ending multiplicative factor expected to be between 0 and 1.")
        self.start_factor, self.end_factor, self.total_iters = start_factor, end_factor, total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        groups = self.optimizer.param_groups
        if self.last_epoch == 0:
            return [g["lr"] * self.start_factor for g in groups]
        if self._is_initial or self.last_epoch > self.total_iters:
            return [g["lr"] for g in groups]
        ratio = 1.0 + (self.end_factor - self.start_factor) / (
            self.total_iters * self.start_factor + (self.last_epoch - 1) * (self.end_factor - self.start_factor))
        return [g["lr"] * ratio for g in groups]

    def _get_closed_form_lr(self):
        return [base * (self.start_factor + (self.end_factor - self.start_factor)
                        * min(self.total_iters, self.last_epoch) / self.total_iters) for base in self.base_lrs]


class ExponentialLR(LRScheduler):
    """lr *= gamma every epoch."""

    def __init__(self, optimizer, gamma: float, last_epoch: int = -1):
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self._is_initial:
            return [g["lr"] for g in self.optimizer.param_groups]
        return [g["lr"] * self.gamma for g in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        return [base * self.gamma ** self.last_epoch for base in self.base_lrs]


class PolynomialLR(LRScheduler):
    """lr = initial_lr * (1 - epoch / total_iters) ** power, then constant."""

    def __init__(self, optimizer, total_iters: int = 5, power: float = 1.0, last_epoch: int = -1):
        self.total_iters, self.power = total_iters, power
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self._is_initial or self.last_epoch > self.total_iters:
            return [g["lr"] for g in self.optimizer.param_groups]
        decay = ((1.0 - self.last_epoch / self.total_iters)
                 / (1.0 - (self.last_epoch - 1) / self.total_iters)) ** self.power
        return [g["lr"] * decay for g in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        return [base * (1.0 - min(self.total_iters, self.last_epoch) / self.total_iters) ** self.power
                for base in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """Cosine annealing from initial_lr to eta_min over T_max epochs, in torch's recursive form (each rate from
    the previous one, so a rate changed by hand carries on, and the sequence equals torch's to rounding)."""

    def __init__(self, optimizer, T_max: int, eta_min: float = 0.0, last_epoch: int = -1):
        self.T_max, self.eta_min = T_max, eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        groups, e, T, lo = self.optimizer.param_groups, self.last_epoch, self.T_max, self.eta_min
        if self._is_initial:
            return [g["lr"] for g in groups]
        if self._step_count == 1 and e > 0:
            return [lo + (base - lo) * (1 + math.cos(e * math.pi / T)) / 2 for base in self.base_lrs]
        if (e - 1 - T) % (2 * T) == 0:
            return [g["lr"] + (base - lo) * (1 - math.cos(math.pi / T)) / 2
                    for base, g in zip(self.base_lrs, groups, strict=True)]
        return [(1 + math.cos(math.pi * e / T)) / (1 + math.cos(math.pi * (e - 1) / T)) * (g["lr"] - lo) + lo
                for g in groups]

    def _get_closed_form_lr(self):
        return [self.eta_min + (base - self.eta_min) * (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
                for base in self.base_lrs]


def _check_children(owner: str, optimizer, schedulers) -> None:
    if len(schedulers) < 1:
        raise ValueError(f"{owner} expects at least one scheduler, but got none.")
    for i, s in enumerate(schedulers):
        if not hasattr(s, "optimizer"):
            raise TypeError(f"{owner} at index {i} should have `optimizer` as its attribute.")
        if isinstance(s, ReduceLROnPlateau):
            raise ValueError(f"{owner} does not support ReduceLROnPlateau (its step needs the metric), but got one "
                             f"at index {i}.")
        if s.optimizer is not optimizer:
            raise ValueError(f"{owner} expects all schedulers to belong to the same optimizer, but scheduler "
                             f"{type(s).__name__} at index {i} has another one.")


class _Composite(LRScheduler):
    """SequentialLR and ChainedScheduler: their state dict nests the children's."""

    def state_dict(self) -> dict:
        return {**super().state_dict(), "_schedulers": [s.state_dict() for s in self._schedulers]}

    def load_state_dict(self, state_dict: Mapping) -> None:
        super().load_state_dict(state_dict)
        for s, saved in zip(self._schedulers, _saved_list(state_dict["_schedulers"]), strict=True):
            s.load_state_dict(saved)


class SequentialLR(_Composite):
    """The schedulers one after another, switching at the milestones (each restarted at its milestone)."""

    def __init__(self, optimizer, schedulers, milestones, last_epoch: int = -1):
        _check_children(type(self).__name__, optimizer, schedulers)
        if len(milestones) != len(schedulers) - 1:
            raise ValueError("Sequential Schedulers expects number of schedulers provided to be one more than the "
                             f"number of milestone points, but got {len(schedulers)} schedulers and "
                             f"{len(milestones)} milestones")
        self._schedulers, self._milestones = list(schedulers), list(milestones)
        self.last_epoch, self.optimizer = last_epoch + 1, optimizer
        for group in optimizer.param_groups:
            group["lr"] = group["initial_lr"]
        self._undo(self)
        idx = bisect_right(self._milestones, 0)
        self._schedulers[idx]._initial_step()
        self._last_lr = self._schedulers[idx].get_last_lr()

    def _undo(self, sched) -> None:
        """Undo the step each child took when it was built (recursively, as torch's recursive_undo)."""
        if hasattr(sched, "_schedulers"):
            for s in sched._schedulers:
                self._undo(s)
        elif hasattr(sched, "last_epoch"):
            sched.last_epoch -= 1

    def step(self) -> None:
        self.last_epoch += 1
        idx = bisect_right(self._milestones, self.last_epoch)
        scheduler = self._schedulers[idx]
        if idx > 0 and self._milestones[idx - 1] == self.last_epoch:
            scheduler._update_lr(0)
        else:
            scheduler.step()
        self._last_lr = scheduler.get_last_lr()


class ChainedScheduler(_Composite):
    """Every scheduler steps at every step, each multiplying in its own change."""

    def __init__(self, schedulers, optimizer=None):
        if len(schedulers) < 1:
            raise ValueError("ChainedScheduler expects at least one scheduler to be chained, but got none.")
        optimizer = optimizer or schedulers[0].optimizer
        _check_children(type(self).__name__, optimizer, schedulers)
        self._schedulers, self.optimizer = list(schedulers), optimizer
        self._last_lr = [g["lr"] for g in optimizer.param_groups]

    def step(self) -> None:
        for s in self._schedulers:
            s.step()
        self._last_lr = [g["lr"] for g in self.optimizer.param_groups]


class ReduceLROnPlateau(LRScheduler):
    """lr *= factor (not below min_lr) once the metric passed to step(metric) has not improved for patience
    epochs; then cooldown epochs in which bad epochs are not counted."""

    def __init__(self, optimizer, mode: str = "min", factor: float = 0.1, patience: int = 10,
                 threshold: float = 1e-4, threshold_mode: str = "rel", cooldown: int = 0, min_lr=0, eps: float = 1e-8):
        if factor >= 1.0:
            raise ValueError("Factor should be < 1.0.")
        groups = _groups(optimizer)
        self.factor, self.optimizer = factor, optimizer
        if isinstance(min_lr, (list, tuple)):
            if len(min_lr) != len(groups):
                raise ValueError(f"expected {len(groups)} min_lrs, got {len(min_lr)}")
            self.default_min_lr, self.min_lrs = None, list(min_lr)
        else:
            self.default_min_lr, self.min_lrs = min_lr, [min_lr] * len(groups)
        self.patience, self.cooldown, self.eps = patience, cooldown, eps
        self.last_epoch = 0
        self._last_lr = [g["lr"] for g in groups]
        if mode not in ("min", "max"):
            raise ValueError(f"mode {mode} is unknown!")
        if threshold_mode not in ("rel", "abs"):
            raise ValueError(f"threshold mode {threshold_mode} is unknown!")
        self.mode, self.threshold, self.threshold_mode = mode, threshold, threshold_mode
        self.mode_worse = math.inf if mode == "min" else -math.inf
        self.best, self.cooldown_counter, self.num_bad_epochs = self.mode_worse, 0, 0

    def step(self, metrics, epoch=None) -> None:
        current = float(metrics)
        self.last_epoch = self.last_epoch + 1 if epoch is None else epoch
        if self._is_better(current, self.best):
            self.best, self.num_bad_epochs = current, 0
        else:
            self.num_bad_epochs += 1
        if self.cooldown_counter > 0:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0
        if self.num_bad_epochs > self.patience:
            self._reduce_lr()
            self.cooldown_counter, self.num_bad_epochs = self.cooldown, 0
        self._last_lr = [g["lr"] for g in self.optimizer.param_groups]

    @property
    def in_cooldown(self) -> bool:
        return self.cooldown_counter > 0

    def _reduce_lr(self) -> None:
        groups = self.optimizer.param_groups
        if len(groups) != len(self.min_lrs):
            if self.default_min_lr is None:
                raise RuntimeError(f"The number of param groups in the optimizer ({len(groups)}) differs from when "
                                   f"ReduceLROnPlateau was built ({len(self.min_lrs)}); set min_lrs to match")
            self.min_lrs = [self.default_min_lr] * len(groups)
        for i, group in enumerate(groups):
            old = float(group["lr"])
            new = max(old * self.factor, self.min_lrs[i])
            if old - new > self.eps:
                group["lr"] = new

    def _is_better(self, a: float, best: float) -> bool:
        rel = self.threshold_mode == "rel"
        if self.mode == "min":
            return a < best * (1.0 - self.threshold) if rel else a < best - self.threshold
        return a > best * (self.threshold + 1.0) if rel else a > best + self.threshold


from .lr_cyclic import CosineAnnealingWarmRestarts, CyclicLR, OneCycleLR  # noqa: E402  (they build on LRScheduler)

_LRScheduler = LRScheduler  # torch keeps the old private name, which custom schedulers subclass

__all__ = ["ChainedScheduler", "ConstantLR", "CosineAnnealingLR", "CosineAnnealingWarmRestarts", "CyclicLR",
           "ExponentialLR", "LRScheduler", "LambdaLR", "LinearLR", "MultiStepLR", "MultiplicativeLR", "OneCycleLR",
           "PolynomialLR", "ReduceLROnPlateau", "SequentialLR", "StepLR"]
