"""torch's index_put / index_put_: `x.index_put_((i, j), v, accumulate=False)` is `x[i, j] = v`, and with
accumulate=True `x[i, j] += v` where repeated index positions all add (NumPy's `+=` would keep one).

The other in-place scatters (scatter_, scatter_add_, scatter_reduce_, index_add_, index_copy_, index_fill_,
masked_scatter_, masked_fill_) are the functional ops of tracer/index_ops.py written back through
tracer/inplace.py (tracer/torch_tensor.py, tracer/inplace_unary.py); index_put_ takes the same path: an eager
tensor changes in place, a traced one is rebound, and a recorded one bumps its version for loss.backward().
"""
from __future__ import annotations

import math

from . import shape as _shape
from .inplace import _checked_kind
from .math import as_tensor, astype, where
from .setitem import updated
from .tensor import Tensor, TraceError, active_trace
from .view_ops import broadcast_tensors


def _index_tensors(indices, x: Tensor) -> list[Tensor]:
    if not isinstance(indices, (tuple, list)):
        raise TypeError(f"index_put: indices must be a tuple of tensors, got {type(indices).__name__}")
    if len(indices) > x.ndim:
        raise IndexError(f"index_put: too many indices ({len(indices)}) for a tensor of shape {x.shape}")
    out = []
    for k, i in enumerate(indices):
        i = as_tensor(i)
        if i.dtype == "bool":
            if active_trace() is not None:
                raise TraceError("index_put with a bool index beside others, or accumulate=True, inside a trace: "
                                 "the positions it selects depend on its values; pass integer indices "
                                 "(mask.nonzero() outside)")
            out.extend(as_tensor(c) for c in i.numpy().nonzero())
        elif i.dtype.startswith("float"):
            raise IndexError(f"index_put: index {k} must be a long, int or bool tensor, got {i.dtype}")
        else:
            out.append(astype(i, "int64"))
    return out


def index_put(input, indices, values, accumulate: bool = False) -> Tensor:  # noqa: A002
    """A new tensor: input with input[indices] = values, or += with repeated positions adding when accumulate
    (torch.index_put). indices is a tuple of integer (or bool) tensors indexing the leading dims, broadcast
    together; they address the flattened leading dims, so any number of them works inside a trace too.

    >>> import tracer
    >>> x = tracer.zeros(3)
    >>> x.index_put((tracer.tensor([0, 0, 2]),), tracer.tensor(1.0), accumulate=True).tolist()
    [2.0, 0.0, 1.0]
    """
    x = as_tensor(input)
    if not accumulate and len(indices) == 1 and as_tensor(indices[0]).dtype == "bool":
        return updated(x, as_tensor(indices[0]), values)  # x[mask] = values (a where inside a trace)
    idx = _index_tensors(indices, x)
    lead = x.shape[:len(idx)]
    rest = x.shape[len(idx):]
    if not idx:
        return x + as_tensor(values) if accumulate else _shape.broadcast_to(astype(as_tensor(values), x.dtype),
                                                                             x.shape)
    idx = list(broadcast_tensors(*idx)) if len(idx) > 1 else idx
    flat = None
    for i, n in zip(idx, lead, strict=True):  # row-major position in the flattened leading dims
        i = where(i < 0, i + n, i)
        flat = i if flat is None else flat * n + i
    flat = flat.reshape(-1)
    v = as_tensor(values)
    v = _shape.broadcast_to(astype(v, x.dtype), idx[0].shape + rest).reshape((flat.shape[0],) + rest)
    base = x.reshape((math.prod(lead),) + rest)
    put = base.index_add(0, flat, v) if accumulate else base.index_copy(0, flat, v)
    return put.reshape(x.shape)


def index_put_(self: Tensor, indices, values, accumulate: bool = False) -> Tensor:
    """In place: self[indices] = values (accumulate=True: +=, repeated positions adding), as torch's."""
    return _checked_kind(self, index_put(self, indices, values, accumulate), "index_put_")


__all__ = ["index_put"]
METHODS = {"index_put": index_put, "index_put_": index_put_}
