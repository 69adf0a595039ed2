"""Shape manipulation: reshape, permute_dims, broadcast_to, collapse_sum_to, expand_dims, squeeze, concat,
stack, split, strided_slice, take (and check_index, its bounds check), tril and triu, and the backward helpers
of strided_slice and take."""
from __future__ import annotations

import math

from ..types import INT_DTYPES, TensorType, TupleType
from .common import norm_axes, norm_axis
from .registry import Attr, declare, tensor_arg

# ---------------------------------------------------------------- reshape, permute_dims


def _infer_reshape(op, types, shape):
    x = tensor_arg(op, types, 0)
    if any(d < 0 for d in shape):
        raise op.error(f"shape {shape} has a negative dimension; the IR takes concrete shapes (tracer.reshape "
                       "resolves -1)")
    if math.prod(shape) != x.size:
        raise op.error(f"cannot reshape x of shape {x.shape} ({x.size} elements) into shape {shape} "
                       f"({math.prod(shape)} elements)")
    return TensorType(shape, x.dtype)


declare("reshape", attrs=(Attr("shape", "shape"),), infer=_infer_reshape,
        kernel=lambda xp, x, shape: xp.reshape(x, shape))


def perm_axes(op, axes, ndim: int) -> tuple[int, ...]:
    """Normalized permutation; None reverses the axes."""
    if axes is None:
        return tuple(reversed(range(ndim)))
    norm = tuple(norm_axis(op, a, ndim, "axes entry") for a in axes) if ndim else tuple(axes)
    if sorted(norm) != list(range(ndim)):
        raise op.error(f"axes {list(axes)} is not a permutation of the {ndim} axes of x")
    return norm


def _infer_permute(op, types, axes):
    x = tensor_arg(op, types, 0)
    return TensorType(tuple(x.shape[a] for a in perm_axes(op, axes, x.ndim)), x.dtype)


declare("permute_dims", attrs=(Attr("axes", "axes", None),), infer=_infer_permute,
        kernel=lambda xp, x, axes: xp.transpose(x, axes))

# ---------------------------------------------------------------- broadcast_to, collapse_sum_to


def broadcasts_to(src: tuple[int, ...], dst: tuple[int, ...]) -> bool:
    """True when NumPy broadcasts shape `src` to exactly `dst`."""
    if len(src) > len(dst):
        return False
    return all(s in (1, d) for s, d in zip(src, dst[len(dst) - len(src):], strict=True))


def _infer_broadcast_to(op, types, shape):
    x = tensor_arg(op, types, 0)
    if not broadcasts_to(x.shape, shape):
        raise op.error(f"cannot broadcast x of shape {x.shape} to shape {shape}")
    return TensorType(shape, x.dtype)


declare("broadcast_to", attrs=(Attr("shape", "shape"),), infer=_infer_broadcast_to,
        kernel=lambda xp, x, shape: xp.broadcast_to(x, shape))


def _infer_collapse(op, types, shape):
    x = tensor_arg(op, types, 0)
    if not broadcasts_to(shape, x.shape):
        raise op.error(f"shape {shape} does not broadcast to data of shape {x.shape}, so data cannot be "
                       "summed back to it")
    return TensorType(shape, x.dtype)


def _collapse_sum_to(xp, x, shape):
    lead = x.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, d in enumerate(shape) if d == 1 and x.shape[lead + i] != 1)
    if not axes:
        return x
    return xp.sum(x, axis=axes, keepdims=True).reshape(shape).astype(x.dtype, copy=False)


# Sums a broadcast value back to the shape it was broadcast from (the Gradient pass's unbroadcast).
declare("collapse_sum_to", ("data",), (Attr("shape", "shape"),), infer=_infer_collapse, kernel=_collapse_sum_to)

# ---------------------------------------------------------------- expand_dims, squeeze


