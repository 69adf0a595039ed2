"""`Tensor.__getitem__`: NumPy basic indexing plus one integer-array index, lowered to IR ops.

A key becomes at most four ops: strided_slice (slices, and ints as one-element slices), squeeze (the int
axes), take (the one advanced index) and expand_dims (the None entries), with a permute_dims when NumPy
moves the advanced dims to the front.
"""
from __future__ import annotations

import numpy as np

from .tensor import Tensor, apply

_MASK_HINT = ("boolean mask indexing is not supported: its result shape depends on the mask's values; "
              "use tracer.where(mask, x, 0) instead")


def _classify(k):
    if k is None:
        return "new", None
    if k is Ellipsis:
        return "ellipsis", None
    if isinstance(k, slice):
        return "slice", k
    if isinstance(k, (bool, np.bool_)):
        raise IndexError(_MASK_HINT)
    if isinstance(k, (int, np.integer)):
        return "int", int(k)
    if isinstance(k, Tensor):
        if k.dtype == "bool":
            raise IndexError(_MASK_HINT)
        if k.dtype not in ("int32", "int64"):
            if k.ndim == 0 and k.dtype in ("int8", "uint8", "int16"):  # a 0-d one is an integer index, as torch's
                return "array", k.astype("int64")
            raise IndexError(f"a tensor used as an index must be int32 or int64, got {k.dtype}")
        return "array", k
    if isinstance(k, (list, tuple, np.ndarray)):
        arr = np.asarray(k)
        if arr.size == 0 and arr.dtype.kind == "f":
            arr = arr.astype("int64")  # np.asarray([]) is float64
        if arr.dtype.kind == "b":
            raise IndexError(_MASK_HINT)
        if arr.dtype.kind not in "iu":
            raise IndexError(f"an array used as an index must hold integers, got {arr.dtype}")
        return "array", Tensor(arr if arr.dtype == np.int32 else arr.astype("int64"))
    raise TypeError(f"invalid index {k!r} of type {type(k).__name__}: use an int, a slice, None, ..., or an "
                    "integer tensor or list")


def _expand(x: Tensor, key) -> tuple[list[tuple[str, object]], bool]:
    """The key's items with the ellipsis expanded, and whether its advanced items (ints and the array
    index) sit side by side; NumPy counts an ellipsis between them as a gap even when it spans no axis."""
    items = [_classify(k) for k in (key if isinstance(key, tuple) else (key,))]
    kinds = [kind for kind, _ in items]
    if kinds.count("ellipsis") > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if kinds.count("array") > 1:
        raise IndexError(f"only one integer tensor/list index is supported per indexing expression, got "
                         f"{kinds.count('array')}; index one axis at a time")
    used = sum(kind in ("int", "slice", "array") for kind in kinds)
    if used > x.ndim:
        raise IndexError(f"too many indices for a tensor of shape {x.shape}: {used} were indexed")
    group = [i for i, kind in enumerate(kinds) if kind in ("int", "array")]
    adjacent = not group or group == list(range(group[0], group[-1] + 1))
    if "ellipsis" in kinds:
        i = kinds.index("ellipsis")
        items[i:i + 1] = [("slice", slice(None))] * (x.ndim - used)
    return items, adjacent


def _plan(x: Tensor, items):
    """The normalized slices (ints as one-element slices) as (axis, begin, end, stride), the int axes, and
    the axis and tensor of the array index (None, None without one)."""
    sliced, int_axes = [], []
    array_axis, index = None, None
    ax = 0
    for kind, k in items:
        if kind == "new":
            continue
        n = x.shape[ax]
        if kind == "int":
            if not -n <= k < n:
                raise IndexError(f"index {k} is out of bounds for axis {ax} with size {n}")
            k = slice(k % n, k % n + 1, 1)
            int_axes.append(ax)
        if kind == "array":
            array_axis, index = ax, k
        elif k.indices(n) != (0, n, 1):
            lo, hi, st = k.indices(n)
            if not len(range(lo, hi, st)):
                lo = hi = 0  # every empty slice reads the same; this form is always in range
            sliced.append((ax, lo, hi, st))
        ax += 1
    return sliced, int_axes, array_axis, index


def getitem(x: Tensor, key) -> Tensor:
    """`x[key]` with NumPy's meaning for ints, slices, None, ... and a single integer-array index."""
    items, adjacent = _expand(x, key)
    sliced, int_axes, array_axis, index = _plan(x, items)
    y = x
    if sliced:
        axes, begin, end, strides = zip(*sliced, strict=True)
        y = apply("strided_slice", [y], axes=axes, begin=begin, end=end, strides=strides)
    if int_axes:
        y = apply("squeeze", [y], axis=int_axes)
    front = 0
    if index is not None:
        pos = array_axis - sum(a < array_axis for a in int_axes)
        y = apply("take", [y, index], axis=pos)
        # NumPy counts ints as advanced indices too; when they are not adjacent to the array index, the
        # advanced dims move to the front of the result.
        if not adjacent:
            front = index.ndim
            if pos:
                rest = [a for a in range(y.ndim) if not pos <= a < pos + front]
                y = apply("permute_dims", [y], axes=list(range(pos, pos + front)) + rest)
    new_axes = _new_axes(items, index, front)
    if new_axes:
        y = apply("expand_dims", [y], axis=new_axes)
    return y


def _new_axes(items, index, front: int) -> list[int]:
    """The result positions of the key's None entries (`front` advanced dims lead the result)."""
    new_axes, out = [], front
    for kind, _ in items:
        if kind == "new":
            new_axes.append(out)
        if kind in ("new", "slice"):
            out += 1
        elif kind == "array" and not front:
            out += index.ndim
    return new_axes
