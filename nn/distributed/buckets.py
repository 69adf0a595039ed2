"""Flat buffers for collectives, as PyTorch's DDP buckets them: the values are packed in order into one
buffer per dtype and device until it would pass `bucket_bytes`, and each buffer is one collective.

Few large messages cost far less than one per parameter: every collective pays the network's latency
once (microseconds on a machine, tens across machines), and small messages use little bandwidth.
"""
from __future__ import annotations

import numpy as np

from tracer import Tensor

DEFAULT_BUCKET_BYTES = 25 * 2**20  # DDP's bucket_cap_mb=25


# ------------------------------------------------------------ nested values
def flatten(tree, path: str = "") -> list[tuple[str, object]]:
    """(path, leaf) for every leaf of nested tuples, lists and dicts, in order."""
    if isinstance(tree, (tuple, list)):
        return [item for i, v in enumerate(tree) for item in flatten(v, f"{path}[{i}]")]
    if isinstance(tree, dict):
        return [item for k, v in tree.items() for item in flatten(v, f"{path}[{k!r}]")]
    return [(path, tree)]


def unflatten(tree, leaves):
    """`tree` with its leaves replaced, in order, by `leaves` (an iterator)."""
    if isinstance(tree, (tuple, list)):
        items = [unflatten(v, leaves) for v in tree]
        return type(tree)(*items) if hasattr(tree, "_fields") else type(tree)(items)
    if isinstance(tree, dict):
        return type(tree)((k, unflatten(v, leaves)) for k, v in tree.items())
    return next(leaves)


def as_array(value, what: str):
    """The array behind a Tensor, NumPy or CuPy array, or Python / NumPy number (None: not a number)."""
    if isinstance(value, Tensor):
        if value._data is None:
            raise TypeError(f"{what}: got a traced Tensor; collectives run outside traced functions, on results")
        return value._data
    if isinstance(value, (bool, np.bool_)):
        return None
    if isinstance(value, (int, float, np.number)):
        return np.asarray(value)
    if hasattr(value, "shape") and hasattr(value, "dtype") and hasattr(value, "reshape"):
        return value
    return None


def like(value, array):
    """`array` in the form of `value`: a Tensor, an array, or a Python number."""
    if isinstance(value, Tensor):
        return Tensor.wrap(array)
    if isinstance(value, (int, float)):
        return type(value)(array.reshape(()).item())
    if isinstance(value, np.number):
        return array.reshape(())[()]
    return array


# ------------------------------------------------------------ buckets
def plan(arrays, bucket_bytes: int) -> list[list[int]]:
    """Indices of `arrays` per bucket: consecutive arrays of one dtype and device, <= bucket_bytes each
    unless one array alone is larger."""
    open_buckets: dict[tuple, tuple[list[int], int]] = {}
    buckets = []
    for i, a in enumerate(arrays):
        key = (str(a.dtype), type(a).__module__.split(".")[0])
        idx, size = open_buckets.get(key, ([], 0))
        if idx and size + a.nbytes > bucket_bytes:
            buckets.append(idx)
            idx, size = [], 0
        open_buckets[key] = (idx + [i], size + a.nbytes)
    return buckets + [idx for idx, _ in open_buckets.values()]


def on_gpu(array) -> bool:
    return type(array).__module__.startswith("cupy")


def _pack(arrays, idx):
    if on_gpu(arrays[idx[0]]):
        import cupy as xp  # only reached with CuPy arrays in hand
    else:
        xp = np
    flat = xp.empty(sum(arrays[i].size for i in idx), arrays[idx[0]].dtype)
    offsets = []
    start = 0
    for i in idx:
        flat[start:start + arrays[i].size] = arrays[i].reshape(-1)
        offsets.append((i, start))
        start += arrays[i].size
    return flat, offsets


def all_reduce_arrays(world, arrays, op: str, bucket_bytes: int) -> list:
    """New arrays: each of `arrays` reduced over the world, one collective per bucket. The results are
    views into the buckets' buffers (fresh memory; nothing aliases an input)."""
    out = [None] * len(arrays)
    for idx in plan(arrays, bucket_bytes):
        flat, offsets = _pack(arrays, idx)
        world.comm_for(flat).allreduce_(flat, "sum" if op == "mean" else op)
        if op == "mean":
            flat /= world.size
        for i, start in offsets:
            out[i] = flat[start:start + arrays[i].size].reshape(arrays[i].shape)
    return out


def broadcast_arrays(world, arrays, root: int, bucket_bytes: int) -> None:
    """Overwrite every array of `arrays`, in place, with root's values; one collective per bucket."""
    for idx in plan(arrays, bucket_bytes):
        flat, offsets = _pack(arrays, idx)
        world.comm_for(flat).bcast_(flat, root)
        for i, start in offsets:
            arrays[i][...] = flat[start:start + arrays[i].size].reshape(arrays[i].shape)
