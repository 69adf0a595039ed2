"""Optimizers, learning-rate schedules (torch's as `optim.lr_scheduler`) and gradient clipping."""
from . import lr_scheduler, optimizer  # noqa: F401  (optimizer: torch.optim.optimizer's path)
from .adam_family import Adamax, NAdam, RAdam
from .adaptive import Adadelta, Adagrad, RMSprop
from .lbfgs import LBFGS
from .optimizers import SGD, Adam, AdamW, Optimizer, clip_grad_norm
from .schedules import LRSchedule, StepLR, WarmupCosine

__all__ = ["SGD", "Adadelta", "Adagrad", "Adam", "AdamW", "Adamax", "LBFGS", "LRSchedule", "NAdam", "Optimizer",
           "RAdam", "RMSprop", "StepLR", "WarmupCosine", "clip_grad_norm", "lr_scheduler"]
