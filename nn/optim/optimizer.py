"""torch.optim.optimizer's names (`from torch.optim.optimizer import Optimizer` maps here)."""
from .optimizers import Optimizer

__all__ = ["Optimizer"]
