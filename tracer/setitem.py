"""`Tensor.__setitem__`: `x[key] = value`, as in PyTorch.

An eager tensor is written in place (NumPy's assignment: every index NumPy takes, boolean masks included,
value cast to x's dtype). Inside a trace there is nothing to write: the new value is recorded
functionally, as `slice_update` and/or `index_update` (ir/ops/update.py), and x is rebound to it through
the same path as the other in-place ops (tracer/inplace.py), so every Python name holding x sees it and a
captured outside tensor gets the new value written back after each compiled call. A single boolean mask
key becomes a `where`.

A view is not tracked through a trace: after `y = x[0]; y[:] = 1`, eager x changes (NumPy's view), a
traced x does not. Assign through x itself (`x[0] = 1`) to get the same result both ways.
"""
from __future__ import annotations

import numpy as np

from ir.ops.manipulate import broadcasts_to

from . import autograd
from .device import CPU, device_of, move
from .indexing import _expand, _new_axes, _plan
from .math import astype, where
from .tensor import Tensor, TraceError, active_trace, apply, array_module_of


def setitem(x: Tensor, key, value) -> None:
    """`x[key] = value`; see the module docstring."""
    if active_trace() is None and not autograd.wants_record(x, value):
        _assign_eager(x, key, value)
        autograd.bump(x._data)
    else:  # traced, or recorded for backward (x's new value computed out of place, then written into x)
        from .inplace import write  # the in-place machinery records a write to a captured tensor

        write(x, updated(x, key, value), "x[key] = value")


def _concrete(v, what: str):
    if isinstance(v, Tensor):
        if v._var is not None:
            raise TraceError(f"x[key] = value: the {what} is a traced value ({v._var.type}) that escaped its trace")
        return v._data
    if isinstance(v, tuple):
        return tuple(_concrete(k, what) for k in v)
    return v


def _assign_eager(x: Tensor, key, value) -> None:
    if x._var is not None:
        raise TraceError(f"x[key] = value: x is a traced value ({x._var.type}) that escaped the trace that made it")
    if not x._data.flags.writeable:
        raise ValueError(f"x[key] = value: x (shape {x.shape}) is read-only memory, such as a broadcast from "
                         "expand/broadcast_to; assign to a copy")
    key, value = _concrete(key, "index"), _concrete(value, "value")
    xp = array_module_of(x._data)
    if xp is not np:  # CuPy takes its own arrays (a NumPy index or value would be refused)
        key = tuple(_on(xp, k) for k in key) if isinstance(key, tuple) else _on(xp, key)
        value = _on(xp, value)
    else:  # a GPU value is copied down, as torch's x[:] = v; GPU indices are refused, as torch's
        parts = key if isinstance(key, tuple) else (key,)
        gpu = [k for k in parts if hasattr(k, "get") and not isinstance(k, np.ndarray)]
        if gpu:
            raise RuntimeError(f"x[key] = value: the index is on {device_of(gpu[0])} but x is on cpu; move the "
                               "index with .cpu()")
        value = move(value, CPU) if hasattr(value, "get") and not isinstance(value, np.ndarray) else value
    try:
        x._data[key] = value
    except ValueError as e:  # NumPy's broadcast message, named as the traced path names it
        raise ValueError(f"x[key] = value: value of shape {np.shape(value)} cannot be written into x of shape "
                         f"{x.shape} at {key!r}: {e}") from e


def _on(xp, v):
    return xp.asarray(v) if isinstance(v, (np.ndarray, list)) else v


def _value(x: Tensor, value) -> Tensor:
    if isinstance(value, Tensor):
        return astype(value, x.dtype)
    return Tensor(np.asarray(value).astype(x.dtype))


def _mask(key):
    """A boolean mask key, as a Tensor, or None."""
    if isinstance(key, Tensor):
        return key if key.dtype == "bool" else None
    if isinstance(key, (np.ndarray, list)) and np.asarray(key).dtype == bool:
        return Tensor(np.asarray(key))
    return None


def _reshape(t: Tensor, shape) -> Tensor:
    return t if t.shape == tuple(shape) else apply("reshape", [t], shape=tuple(shape))


def updated(x: Tensor, key, value) -> Tensor:
    """A new tensor: x with x[key] replaced by value (broadcast to the indexed region)."""
    v = _value(x, value)
    mask = _mask(key)
    if mask is not None:
        if mask.shape != x.shape[:mask.ndim]:
            raise IndexError(f"x[mask] = value: mask of shape {mask.shape} does not match x of shape {x.shape}")
        if not broadcasts_to(v.shape, x.shape[mask.ndim:]):
            raise ValueError(f"x[mask] = value: inside a trace value must broadcast to {x.shape[mask.ndim:]} "
                             f"(one entry per masked element is not supported), got shape {v.shape}")
        return where(_reshape(mask, mask.shape + (1,) * (x.ndim - mask.ndim)), v, x)
    items, adjacent = _expand(x, key)
    sliced, int_axes, array_axis, index = _plan(x, items)
    region = list(x.shape)
    for ax, lo, hi, st in sliced:
        region[ax] = len(range(lo, hi, st))
    # label the dims of the region after take (T) and of x[key] (G), to lay value out as T
    labels = [("i", j) for j in range(index.ndim)] if index is not None else []
    t_labels = [lab for a in range(x.ndim) for lab in (labels if a == array_axis else [("x", a)])]
    size = {("x", a): region[a] for a in range(x.ndim)}
    size.update({("i", j): index.shape[j] for j in range(len(labels))})
    kept = [lab for lab in t_labels if not (lab[0] == "x" and lab[1] in int_axes)]
    front = bool(labels) and not adjacent
    ordered = labels + [lab for lab in kept if lab[0] == "x"] if front else kept
    g_shape = [size[lab] for lab in ordered]
    for pos in _new_axes(items, index, len(labels) if front else 0):
        g_shape.insert(pos, 1)
    if not broadcasts_to(v.shape, tuple(g_shape)):
        raise ValueError(f"x[key] = value: value of shape {v.shape} cannot be broadcast to the indexed region of "
                         f"shape {tuple(g_shape)} (x of shape {x.shape})")
    v = apply("broadcast_to", [v], shape=tuple(g_shape)) if v.shape != tuple(g_shape) else v
    v = _reshape(v, [size[lab] for lab in ordered])
    if front and ordered != kept:
        v = apply("permute_dims", [v], axes=[ordered.index(lab) for lab in kept])
    v = _reshape(v, [size[lab] for lab in t_labels])
    attrs = dict(zip(("axes", "begin", "end", "strides"), zip(*sliced, strict=True), strict=True)) if sliced else {}
    if index is None:
        return apply("slice_update", [x, v], **attrs) if sliced else v
    sub = apply("strided_slice", [x], **attrs) if sliced else x
    sub = apply("index_update", [sub, index, v], axis=array_axis)
    return apply("slice_update", [x, sub], **attrs) if sliced else sub