def _infer_expand_dims(op, types, axis):
    x = tensor_arg(op, types, 0)
    ndim = x.ndim + len(axis)
    axes = norm_axes(op, axis, ndim)
    dims = iter(x.shape)
    return TensorType(tuple(1 if i in axes else next(dims) for i in range(ndim)), x.dtype)


def _expand_dims(xp, x, axis):
    ndim = x.ndim + len(axis)
    axes = {a % ndim for a in axis}
    dims = iter(x.shape)
    return xp.reshape(x, tuple(1 if i in axes else next(dims) for i in range(ndim)))


def _infer_squeeze(op, types, axis):
    x = tensor_arg(op, types, 0)
    if axis is None:
        axes = tuple(i for i, d in enumerate(x.shape) if d == 1)
    else:
        axes = norm_axes(op, axis, x.ndim, scalar_ok=True)  # on a 0-d tensor axis 0 / -1 drops nothing
        axes = axes if x.ndim else ()
        wrong = [a for a in axes if x.shape[a] != 1]
        if wrong:
            raise op.error(f"cannot squeeze axis {wrong[0]} of x of shape {x.shape}: its size is "
                           f"{x.shape[wrong[0]]}, not 1")
    return TensorType(tuple(d for i, d in enumerate(x.shape) if i not in axes), x.dtype)


def _squeeze(xp, x, axis):
    if x.ndim == 0:
        return x
    axes = {a % x.ndim for a in axis} if axis is not None else {i for i, d in enumerate(x.shape) if d == 1}
    return xp.reshape(x, tuple(d for i, d in enumerate(x.shape) if i not in axes))


declare("expand_dims", attrs=(Attr("axis", "ints"),), infer=_infer_expand_dims, kernel=_expand_dims)
declare("squeeze", attrs=(Attr("axis", "axes", None),), infer=_infer_squeeze, kernel=_squeeze)

# ---------------------------------------------------------------- concat, stack, split


def _tensors(op, types) -> list[TensorType]:
    if not types:
        raise op.error("needs at least one tensor")
    for i, t in enumerate(types):
        if not isinstance(t, TensorType):
            raise op.error(f"tensors[{i}] must be a tensor, got {t}")
    dtypes = {t.dtype for t in types}
    if len(dtypes) > 1:
        raise op.error(f"tensors must share one dtype, got {[t.dtype for t in types]}; insert astype to convert")
    return types


def _infer_concat(op, types, axis):
    ts = _tensors(op, types)
    first = ts[0]
    if first.ndim == 0:
        raise op.error("cannot concatenate 0-d tensors (use stack)")
    ax = norm_axis(op, axis, first.ndim)
    for i, t in enumerate(ts[1:], 1):
        if t.ndim != first.ndim or any(t.shape[k] != d for k, d in enumerate(first.shape) if k != ax):
            raise op.error(f"tensors[{i}] of shape {t.shape} does not match tensors[0] of shape {first.shape} "
                           f"outside axis {axis}")
    shape = list(first.shape)
    shape[ax] = sum(t.shape[ax] for t in ts)
    return TensorType(tuple(shape), first.dtype)


def _infer_stack(op, types, axis):
    ts = _tensors(op, types)
    first = ts[0]
    for i, t in enumerate(ts[1:], 1):
        if t.shape != first.shape:
            raise op.error(f"tensors[{i}] of shape {t.shape} differs from tensors[0] of shape {first.shape}")
    ax = norm_axis(op, axis, first.ndim + 1)
    return TensorType(first.shape[:ax] + (len(ts),) + first.shape[ax:], first.dtype)


declare("concat", ("*tensors",), (Attr("axis", "int", 0),), infer=_infer_concat,
        kernel=lambda xp, xs, axis: xp.concatenate(xs, axis=axis))
declare("stack", ("*tensors",), (Attr("axis", "int", 0),), infer=_infer_stack,
        kernel=lambda xp, xs, axis: xp.stack(xs, axis=axis))


