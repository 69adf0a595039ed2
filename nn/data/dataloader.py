"""torch.utils.data.dataloader's names (`from torch.utils.data.dataloader import DataLoader, default_collate`
maps here)."""
from .collate import default_collate, default_convert
from .loader import DataLoader

__all__ = ["DataLoader", "default_collate", "default_convert"]
