"""torch's view-like functions: diagonal, diag, diag_embed, trace (the Tensor method; tracer.trace traces),
tril_indices, triu_indices, narrow, select, unbind, tensor_split, hsplit, vsplit, dsplit, movedim, moveaxis,
swapaxes, swapdims, broadcast_tensors, meshgrid, atleast_1d/2d/3d, repeat_interleave and Tensor.unfold.

All are compositions of reshape, permute_dims, strided_slice (and its placing twin grad.strided_slice_backward),
split, take and broadcast_to, so their gradients are those ops' rules. A diagonal is a strided slice of the
flattened last two axes (stride m + 1), so it needs no op of its own.
"""
from __future__ import annotations

import numpy as np

from . import shape as _shape
from .math import as_tensor
from .tensor import Tensor, TraceError, apply
from .torch_methods import _dim


def _int(fn: str, value, name: str) -> int:
    if isinstance(value, Tensor) and value.ndim == 0 and value._data is not None:
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{fn}: {name} must be an int, got {value!r}")
    return int(value)


def _diag_length(n: int, m: int, offset: int) -> int:
    return max(0, min(n, m - offset) if offset >= 0 else min(n + offset, m))


def diagonal(input, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:  # noqa: A002 (torch's names)
    """The diagonal of input's (dim1, dim2) planes as its last dimension; offset > 0 above the main diagonal,
    < 0 below (torch.diagonal).

    >>> import tracer
    >>> tracer.tensor([[1, 2, 3], [4, 5, 6]]).diagonal(1).tolist()
    [2, 6]
    """
    x = as_tensor(input)
    if x.ndim < 2:
        raise RuntimeError(f"diagonal: input must have at least 2 dimensions, got shape {x.shape}")
    a, b = _dim("diagonal", dim1, x.ndim), _dim("diagonal", dim2, x.ndim)
    if a == b:
        raise RuntimeError(f"diagonal: dim1 and dim2 must differ, got {dim1} and {dim2}")
    offset = _int("diagonal", offset, "offset")
    rest = [i for i in range(x.ndim) if i not in (a, b)]
    n, m = x.shape[a], x.shape[b]
    y = _shape.permute_dims(x, rest + [a, b]) if rest + [a, b] != list(range(x.ndim)) else x
    flat = _shape.reshape(y, tuple(x.shape[i] for i in rest) + (n * m,))
    length = _diag_length(n, m, offset)
    lead = (slice(None),) * len(rest)
    if not length:
        return flat[lead + (slice(0, 0),)]
    start = offset if offset >= 0 else -offset * m
    return flat[lead + (slice(start, start + (length - 1) * (m + 1) + 1, m + 1),)]


def diag_embed(input, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:  # noqa: A002
    """A tensor whose (dim1, dim2) planes (dims of the result) hold input's last dimension on the diagonal at
    `offset`, zeros elsewhere (torch.diag_embed)."""
    x = as_tensor(input)
    if x.ndim < 1:
        raise RuntimeError("diag_embed: input must have at least 1 dimension, got a 0-d tensor")
    k = x.ndim + 1
    a, b = _dim("diag_embed", dim1, k), _dim("diag_embed", dim2, k)
    if a == b:
        raise RuntimeError(f"diag_embed: dim1 and dim2 must differ, got {dim1} and {dim2}")
    offset = _int("diag_embed", offset, "offset")
    length = x.shape[-1]
    size = length + abs(offset)
    rest = x.shape[:-1]
    start = offset if offset >= 0 else -offset * size
    if length:
        flat = apply("grad.strided_slice_backward", [x], shape=rest + (size * size,), axes=[len(rest)],
                     begin=[start], end=[start + (length - 1) * (size + 1) + 1], strides=[size + 1])
    else:
        from .placement import place, tensor_device
        flat = place(_shape.zeros(rest + (size * size,), dtype=x.dtype), tensor_device(x), "diag_embed")
    z = _shape.reshape(flat, rest + (size, size))
    others = iter(range(k - 2))
    perm = [k - 2 if i == a else k - 1 if i == b else next(others) for i in range(k)]
    return z if perm == list(range(k)) else _shape.permute_dims(z, perm)


def diag(input, diagonal: int = 0) -> Tensor:  # noqa: A002
    """A 1-D input as the `diagonal`-th diagonal of a square matrix; a 2-D input's `diagonal`-th diagonal as
    1-D (torch.diag).

    >>> import tracer
    >>> tracer.diag(tracer.tensor([1, 2])).tolist()
    [[1, 0], [0, 2]]
    """
    x = as_tensor(input)
    if x.ndim == 1:
        return diag_embed(x, diagonal)
    if x.ndim == 2:
        return globals()["diagonal"](x, diagonal)
    raise RuntimeError(f"diag: input must be 1-D or 2-D, got shape {x.shape}")


def _trace(self) -> Tensor:
    """The sum of the main diagonal of a 2-D tensor (torch's x.trace(); tracer.trace is the tracer itself)."""
    if self.ndim != 2:
        raise RuntimeError(f"trace: expected a matrix, got shape {self.shape}")
    return _shape.sum(diagonal(self))


def _tri_indices(fn: str, lower: bool):
    def indices(row: int, col: int, offset: int = 0, *, dtype: str = "int64", device=None) -> Tensor:
        row, col, offset = (_int(fn, v, name) for v, name in ((row, "row"), (col, "col"), (offset, "offset")))
        pick = np.tril_indices if lower else np.triu_indices
        out = np.stack(pick(row, offset, col)).astype(dtype) if row and col else np.zeros((2, 0), dtype)
        from .placement import place
        return place(Tensor(out), device, fn)
    indices.__name__ = fn
    indices.__doc__ = (f"The 2 x N int64 (row, column) coordinates of the {'lower' if lower else 'upper'} "
                       f"triangle of a row x col matrix, offset as tril/triu's (torch.{fn}).")
    return indices


tril_indices = _tri_indices("tril_indices", True)
triu_indices = _tri_indices("triu_indices", False)

# ---------------------------------------------------------------- narrow, select, unbind, splits


def narrow(input, dim: int, start: int, length: int) -> Tensor:  # noqa: A002
    """input[..., start:start + length, ...] along dim; a negative start counts from the end (torch.narrow)."""
    x = as_tensor(input)
    d = _dim("narrow", dim, x.ndim)
    n = x.shape[d]
    start, length = _int("narrow", start, "start"), _int("narrow", length, "length")
    if not -n <= start <= n:
        raise IndexError(f"narrow: start ({start}) is out of range for dim {dim} of size {n}")
    start %= n if n else 1
    if length < 0 or start + length > n:
        raise RuntimeError(f"narrow: start ({start}) + length ({length}) exceeds dimension size ({n})")
    return x[(slice(None),) * d + (slice(start, start + length),)]


def select(input, dim: int, index: int) -> Tensor:  # noqa: A002
    """input[..., index, ...] along dim, that dim removed (torch.select)."""
    x = as_tensor(input)
    d = _dim("select", dim, x.ndim)
    n, index = x.shape[d], _int("select", index, "index")
    if not -n <= index < n:
        raise IndexError(f"select: index {index} out of range for dim {dim} of size {n}")
    return x[(slice(None),) * d + (index,)]


def unbind(input, dim: int = 0) -> tuple[Tensor, ...]:  # noqa: A002
    """The slices along dim, that dim removed from each (torch.unbind)."""
    x = as_tensor(input)
    d = _dim("unbind", dim, x.ndim)
    n = x.shape[d]
    if n == 0:
        return ()
    pieces = apply("split", [x], indices_or_sections=list(range(1, n)), axis=d) if n > 1 else (x,)
    return tuple(_shape.squeeze(p, d) for p in pieces)


def _pieces(x: Tensor, d: int, bounds: list[int]) -> tuple[Tensor, ...]:
    if all(lo <= hi for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)):
        return apply("split", [x], indices_or_sections=bounds[1:-1], axis=d)
    lead = (slice(None),) * d  # torch allows decreasing indices: later pieces overlap earlier ones
    return tuple(x[lead + (slice(lo, max(lo, hi)),)] for lo, hi in zip(bounds[:-1], bounds[1:], strict=True))


def tensor_split(input, indices_or_sections, dim: int = 0) -> tuple[Tensor, ...]:  # noqa: A002
    """Pieces along dim: an int k gives k pieces, the first n % k one longer (torch.tensor_split); a list
    gives the pieces between those indices (clamped to the dim).

    >>> import tracer
    >>> [p.shape for p in tracer.tensor_split(tracer.zeros(7), 3)]
    [(3,), (2,), (2,)]
    """
    x = as_tensor(input)
    d = _dim("tensor_split", dim, x.ndim)
    n = x.shape[d]
    spec = indices_or_sections
    if isinstance(spec, Tensor):
        spec = spec.tolist()
    if isinstance(spec, (int, np.integer)) and not isinstance(spec, bool):
        k = int(spec)
        if k <= 0:
            raise RuntimeError(f"tensor_split: number of sections must be larger than 0, got {k}")
        bounds = [0]
        for i in range(k):
            bounds.append(bounds[-1] + n // k + (1 if i < n % k else 0))
    else:
        idx = [_int("tensor_split", i, "indices entry") for i in spec]
        bounds = [0] + [min(max(i + n if i < 0 else i, 0), n) for i in idx] + [n]
    return _pieces(x, d, bounds)


def _even_split(fn: str, need: int, d: int):
    def split(input, indices_or_sections) -> tuple[Tensor, ...]:  # noqa: A002
        x = as_tensor(input)
        if x.ndim < need:
            raise RuntimeError(f"{fn}: needs a tensor of at least {need} dimension(s), got shape {x.shape}")
        axis = 0 if fn == "hsplit" and x.ndim == 1 else d
        spec = indices_or_sections
        if isinstance(spec, (int, np.integer)) and (not spec or x.shape[axis] % spec):
            raise RuntimeError(f"{fn}: dimension {axis} of size {x.shape[axis]} is not divisible by the split "
                               f"size {spec}")
        return tensor_split(x, spec, axis)
    split.__name__ = fn
    split.__doc__ = f"tensor_split along dim {d} ({fn}); an int must divide that dim evenly, as torch.{fn}."
    return split


hsplit, vsplit, dsplit = _even_split("hsplit", 1, 1), _even_split("vsplit", 2, 0), _even_split("dsplit", 3, 2)

# ---------------------------------------------------------------- moving and broadcasting


def movedim(input, source, destination) -> Tensor:  # noqa: A002
    """input with dims `source` moved to positions `destination` (ints or tuples), the others in order."""
    x = as_tensor(input)
    src = [source] if isinstance(source, (int, np.integer)) else list(source)
    dst = [destination] if isinstance(destination, (int, np.integer)) else list(destination)
    if len(src) != len(dst):
        raise RuntimeError(f"movedim: source {src} and destination {dst} must have the same number of dims")
    src = [_dim("movedim", s, max(x.ndim, 1)) for s in src]
    dst = [_dim("movedim", s, max(x.ndim, 1)) for s in dst]
    if len(set(src)) != len(src) or len(set(dst)) != len(dst):
        raise RuntimeError(f"movedim: repeated dim in source {source} or destination {destination}")
    if x.ndim == 0:
        return x
    rest = iter(i for i in range(x.ndim) if i not in src)
    where_from = dict(zip(dst, src, strict=True))
    perm = [where_from[i] if i in where_from else next(rest) for i in range(x.ndim)]
    return x if perm == list(range(x.ndim)) else _shape.permute_dims(x, perm)


moveaxis = movedim


def swapaxes(input, axis0: int, axis1: int) -> Tensor:  # noqa: A002
    """Two dims exchanged (torch.swapaxes, numpy's name; transpose)."""
    return _shape.transpose(input, axis0, axis1)


def swapdims(input, dim0: int, dim1: int) -> Tensor:  # noqa: A002
    """Two dims exchanged (torch.swapdims; transpose)."""
    return _shape.transpose(input, dim0, dim1)


def broadcast_tensors(*tensors) -> tuple[Tensor, ...]:
    """The tensors broadcast to their common shape (torch.broadcast_tensors)."""
    ts = [as_tensor(t) for t in (tensors[0] if len(tensors) == 1 and isinstance(tensors[0], (list, tuple))
                                 else tensors)]
    try:
        shape = np.broadcast_shapes(*(t.shape for t in ts))
    except ValueError:
        raise RuntimeError(f"broadcast_tensors: shapes {[t.shape for t in ts]} do not broadcast") from None
    return tuple(_shape.broadcast_to(t, shape) for t in ts)


def meshgrid(*tensors, indexing: str = "ij") -> tuple[Tensor, ...]:
    """Coordinate grids from 1-D tensors: indexing="ij" gives shape (len(t0), len(t1), ...), "xy" swaps the
    first two (torch.meshgrid; torch's default is "ij")."""
    ts = [as_tensor(t) for t in (tensors[0] if len(tensors) == 1 and isinstance(tensors[0], (list, tuple))
                                 else tensors)]
    if indexing not in ("ij", "xy"):
        raise ValueError(f"meshgrid: indexing must be 'ij' or 'xy', got {indexing!r}")
    for i, t in enumerate(ts):
        if t.ndim > 1:
            raise RuntimeError(f"meshgrid: expects 0-d or 1-D tensors, tensors[{i}] has shape {t.shape}")
    ts = [t.reshape(-1) for t in ts]
    order = list(range(len(ts)))
    if indexing == "xy" and len(ts) > 1:
        order[0], order[1] = 1, 0
    shape = tuple(ts[i].shape[0] for i in order)
    out = []
    for i, t in enumerate(ts):
        pos = order.index(i)
        view = [1] * len(ts)
        view[pos] = t.shape[0]
        out.append(_shape.broadcast_to(t.reshape(tuple(view)), shape))
    return tuple(out)


def _atleast(n: int):
    def fn(*tensors):
        ts = tensors[0] if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)) else tensors
        out = []
        for t in ts:
            t = as_tensor(t)
            if t.ndim < n:
                # torch's placement: a vector becomes a row (1, n) and then (1, n, 1); a matrix gains a last dim
                shape = (1,) * n if t.ndim == 0 else (1, t.shape[0], 1)[:n] if t.ndim == 1 else t.shape + (1,)
                t = t.reshape(shape)
            out.append(t)
        return out[0] if len(out) == 1 and not (len(tensors) == 1 and isinstance(tensors[0], (list, tuple))) \
            else tuple(out)
    fn.__name__ = f"atleast_{n}d"
    fn.__doc__ = f"Each tensor viewed with at least {n} dimension(s), as torch.atleast_{n}d."
    return fn