def split_bounds(op, n: int, indices_or_sections, where: str = "") -> tuple[int, ...]:
    """The piece boundaries (0, ..., n) along an axis of size n, with Relax's meaning: an int is a number of
    sections, each ceil(n / sections) long but the last (TOPI's rule; np.split's when it divides), a list
    holds split indices."""
    if isinstance(indices_or_sections, int):
        k = indices_or_sections
        if k < 1:
            raise op.error(f"indices_or_sections={k}: the number of sections must be at least 1{where}")
        size = -(-n // k)
        if size * (k - 1) > n:
            raise op.error(f"an axis of size {n} cannot be split into {k} sections of {size} (the last would be "
                           f"empty or negative){where}; give split indices instead")
        return tuple(min(size * i, n) for i in range(k)) + (n,)
    bounds = (0,) + tuple(indices_or_sections) + (n,)
    if any(lo > hi for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)):
        raise op.error(f"split indices {list(indices_or_sections)} must be non-decreasing and within 0..{n}{where}")
    return bounds


def _infer_split(op, types, indices_or_sections, axis):
    x = tensor_arg(op, types, 0)
    if x.ndim == 0:
        raise op.error("cannot split a 0-d tensor")
    ax = norm_axis(op, axis, x.ndim)
    bounds = split_bounds(op, x.shape[ax], indices_or_sections, f" (axis {axis} of x of shape {x.shape})")
    pieces = []
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        shape = list(x.shape)
        shape[ax] = hi - lo
        pieces.append(TensorType(tuple(shape), x.dtype))
    return TupleType(tuple(pieces))


def _split(xp, x, indices_or_sections, axis):
    bounds = split_bounds(None, x.shape[axis], indices_or_sections)  # validated by inference
    return tuple(xp.split(x, list(bounds[1:-1]), axis=axis))


# `indices_or_sections` means what it means in Relax: an int is a number of sections, a list split indices.
declare("split", attrs=(Attr("indices_or_sections", "sections"), Attr("axis", "int", 0)), infer=_infer_split,
        kernel=_split)

# ---------------------------------------------------------------- strided_slice, take and their backward


def _infer_slice(op, types, axes, begin, end, strides):
    x = tensor_arg(op, types, 0)
    if not len(axes) == len(begin) == len(end) == len(strides):
        raise op.error(f"axes {list(axes)}, begin {list(begin)}, end {list(end)} and strides {list(strides)} "
                       "must have one entry per sliced axis")
    norm = [norm_axis(op, a, x.ndim, "axes entry") for a in axes]
    if len(set(norm)) != len(norm):
        raise op.error(f"repeated axis in axes {list(axes)}")
    shape = list(x.shape)
    for a, lo, hi, st in zip(norm, begin, end, strides, strict=True):
        n = x.shape[a]
        # begin/end are normalized: non-negative, at most n, and end == -1 only for a negative stride,
        # meaning "up to and including index 0"; a non-empty slice touches only indices 0..n-1.
        ok = st != 0 and 0 <= lo <= n and (0 if st > 0 else -1) <= hi <= n
        length = len(range(lo, hi, st)) if ok else 0
        if not ok or (st < 0 and length and lo >= n):
            raise op.error(f"axis {a}: begin {lo}, end {hi}, stride {st} is not a normalized slice of a dimension "
                           f"of size {n} (x of shape {x.shape})")
        shape[a] = length
    return TensorType(tuple(shape), x.dtype)


def slice_index(ndim: int, axes, begin, end, strides) -> tuple:
    """The Python index that a normalized strided_slice stands for."""
    index = [slice(None)] * ndim
    for a, lo, hi, st in zip(axes, begin, end, strides, strict=True):
        index[a % ndim] = slice(lo, None if hi == -1 else hi, st)
    return tuple(index)


