"""torch.distributions: nn.distributions' classes (imported when first asked for)."""
from __future__ import annotations

import importlib


def __getattr__(name: str):
    if name.startswith("__"):
        raise AttributeError(f"module 'nn.torch.distributions' has no attribute {name!r}")
    try:
        module = importlib.import_module("nn.distributions")
    except ImportError as e:  # pragma: no cover - nn.distributions ships with tracegrad
        raise AttributeError(f"torch.distributions.{name}: nn.distributions is not available ({e})") from e
    try:
        return getattr(module, name)
    except AttributeError:
        from tracer.torch_hints import MissingTorchAttribute

        raise MissingTorchAttribute("module 'nn.torch.distributions'", name,
                                    lambda: [n for n in dir(module) if not n.startswith("_")], frozenset(), {},
                                    "torch.distributions") from None