atleast_1d, atleast_2d, atleast_3d = _atleast(1), _atleast(2), _atleast(3)

# ---------------------------------------------------------------- repeat_interleave, unfold


def repeat_interleave(input, repeats=None, dim: int | None = None, *,  # noqa: A002
                      output_size: int | None = None) -> Tensor:
    """Each element (or each slice along dim) repeated `repeats` times in place: an int, or a tensor with one
    count per element along dim; dim=None repeats the flattened input (torch.repeat_interleave). Counts in a
    tensor fix the output shape, so inside a trace they must be known (a tensor made outside the trace).

    >>> import tracer
    >>> tracer.tensor([1, 2]).repeat_interleave(2).tolist()
    [1, 1, 2, 2]
    """
    x = as_tensor(input)
    if repeats is None:  # torch.repeat_interleave(counts): arange repeated by counts
        counts = _counts(x)
        return Tensor(np.repeat(np.arange(counts.size), counts).astype("int64"))
    if dim is None:
        x, d = x.reshape(-1), 0
    else:
        d = _dim("repeat_interleave", dim, max(x.ndim, 1))
        x = x.reshape(1) if x.ndim == 0 else x
    n = x.shape[d]
    if isinstance(repeats, (int, np.integer)) and not isinstance(repeats, bool):
        r = int(repeats)
        if r < 0:
            raise RuntimeError(f"repeat_interleave: repeats must be non-negative, got {r}")
        y = _shape.expand_dims(x, d + 1)
        y = _shape.broadcast_to(y, x.shape[:d + 1] + (r,) + x.shape[d + 1:])
        return _shape.reshape(y, x.shape[:d] + (n * r,) + x.shape[d + 1:])
    counts = _counts(as_tensor(repeats))
    if counts.size == 1 and n != 1:
        counts = np.full(n, int(counts.reshape(-1)[0]))
    if counts.shape != (n,):
        raise RuntimeError(f"repeat_interleave: repeats must have shape ({n},) (dim {d} of input of shape "
                           f"{x.shape}), got {counts.shape}")
    index = np.repeat(np.arange(n), counts.reshape(-1))
    if output_size is not None and output_size != index.size:
        raise RuntimeError(f"repeat_interleave: output_size {output_size} differs from the sum of repeats "
                           f"{index.size}")
    return _shape.take(x, Tensor(index.astype("int64")), axis=d)


