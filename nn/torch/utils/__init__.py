"""torch.utils: `data` is nn.data (`from torch.utils.data import X` maps to `from nn.data import X`),
`checkpoint` is nn.torch.utils.checkpoint, `tensorboard` a SummaryWriter that writes scalars as JSON lines."""
from ... import data
from . import checkpoint, tensorboard

__all__ = ["checkpoint", "data", "tensorboard"]
