"""torch.utils.data.distributed's names (`from torch.utils.data.distributed import DistributedSampler` maps
here)."""
from .sampler import DistributedSampler

__all__ = ["DistributedSampler"]
