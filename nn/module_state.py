"""Module.state_dict and Module.load_state_dict, with torch's keys, return value and error text."""
from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

import numpy as np

from tracer import Tensor
from tracer.tensor import array_module_of


class IncompatibleKeys(NamedTuple):
    """What load_state_dict(strict=False) skipped, as torch's `_IncompatibleKeys`."""

    missing_keys: list[str]
    unexpected_keys: list[str]


class StateDictError(RuntimeError, KeyError, ValueError):
    """load_state_dict found missing, unexpected or mis-shaped keys: torch raises a RuntimeError with this text;
    it is catchable as a KeyError or ValueError too (tracegrad's earlier types)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


# torch's BatchNorm fills this buffer in (0) when a state dict without version metadata lacks it
_OPTIONAL = "num_batches_tracked"


def state_items(module, prefix: str = "") -> Iterator[tuple[str, Tensor]]:
    """Every (dotted name, Parameter or persistent buffer) path, in torch's state_dict order: a module's
    parameters, then its buffers, then each child's; a shared parameter once per name."""
    for n, p in module._parameters.items():
        yield prefix + n, p
    for n, b in module._buffers.items():
        if b is not None and n not in module._non_persistent:
            yield prefix + n, b
    for n, m in module._modules.items():
        if m is not None:
            yield from state_items(m, f"{prefix}{n}.")


def state_dict(module, destination=None, prefix: str = "", keep_vars: bool = False):
    """torch's Module.state_dict: name -> a copy of the values as a NumPy array (keep_vars=True: the Parameter or
    buffer itself), filled into `destination` when one is given."""
    out = {} if destination is None else destination
    for name, t in state_items(module, prefix):
        out[name] = t if keep_vars else np.array(t.numpy(), copy=True)
    return out


def _shape(shape) -> str:
    return f"torch.Size([{', '.join(str(d) for d in shape)}])"


def _array(value):
    if isinstance(value, Tensor):
        return value._data if value._var is None else value.numpy()
    if type(value).__module__.startswith("torch"):  # a torch tensor (torch's own state dict)
        return value.detach().cpu().numpy()
    return value if type(value).__module__.startswith("cupy") else np.asarray(value)


def load_state_dict(module, state, strict: bool = True, assign: bool = False) -> IncompatibleKeys:
    """Copy values (arrays, Tensors or torch tensors) into the parameters and buffers in place (assign=True:
    bind new Parameters/buffers holding the values instead); returns torch's (missing_keys, unexpected_keys).

    Errors are torch's text in one StateDictError (a RuntimeError, as torch's): missing and unexpected keys
    with strict=True, mis-shaped values always. Nothing is written unless the whole dict is accepted.
    """
    if not hasattr(state, "items"):
        raise TypeError(f"Expected state_dict to be dict-like, got {type(state)}.")
    targets = dict(state_items(module))
    values = {k: _array(v) for k, v in state.items()}
    missing = [k for k in targets if k not in values and not (k.rpartition(".")[2] == _OPTIONAL)]
    unexpected = [k for k in values if k not in targets]
    errors = [f"size mismatch for {k}: copying a param with shape {_shape(values[k].shape)} from checkpoint, the "
              f"shape in current model is {_shape(targets[k].shape)}."
              for k in targets if k in values and tuple(values[k].shape) != tuple(targets[k].shape)]
    if strict:
        if unexpected:
            errors.insert(0, "Unexpected key(s) in state_dict: {}. ".format(", ".join(f'"{k}"' for k in unexpected)))
        if missing:
            errors.insert(0, "Missing key(s) in state_dict: {}. ".format(", ".join(f'"{k}"' for k in missing)))
    if errors:
        raise StateDictError("Error(s) in loading state_dict for {}:\n\t{}".format(type(module).__name__,
                                                                                 "\n\t".join(errors)))
    for k, t in targets.items():
        if k not in values:
            continue
        if assign:
            _assign_value(module, k, t, values[k])
        else:  # an int64 buffer (num_batches_tracked) keeps its dtype; a GPU one takes a device copy
            t._data[...] = array_module_of(t._data).asarray(values[k])
    return IncompatibleKeys(missing, unexpected)


def _assign_value(module, key: str, old: Tensor, value) -> None:
    """assign=True: the owner's attribute becomes a new tensor holding `value` (its dtype), as torch's."""
    from .module import Parameter  # module.py imports this file

    *path, name = key.split(".")
    owner = module
    for part in path:
        owner = owner._modules[part]
    array = np.array(value, copy=True) if isinstance(value, np.ndarray) else value.copy()
    if isinstance(old, Parameter):
        setattr(owner, name, Parameter(array, requires_grad=old.requires_grad))
    else:
        setattr(owner, name, Tensor(array))
