"""torch.amp on tracegrad: `autocast` is accepted and computes in the tensors' own dtypes (float32 stays
float32: more precise than torch's float16 / bfloat16 regions, never less), and `GradScaler` passes the loss
and the step through, as torch's GradScaler(enabled=False) does. Programs written for mixed precision run
unchanged; for float16 itself, convert the model and inputs (`model.half()`).
"""
from __future__ import annotations

import contextlib


class autocast(contextlib.ContextDecorator):  # noqa: N801 - torch's spelling
    """`with torch.autocast("cuda", dtype=torch.bfloat16):` (or torch.cuda.amp.autocast()): accepted; ops keep
    their inputs' dtypes inside (see the module docstring)."""

    def __init__(self, device_type: str = "cuda", dtype=None, enabled: bool = True, cache_enabled=None):
        self.device_type, self.fast_dtype, self.enabled = device_type, dtype, enabled

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class GradScaler:
    """torch's loss scaler with nothing to scale: `scale(loss)` is loss, `step(optimizer)` calls
    optimizer.step(), `update()` and `unscale_()` do nothing; `state_dict()` is torch's with scale 1."""

    def __init__(self, device: str = "cuda", init_scale: float = 2.0 ** 16, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, growth_interval: int = 2000, enabled: bool = True):
        self._enabled = enabled

    def scale(self, outputs):
        return outputs

    def unscale_(self, optimizer) -> None:
        pass

    def step(self, optimizer, *args, **kwargs):
        return optimizer.step(*args, **kwargs)

    def update(self, new_scale=None) -> None:
        pass

    def get_scale(self) -> float:
        return 1.0

    def is_enabled(self) -> bool:
        return False

    def state_dict(self) -> dict:
        return {"scale": 1.0, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 2000,
                "_growth_tracker": 0}

    def load_state_dict(self, state_dict: dict) -> None:
        pass


def is_autocast_available(device_type: str) -> bool:
    """True: autocast is accepted on every device (see the module docstring)."""
    return True


__all__ = ["GradScaler", "autocast", "is_autocast_available"]
