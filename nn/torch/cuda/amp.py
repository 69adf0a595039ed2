"""torch.cuda.amp: torch.amp's autocast and GradScaler (deprecated spellings torch keeps)."""
from ..amp import GradScaler, autocast

__all__ = ["GradScaler", "autocast"]
