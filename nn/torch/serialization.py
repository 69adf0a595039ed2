"""torch.save / torch.load on tracegrad's safe formats: nn.save writes .npz (or .safetensors by the name), never
pickle; nn.load reads those and torch.save's zip checkpoints (tensors come back as NumPy arrays, numbers as 0-d
arrays). A model object (torch.save(model, path)) cannot be stored without pickle: save its state_dict()."""
from __future__ import annotations

import os
import tempfile

from .. import serialization as _ser
from ..module import Module


def save(obj, f, pickle_module=None, pickle_protocol=None, _use_new_zipfile_serialization=True) -> None:
    """nn.save(obj, f): obj a (nested) dict of Tensors, arrays and numbers (a state_dict, an optimizer's, a
    checkpoint dict); f a path or a binary file object."""
    if isinstance(obj, Module):
        raise TypeError("torch.save(model): saving a Module object would need pickle, which tracegrad never uses; "
                        "save model.state_dict() and rebuild the model with load_state_dict(torch.load(path))")
    if not isinstance(obj, dict):
        raise TypeError(f"torch.save: tracegrad stores dicts of tensors, arrays and numbers, got "
                        f"{type(obj).__name__}; wrap it: torch.save({{'value': obj}}, path)")
    if isinstance(f, (str, bytes, os.PathLike)):
        _ser.save(obj, f)
        return
    with tempfile.TemporaryDirectory() as d:  # a file object: write the format to a file, then copy it over
        path = os.path.join(d, "state.npz")
        _ser.save(obj, path)
        with open(path, "rb") as src:
            f.write(src.read())


def load(f, map_location=None, pickle_module=None, *, weights_only=None, mmap=None, **kwargs):
    """nn.load(f): f a path or a binary file object. map_location and weights_only are accepted (everything is
    read onto the host, and nothing in a file is ever run, which is torch's weights_only=True)."""
    if isinstance(f, (str, bytes, os.PathLike)):
        return _ser.load(f)
    data = f.read()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "state")
        with open(path, "wb") as dst:
            dst.write(data)
        return _ser.load(path)


__all__ = ["load", "save"]