SLICE_ATTRS = (Attr("axes", "ints"), Attr("begin", "ints"), Attr("end", "ints"), Attr("strides", "ints"))
def relax_slice_end(n: int, end: int, stride: int) -> int:
    """The end Relax reads as ours: with a negative stride our end -1 means "through index 0", which Relax
    (counting a negative end from the back, as Python) writes -(n + 1). ir.parse applies slice.indices back."""
    return -(n + 1) if stride < 0 and end == -1 else end


# begin/end are normalized (see _infer_slice); the printer and parser translate to and from Relax's form.
declare("strided_slice", attrs=SLICE_ATTRS, infer=_infer_slice, fixed={"assume_inbound": (False, True)},
        kernel=lambda xp, x, axes, begin, end, strides: x[slice_index(x.ndim, axes, begin, end, strides)])


def _infer_slice_backward(op, types, shape, axes, begin, end, strides):
    data = tensor_arg(op, types, 0)
    sliced = _infer_slice(op, [TensorType(shape, data.dtype)], axes, begin, end, strides).shape
    if data.shape != sliced:
        raise op.error(f"data of shape {data.shape} does not match the slice of shape {sliced} taken from {shape}")
    return TensorType(shape, data.dtype)


def _slice_backward(xp, data, shape, axes, begin, end, strides):
    out = xp.zeros(shape, data.dtype)
    out[slice_index(len(shape), axes, begin, end, strides)] = data
    return out


# The gradient of strided_slice: data placed into zeros of the sliced tensor's shape.
declare("grad.strided_slice_backward", ("data",), (Attr("shape", "shape"),) + SLICE_ATTRS,
        infer=_infer_slice_backward, kernel=_slice_backward)


def _take_shape(op, x: TensorType, indices: TensorType, axis: int) -> tuple[int, ...]:
    if indices.dtype not in INT_DTYPES:
        raise op.error(f"indices must be int32 or int64 (or a narrower integer), got {indices.dtype}")
    if x.ndim == 0:
        raise op.error("cannot take from a 0-d tensor")
    ax = norm_axis(op, axis, x.ndim)
    return x.shape[:ax] + indices.shape + x.shape[ax + 1:]


TAKE_MODES = ("fast", "wrap", "clip")


def _check_mode(op, mode):
    if mode not in TAKE_MODES:
        raise op.error(f"mode must be one of {list(TAKE_MODES)}, got {mode!r}")


def _infer_take(op, types, axis, mode):
    x, indices = tensor_arg(op, types, 0), tensor_arg(op, types, 1)
    _check_mode(op, mode)
    return TensorType(_take_shape(op, x, indices, axis), x.dtype)


def _wrap(xp, indices, n, op, axis):
    """Indices in 0..n-1, negative ones counted from the end. Out-of-range ones raise: NumPy would read
    index -n-1 as -1 after the shift, and CuPy wraps every index."""
    bad = (indices < -n) | (indices >= n)
    if indices.size and bool(bad.any()):
        raise IndexError(f"{op}: index {int(indices[bad].reshape(-1)[0])} is out of range for axis {axis} "
                         f"of size {n}")
    return xp.where(indices < 0, indices + n, indices)


def _positions(xp, indices, n, mode, op, axis):
    """Relax's take modes: "wrap" reduces modulo n, "clip" clamps to 0..n-1; "fast" (Relax: no check,
    out-of-range undefined) reads negative indices from the end and raises on out-of-range ones."""
    if mode == "fast" or not indices.size:
        return _wrap(xp, indices, n, op, axis)
    if n == 0:
        raise IndexError(f"{op}: cannot take from axis {axis} of size 0 (mode={mode!r})")
    return xp.mod(indices, n) if mode == "wrap" else xp.clip(indices, 0, n - 1)


def _take(xp, x, indices, axis, mode):
    return xp.take(x, _positions(xp, indices, x.shape[axis], mode, "take", axis), axis=axis)


