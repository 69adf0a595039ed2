"""Element-wise gathers and scatters along one axis, Relax's `gather_elements` and `scatter_elements`
(torch's gather and scatter / scatter_add / scatter_reduce; tracer/index_ops.py builds torch's spellings
on them).

    out[i][j][k] = data[i][indices[i][j][k]][k]                      gather_elements(data, indices, axis=1)
    out = data; out[i][indices[i][j][k]][k] (op)= updates[i][j][k]   scatter_elements(data, indices, updates, 1)

`reduction` is Relax's: "update" (the last write wins where indices repeat), "add", "mul", "min", "max"
(each combines data's own value with every update, as torch's include_self=True). Negative indices count
from the end, as Relax documents (TVM 0.27's compiled gather_elements reads them out of bounds instead); an
index out of range raises IndexError.
"""
from __future__ import annotations

from ..types import INT_DTYPES, TensorType
from .common import norm_axis
from .manipulate import _wrap
from .registry import Attr, declare, tensor_arg

REDUCTIONS = ("update", "add", "mul", "min", "max")


def _check_indices(op, data: TensorType, indices: TensorType, axis: int, what: str = "data") -> int:
    if indices.dtype not in INT_DTYPES:
        raise op.error(f"indices must be int32 or int64 (or a narrower integer), got {indices.dtype}")
    if indices.ndim != data.ndim:
        raise op.error(f"indices of shape {indices.shape} must have as many dimensions as {what} of shape "
                       f"{data.shape}")
    ax = norm_axis(op, axis, data.ndim, scalar_ok=True)
    for d, (n, m) in enumerate(zip(indices.shape, data.shape, strict=True)):
        if d != ax and n > m:
            raise op.error(f"indices of shape {indices.shape} is larger than {what} of shape {data.shape} in "
                           f"dimension {d} (only axis {axis} may be larger)")
    return ax


def _infer_gather(op, types, axis):
    data, indices = tensor_arg(op, types, 0), tensor_arg(op, types, 1)
    _check_indices(op, data, indices, axis)
    return TensorType(indices.shape, data.dtype)


def full_index(xp, indices, axis: int) -> tuple:
    """The advanced index that reads, for every position of `indices`, data at that position with the `axis`
    coordinate replaced by the index (a broadcast arange on every other axis)."""
    ndim = indices.ndim
    key = []
    for d in range(ndim):
        if d == axis:
            key.append(indices)
        else:
            shape = [1] * ndim
            shape[d] = indices.shape[d]
            key.append(xp.arange(indices.shape[d]).reshape(shape))
    return tuple(key)


def _positions(xp, indices, n, op, axis):
    return _wrap(xp, indices, n, op, axis).astype("int64", copy=False)


def _gather(xp, data, indices, axis):
    if data.ndim == 0:
        _positions(xp, indices.reshape(1), 1, "gather_elements", axis)
        return data.copy()
    axis %= data.ndim
    return data[full_index(xp, _positions(xp, indices, data.shape[axis], "gather_elements", axis), axis)]


declare("gather_elements", ("data", "indices"), (Attr("axis", "int", 0),), infer=_infer_gather, kernel=_gather,
        doc="out[..., j, ...] = data[..., indices[..., j, ...], ...] along axis (torch.gather).")


def _infer_scatter(op, types, axis, reduction):
    data, indices, updates = (tensor_arg(op, types, i) for i in range(3))
    if reduction not in REDUCTIONS:
        raise op.error(f"reduction must be one of {list(REDUCTIONS)}, got {reduction!r}")
    _check_indices(op, data, indices, axis)
    if updates.shape != indices.shape:
        raise op.error(f"updates of shape {updates.shape} must have the shape of indices {indices.shape}")
    if updates.dtype != data.dtype:
        raise op.error(f"updates has dtype {updates.dtype} but data has dtype {data.dtype}; insert astype to "
                       "convert")
    return data


def _rounds(xp, flat):
    """For each position of the flat target indices, how many earlier positions hit the same target: the
    updates of round r (rank == r) hit distinct targets, so a plain indexed write combines them exactly."""
    order = xp.argsort(flat, kind="stable")
    ordered = flat[order]
    rank = xp.empty_like(order)
    rank[order] = xp.arange(flat.size) - xp.searchsorted(ordered, ordered, side="left")
    return rank


def _scatter(xp, data, indices, updates, axis, reduction):
    shape, out = data.shape, data.copy()
    if indices.size == 0:
        return out
    if data.ndim == 0:
        _positions(xp, indices.reshape(1), 1, "scatter_elements", axis)
        data, indices, updates, out = data.reshape(1), indices.reshape(1), updates.reshape(1), out.reshape(1)
    axis %= data.ndim
    key = full_index(xp, _positions(xp, indices, data.shape[axis], "scatter_elements", axis), axis)
    if reduction == "update":
        out[key] = updates
    elif reduction in ("add", "max", "min"):  # one atomic scatter on CuPy (cupyx.scatter_add/max/min)
        ufunc = {"add": xp.add, "max": xp.maximum, "min": xp.minimum}[reduction]
        ufunc.at(out, key, updates)
    else:  # CuPy has no multiply.at: combine the repeats in rounds of distinct targets
        target = xp.ravel_multi_index(tuple(xp.broadcast_to(k, indices.shape) for k in key), data.shape).reshape(-1)
        rank, values = _rounds(xp, target), updates.reshape(-1)
        flat = out.reshape(-1)  # a view of out (a fresh copy, so contiguous)
        for r in range(int(rank.max()) + 1):
            hit = rank == r
            flat[target[hit]] = flat[target[hit]] * values[hit]
    return out.reshape(shape)


declare("scatter_elements", ("data", "indices", "updates"),
        (Attr("axis", "int", 0), Attr("reduction", "str", "update")), infer=_infer_scatter, kernel=_scatter,
        doc="data with updates combined (reduction) into the entries that gather_elements(data, indices) reads.")
