"""Optimizers, learning-rate schedules and gradient clipping."""
from .optimizers import SGD, Adam, AdamW, Optimizer, clip_grad_norm
from .schedules import LRSchedule, StepLR, WarmupCosine

__all__ = ["SGD", "Adam", "AdamW", "LRSchedule", "Optimizer", "StepLR", "WarmupCosine", "clip_grad_norm"]