def _counts(t: Tensor) -> np.ndarray:
    if t._data is None:
        raise TraceError("repeat_interleave: repeats is a traced value, but the counts fix the output's shape; "
                         "pass an int, or a tensor made outside the trace")
    if t.dtype not in ("int32", "int64"):
        raise RuntimeError(f"repeat_interleave: repeats must be an integer tensor, got {t.dtype}")
    counts = np.asarray(t.numpy()).astype("int64")
    if counts.ndim > 1 or (counts.size and counts.min() < 0):
        raise RuntimeError(f"repeat_interleave: repeats must be 0-d or 1-D and non-negative, got {counts.tolist()}")
    return counts.reshape(-1) if counts.ndim else counts


def unfold(self, dimension: int, size: int, step: int) -> Tensor:
    """The windows of `size` along `dimension`, `step` apart: that dim becomes the window count and a last dim
    of `size` is added (torch's Tensor.unfold; a take of a window index, so overlapping windows' gradients add).

    >>> import tracer
    >>> tracer.tensor([1, 2, 3, 4, 5]).unfold(0, 2, 2).tolist()
    [[1, 2], [3, 4]]
    """
    x = self if self.ndim else self.reshape(1)
    d = _dim("unfold", dimension, x.ndim)
    size, step = _int("unfold", size, "size"), _int("unfold", step, "step")
    n = x.shape[d]
    if size < 0 or size > n:
        raise RuntimeError(f"unfold: maximum size for tensor at dimension {d} is {n} but size is {size}")
    if step <= 0:
        raise RuntimeError(f"unfold: step is {step} but must be > 0")
    count = (n - size) // step + 1
    index = np.arange(count)[:, None] * step + np.arange(size)[None, :]
    y = _shape.take(x, Tensor(index.astype("int64")), axis=d)  # (..., count, size, ...)
    y = movedim(y, d + 1, -1)
    return y.reshape((size,)) if self.ndim == 0 else y


__all__ = ["atleast_1d", "atleast_2d", "atleast_3d", "broadcast_tensors", "diag", "diag_embed", "diagonal",
           "dsplit", "hsplit", "meshgrid", "moveaxis", "movedim", "narrow", "repeat_interleave", "select", "swapaxes",
           "swapdims", "tensor_split", "tril_indices", "triu_indices", "unbind", "vsplit"]
METHODS = {name: globals()[name] for name in __all__ if name not in ("broadcast_tensors", "meshgrid", "tril_indices",
                                                                    "triu_indices", "atleast_1d", "atleast_2d",
                                                                    "atleast_3d")}
METHODS.update({"trace": _trace, "unfold": unfold})
