"""torch.utils.data's default_collate and default_convert, making tracegrad Tensors.

default_collate stacks Tensors, NumPy arrays and NumPy scalars along a new first dimension, turns Python
floats into a float64 Tensor and ints into an int64 one (bools into bool), keeps strings as a list, and
recurses into dicts (same type), namedtuples (same type), tuples (a list, as torch) and lists.
"""
from __future__ import annotations

import collections.abc

import numpy as np

from tracer import Tensor
from tracer.tensor import array_module_of

_NO_ARRAY = "SaUO"  # strings and objects: no tensor holds them
_KINDS = "default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; found {}"


def _stack(arrays) -> Tensor:
    xp = array_module_of(arrays[0])
    shapes = {tuple(a.shape) for a in arrays}
    if len(shapes) > 1:
        raise RuntimeError(f"default_collate: stack expects each tensor to be equal size, got shapes "
                           f"{sorted(shapes)}")
    return Tensor.wrap(xp.stack([xp.asarray(a) for a in arrays]))


def _is_namedtuple(x) -> bool:
    return isinstance(x, tuple) and hasattr(x, "_fields")


def default_collate(batch):
    """Merge a list of samples into a batch, by torch's rules (see the module docstring).

    >>> import numpy as np
    >>> b = default_collate([(np.zeros(2, "float32"), 1), (np.ones(2, "float32"), 2)])
    >>> type(b).__name__, b[0].shape, b[0].dtype, b[1].dtype, b[1].tolist()
    ('list', (2, 2), 'float32', 'int64', [1, 2])
    """
    elem = batch[0]
    if isinstance(elem, Tensor):
        return _stack([t._concrete("default_collate") for t in batch])
    if isinstance(elem, np.ndarray) or isinstance(elem, np.generic):
        if elem.dtype.char in _NO_ARRAY:
            raise TypeError(_KINDS.format(elem.dtype))
        if elem.shape == ():
            return Tensor.wrap(np.asarray(batch))
        return _stack([np.asarray(a) for a in batch])
    if isinstance(elem, bool):
        return Tensor.wrap(np.asarray(batch))  # bools alone stay bool; mixed with ints they become int64
    if isinstance(elem, float):
        return Tensor.wrap(np.asarray(batch, dtype="float64"))
    if isinstance(elem, int):
        return Tensor.wrap(np.asarray(batch, dtype="int64"))
    if isinstance(elem, (str, bytes)):
        return batch
    if isinstance(elem, collections.abc.Mapping):
        merged = {key: default_collate([d[key] for d in batch]) for key in elem}
        try:
            return type(elem)(merged)
        except TypeError:  # a mapping type that cannot be built from a dict
            return merged
    if _is_namedtuple(elem):
        return type(elem)(*(default_collate(list(s)) for s in zip(*batch, strict=True)))
    if isinstance(elem, collections.abc.Sequence):
        size = len(elem)
        if any(len(e) != size for e in batch):
            raise RuntimeError("default_collate: each element in list of batch should be of equal size")
        columns = [default_collate(list(s)) for s in zip(*batch, strict=True)]
        if isinstance(elem, tuple):
            return columns  # a list, as torch's default_collate (its "backwards compatibility")
        try:
            return type(elem)(columns)
        except TypeError:
            return columns
    raise TypeError(_KINDS.format(type(elem)))


def default_convert(data):
    """What a DataLoader with batch_size=None applies to each sample: NumPy arrays and scalars become Tensors
    (strings and object arrays stay), containers are converted inside (tuples become lists, as torch), anything
    else is passed as it is."""
    if isinstance(data, (np.ndarray, np.generic)):
        return data if data.dtype.char in _NO_ARRAY else Tensor.wrap(np.asarray(data))
    if isinstance(data, (Tensor, str, bytes)):
        return data
    if isinstance(data, collections.abc.Mapping):
        converted = {key: default_convert(data[key]) for key in data}
        try:
            return type(data)(converted)
        except TypeError:
            return converted
    if _is_namedtuple(data):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, collections.abc.Sequence):
        try:
            return type(data)([default_convert(d) for d in data])
        except TypeError:
            return [default_convert(d) for d in data]
    return data


__all__ = ["default_collate", "default_convert"]
