"""Learning-rate schedules: each sets `optimizer.lr` from its own step count. torch's schedulers are in
nn.optim.lr_scheduler; StepLR is re-exported from there (it used to live here)."""
from __future__ import annotations

import math
from abc import ABC, abstractmethod

import numpy as np

from .lr_scheduler import StepLR


class LRSchedule(ABC):
    """Base class: `step()` once per optimizer step (or per epoch); `lr_at(t)` is the rate after t steps.

    With several parameter groups each follows the schedule from its own initial rate (torch's base_lrs):
    `lr_at` reads `self.base_lr`, set to each group's in turn.
    """

    def __init__(self, optimizer):
        self.optimizer = optimizer
        groups = getattr(optimizer, "param_groups", None)
        self.base_lrs = [float(g["lr"]) for g in groups] if groups else [float(optimizer.lr)]
        self.base_lr = self.base_lrs[0]
        self.last_step = 0
        self._apply()

    @abstractmethod
    def lr_at(self, t: int) -> float:
        """The learning rate after t steps, from `self.base_lr`."""

    def _apply(self) -> None:
        groups = getattr(self.optimizer, "param_groups", None)
        first = self.base_lr
        try:
            rates = []
            for base in self.base_lrs:
                self.base_lr = base
                rates.append(self.lr_at(self.last_step))
        finally:
            self.base_lr = first
        if groups:
            for g, lr in zip(groups, rates, strict=True):
                g["lr"] = float(lr)
        else:
            self.optimizer.lr = rates[0]

    @property
    def lr(self) -> float:
        return self.optimizer.lr

    def get_last_lr(self) -> list[float]:
        """The current rate of each group, as torch's."""
        groups = getattr(self.optimizer, "param_groups", None)
        return [g["lr"] for g in groups] if groups else [self.optimizer.lr]

    def step(self) -> None:
        self.last_step += 1
        self._apply()

    def state_dict(self) -> dict:
        return {"base_lr": self.base_lrs[0] if len(self.base_lrs) == 1 else np.array(self.base_lrs),
                "last_step": self.last_step}

    def load_state_dict(self, state: dict) -> None:
        bases = [float(b) for b in np.asarray(state["base_lr"], "float64").reshape(-1)]
        if len(bases) != len(self.base_lrs):
            raise ValueError(f"{type(self).__name__}.load_state_dict: {len(bases)} base rates for "
                             f"{len(self.base_lrs)} parameter groups")
        self.base_lrs, self.base_lr, self.last_step = bases, bases[0], int(state["last_step"])
        self._apply()


class WarmupCosine(LRSchedule):
    """Linear warm-up over `warmup_steps` (base_lr * (t + 1) / warmup_steps, so the first step already
    moves), then a half cosine from base_lr at t = warmup_steps down to min_lr at t = total_steps, and
    min_lr after.

    >>> from types import SimpleNamespace
    >>> opt = SimpleNamespace(lr=1.0)
    >>> s = WarmupCosine(opt, warmup_steps=2, total_steps=4)
    >>> [round(s.lr_at(t), 3) for t in range(6)]
    [0.5, 1.0, 1.0, 0.5, 0.0, 0.0]
    """

    def __init__(self, optimizer, warmup_steps: int, total_steps: int, min_lr: float = 0.0):
        if not 0 <= warmup_steps <= total_steps:
            raise ValueError(f"WarmupCosine: need 0 <= warmup_steps <= total_steps, got {warmup_steps} and "
                             f"{total_steps}")
        self.warmup_steps, self.total_steps, self.min_lr = warmup_steps, total_steps, min_lr
        super().__init__(optimizer)

    def lr_at(self, t: int) -> float:
        if t < self.warmup_steps:
            return self.base_lr * (t + 1) / self.warmup_steps
        progress = min(1.0, (t - self.warmup_steps) / max(1, self.total_steps - self.warmup_steps))
        return self.min_lr + (self.base_lr - self.min_lr) * 0.5 * (1 + math.cos(math.pi * progress))


__all__ = ["LRSchedule", "StepLR", "WarmupCosine"]
