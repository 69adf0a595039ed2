"""The errors nn.load raises for a file it will not read."""
from __future__ import annotations


class CheckpointError(ValueError):
    """A checkpoint that is damaged, malformed or of an unknown kind; the message names the file and the cause."""


class UnsafeCheckpointError(CheckpointError):
    """A PyTorch checkpoint whose pickle asks for something outside the allow-list (torch's weights_only rule):
    nothing in it was run; the message names the refused global."""


__all__ = ["CheckpointError", "UnsafeCheckpointError"]