declare("take", ("x", "indices"), (Attr("axis", "int", 0), Attr("mode", "str", "fast")), infer=_infer_take,
        kernel=_take)


def _infer_take_backward(op, types, shape, axis, mode):
    data, indices = tensor_arg(op, types, 0), tensor_arg(op, types, 1)
    _check_mode(op, mode)
    taken = _take_shape(op, TensorType(shape, data.dtype), indices, axis)
    if data.shape != taken:
        raise op.error(f"data of shape {data.shape} does not match take from shape {shape} with indices of "
                       f"shape {indices.shape} along axis {axis} (expected {taken})")
    return TensorType(shape, data.dtype)


def _take_backward(xp, data, indices, shape, axis, mode):
    out = xp.zeros(shape, data.dtype)
    axis %= len(shape)
    # add.at, not assignment: repeated indices must accumulate. On CuPy (>= 12) ufunc.at is one atomic scatter
    # kernel on the device (cupyx.scatter_add's, whose spelling CuPy now deprecates), never a host loop.
    index = _positions(xp, indices, shape[axis], mode, "grad.take_backward", axis)
    xp.add.at(out, (slice(None),) * axis + (index,), data)
    return out


# The gradient of take: data scatter-added into zeros of the gathered tensor's shape.
declare("grad.take_backward", ("data", "indices"),
        (Attr("shape", "shape"), Attr("axis", "int", 0), Attr("mode", "str", "fast")),
        infer=_infer_take_backward, kernel=_take_backward)

# ---------------------------------------------------------------- check_index


def _infer_check_index(op, types, lower, upper, what):
    indices = tensor_arg(op, types, 0)
    if indices.dtype not in INT_DTYPES:
        raise op.error(f"indices must be int32 or int64 (or a narrower integer), got {indices.dtype}")
    if lower > upper:
        raise op.error(f"lower {lower} is above upper {upper}")
    return indices


class IndexRangeError(IndexError, RuntimeError):
    """An index outside the range an op accepts (check_index): torch raises IndexError (index_select, embedding)
    or RuntimeError (gather, scatter) for these; this is both."""


def _check_index(xp, indices, lower, upper, what):
    """indices itself, after one pass over it: an index outside [lower, upper) raises IndexRangeError."""
    if not indices.size:
        return indices
    if lower == 0:  # negative indices become huge unsigned ones: one comparison finds both kinds
        bad = indices.view(f"uint{indices.dtype.itemsize * 8}") >= upper
    else:
        bad = (indices < lower) | (indices >= upper)
    if bool(bad.any()):
        lo = int(indices.min())
        raise IndexRangeError(f"{what}: index {lo if lo < lower else int(indices.max())} is out of range "
                              f"[{lower}, {upper})")
    return indices


# A bounds check with the message an eager run gives (nn.Embedding's), so that a compiled step raises as eager
# code does; tracegrad's own op (Relax's take has no checking mode), printed R.check_index(...).
declare("check_index", ("indices",), (Attr("lower", "int"), Attr("upper", "int"), Attr("what", "str", "index")),
        infer=_infer_check_index, kernel=_check_index, differentiable=False)

# ---------------------------------------------------------------- tril, triu


def _infer_tri(op, types, k):
    x = tensor_arg(op, types, 0)
    if x.ndim < 2:
        raise op.error(f"x must have at least 2 dimensions, got shape {x.shape}")
    return x


def _tri(upper):
    def kernel(xp, x, k):
        n, m = x.shape[-2:]
        keep = xp.tri(n, m, k - 1 if upper else k, dtype=bool)
        keep = ~keep if upper else keep
        return xp.where(keep, x, xp.zeros((), x.dtype))
    return kernel


declare("tril", attrs=(Attr("k", "int", 0),), infer=_infer_tri, kernel=_tri(False))
declare("triu", attrs=(Attr("k", "int", 0),), infer=_infer_tri, kernel=_tri(True))
