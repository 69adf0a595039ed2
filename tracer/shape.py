"""Reductions, matmul, shape manipulation and tensor creation (NumPy spelling, PyTorch defaults)."""
from __future__ import annotations

import math

import numpy as np

from ir.types import INT_DTYPES

from .indexing import getitem
from .math import as_tensor, astype, promote
from .placement import place
from .placement import tensor_device as _device_of
from .tensor import Tensor, apply
from .tensor_grad import made


def _ints(value) -> tuple[int, ...]:
    """One int or a sequence of them, as a tuple. Nothing is converted with int(): the op's attribute
    check refuses floats (2.7 must not become 2) and names the op and the attribute."""
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        return (value,)
    return tuple(value)


def _axes(axis) -> tuple[int, ...] | None:
    return None if axis is None else _ints(axis)


def _axis(fn: str, axis: int, ndim: int, name: str = "axis") -> int:
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        raise TypeError(f"{fn}: {name} must be an int, got {axis!r}")
    if not -ndim <= axis < ndim:
        raise ValueError(f"{fn}: axis {axis} out of range for a tensor of {ndim} dimension(s)")
    return axis % ndim


# ---------------------------------------------------------------- reductions


def _reduction(op, public, what):
    def fn(x, axis=None, keepdims: bool = False) -> Tensor:
        return apply(op, [as_tensor(x)], axis=_axes(axis), keepdims=keepdims)
    fn.__name__ = public
    fn.__doc__ = f"The {what} over `axis` (an int, a tuple, or None for all axes)."
    return fn


_sum = _reduction("sum", "sum", "sum")


def sum(x, axis=None, keepdims: bool = False) -> Tensor:
    """The sum over `axis` (an int, a tuple, or None for all axes). bool and every integer dtype accumulate into
    int64, as PyTorch (the IR's `sum` keeps its input dtype, as Relax's).

    >>> import tracer
    >>> tracer.sum(tracer.tensor([True, True, False])).numpy().tolist()
    2
    """
    x = as_tensor(x)
    return _sum(astype(x, "int64") if x.dtype in ("bool", *INT_DTYPES) else x, axis, keepdims)
mean = _reduction("mean", "mean", "mean")
max = _reduction("max", "max", "maximum")
min = _reduction("min", "min", "minimum")


def var(x, axis=None, keepdims: bool = False, *, correction: int = 0, unbiased: bool | None = None) -> Tensor:
    """Variance over `axis`, divided by n - correction: the population variance by default (correction=0, NumPy's
    ddof=0); `correction=1` (or `unbiased=True`) is torch's default, the sample variance, and the default of the
    Tensor method `x.var()` and of nn.torch's `torch.var` (tracer/torch_meaning.py).

    >>> import tracer
    >>> x = tracer.tensor([1.0, 2.0, 3.0, 4.0])
    >>> tracer.var(x).item(), round(tracer.var(x, correction=1).item(), 4), round(x.var().item(), 4)
    (1.25, 1.6667, 1.6667)
    """
    x = as_tensor(x)
    if unbiased is not None:
        correction = int(bool(unbiased))
    v = apply("variance", [x], axis=_axes(axis), keepdims=keepdims)
    if not correction:
        return v
    axes = range(x.ndim) if axis is None else [_axis("var", a, x.ndim) for a in _ints(axis)]
    n = math.prod(x.shape[a] for a in axes)
    if n > correction:
        return v * (n / (n - correction))
    # torch divides the sum of squares by max(0, n - correction): inf, or nan where that sum is 0 (or nan)
    import warnings
    warnings.warn("var(): degrees of freedom is <= 0. Correction should be strictly less than the reduction factor "
                  "(input numel divided by output numel)", UserWarning, stacklevel=2)
    # v * inf: inf where v > 0, nan where v == 0 (or nan), and the gradient flows through as torch's (nan or +-inf)
    return v * float("inf") if n else v


def argmax(x, axis: int | None = None, keepdims: bool = False) -> Tensor:
    """Index (int64) of the first maximum along `axis`, or into the flattened tensor when axis is None.

    >>> import tracer
    >>> tracer.argmax(tracer.tensor([[1.0, 5.0], [7.0, 2.0]]), axis=1).numpy().tolist()
    [1, 0]
    """
    return apply("argmax", [as_tensor(x)], axis=axis, keepdims=keepdims)


def matmul(x1, x2) -> Tensor:
    """Matrix product with NumPy's rules: 1-D operands, batch dims broadcast."""
    return apply("matmul", promote(x1, x2))


# ---------------------------------------------------------------- shape manipulation


def reshape(x, shape) -> Tensor:
    """`x` with a new shape of the same size; one entry may be -1 and is inferred.

    >>> import tracer
    >>> tracer.reshape(tracer.zeros((2, 3)), (-1, 2)).shape
    (3, 2)
    """
    x = as_tensor(x)
    shape = _ints(shape)
    if shape.count(-1) > 1 or any(d < -1 for d in shape):
        raise ValueError(f"reshape: shape {shape} may hold one -1 and otherwise sizes >= 0")
    if -1 in shape:
        known = math.prod(d for d in shape if d != -1)
        count = math.prod(x.shape)
        if known == 0 or count % known:
            raise ValueError(f"reshape: cannot reshape x of shape {x.shape} ({count} elements) into {shape}")
        shape = tuple(count // known if d == -1 else d for d in shape)
    return x if shape == x.shape else apply("reshape", [x], shape=shape)


def _reshape_method(self, *shape) -> Tensor:
    return reshape(self, shape[0] if len(shape) == 1 else shape)


def permute_dims(x, axes=None) -> Tensor:
    """`x` with its axes permuted; None reverses them."""
    return apply("permute_dims", [as_tensor(x)], axes=_axes(axes))


def transpose(x, dim0: int = -2, dim1: int = -1) -> Tensor:
    """Swap two axes (PyTorch's transpose); by default the last two."""
    x = as_tensor(x)
    axes = list(range(x.ndim))
    a, b = _axis("transpose", dim0, x.ndim, "dim0"), _axis("transpose", dim1, x.ndim, "dim1")
    axes[a], axes[b] = axes[b], axes[a]
    return x if a == b else apply("permute_dims", [x], axes=axes)


def _T(self) -> Tensor:
    # NumPy's .T: all axes reversed (a no-op below 2 dims).
    return self if self.ndim < 2 else permute_dims(self)


def broadcast_to(x, shape) -> Tensor:
    """`x` broadcast to `shape` with NumPy's rules."""
    x = as_tensor(x)
    shape = _ints(shape)
    return x if shape == x.shape else apply("broadcast_to", [x], shape=shape)


def expand_dims(x, axis) -> Tensor:
    """`x` with size-1 axes inserted at `axis` (an int or a tuple, positions in the result)."""
    return apply("expand_dims", [as_tensor(x)], axis=_ints(axis))


def squeeze(x, axis=None) -> Tensor:
    """`x` without size-1 axes: those in `axis`, or all of them when axis is None."""
    return apply("squeeze", [as_tensor(x)], axis=_axes(axis))


def concat(xs, axis: int = 0) -> Tensor:
    """Join tensors along an existing axis."""
    return apply("concat", [promote(*xs)], axis=axis)


def stack(xs, axis: int = 0) -> Tensor:
    """Join tensors of one shape along a new axis."""
    return apply("stack", [promote(*xs)], axis=axis)


def split(x, sections_or_indices, axis: int = 0) -> tuple[Tensor, ...]:
    """Split along `axis` into equal sections (an int) or at the given indices (a list), as np.split.

    >>> import tracer
    >>> [t.shape for t in tracer.split(tracer.zeros((5, 2)), [1, 3])]
    [(1, 2), (2, 2), (2, 2)]
    """
    x = as_tensor(x)
    if x.ndim == 0:
        raise ValueError("split: cannot split a 0-d tensor")
    n = x.shape[_axis("split", axis, x.ndim)]
    if isinstance(sections_or_indices, (int, np.integer)):
        k = int(sections_or_indices)
        if k <= 0 or n % k:
            raise ValueError(f"split: axis {axis} of size {n} does not divide into {k} equal sections")
        return apply("split", [x], indices_or_sections=k, axis=axis)  # Relax's meaning too: k sections
    else:
        indices = [i + n if i < 0 else i for i in _ints(sections_or_indices)]
        indices = [0 if i < 0 else n if i > n else i for i in indices]
        if indices != sorted(indices):
            raise ValueError(f"split: indices {list(sections_or_indices)} must be increasing")
    return apply("split", [x], indices_or_sections=indices, axis=axis)


def cumsum(x, axis: int | None = None, *, exclusive: bool = False) -> Tensor:
    """Running sums along `axis` (of the flattened tensor when None, as np.cumsum); `dim=` as torch.cumsum.
    bool and int32 sum in int64, as PyTorch does. exclusive=True leaves each element out of its own sum.

    >>> import tracer
    >>> tracer.cumsum(tracer.tensor([[1, 2], [3, 4]]), dim=1).tolist()
    [[1, 3], [3, 7]]
    """
    x = as_tensor(x)
    x = astype(x, "int64") if x.dtype in ("bool", *INT_DTYPES) else x
    if x.ndim == 0 and axis in (0, -1):  # torch: a 0-d tensor's dim 0 / -1 is the tensor itself
        return reshape(apply("cumsum", [reshape(x, (1,))], axis=0, exclusive=exclusive), ())
    return apply("cumsum", [x], axis=axis, exclusive=exclusive)


def take(x, indices, axis: int = 0) -> Tensor:
    """Elements of `x` at integer `indices` along `axis` (np.take); negative indices count from the end."""
    return apply("take", [as_tensor(x), _index_tensor(indices)], axis=axis)


def _index_tensor(indices) -> Tensor:
    if isinstance(indices, Tensor):
        return indices
    arr = np.asarray(indices)
    return Tensor(arr.astype("int64") if arr.size == 0 else arr)


def tril(x, k: int = 0) -> Tensor:
    """Lower triangle of the last two axes (below the k-th diagonal zeroed above)."""
    return apply("tril", [as_tensor(x)], k=k)


def triu(x, k: int = 0) -> Tensor:
    """Upper triangle of the last two axes."""
    return apply("triu", [as_tensor(x)], k=k)


# ---------------------------------------------------------------- creation


def _size_args(fn: str, args, dtype):
    """Sizes as varargs (`zeros(2, 3)`) or one sequence (`zeros((2, 3))`); a trailing str is the dtype
    (the positional `zeros(shape, dtype)` form)."""
    if args and isinstance(args[-1], str):
        if dtype is not None:
            raise TypeError(f"{fn}: dtype given twice ({args[-1]!r} and dtype={dtype!r})")
        args, dtype = args[:-1], args[-1]
    if not args:
        raise TypeError(f"{fn}: missing the size (ints, or one tuple of ints; () for a 0-d tensor)")
    if len(args) == 1 and hasattr(args[0], "__iter__"):
        return _ints(args[0]), dtype or "float32"
    return tuple(args), dtype or "float32"


def zeros(*size, dtype: str | None = None, device=None, requires_grad: bool = False) -> Tensor:
    """A tensor of zeros: `zeros(2, 3)`, `zeros((2, 3))`, `zeros((2, 3), "int64")`; inside a trace, a
    `zeros` binding.

    >>> import tracer
    >>> tracer.zeros(2, 3).shape == tracer.zeros((2, 3)).shape == (2, 3)
    True
    """
    shape, dtype = _size_args("zeros", size, dtype)
    return made(place(apply("zeros", [], shape=shape, dtype=dtype), device, "zeros"), requires_grad)


def ones(*size, dtype: str | None = None, device=None, requires_grad: bool = False) -> Tensor:
    """A tensor of ones (sizes as for zeros; `device="cuda"` makes it on the GPU)."""
    shape, dtype = _size_args("ones", size, dtype)
    return made(place(apply("ones", [], shape=shape, dtype=dtype), device, "ones"), requires_grad)


def full(shape, value, dtype: str = "float32", *, device=None, requires_grad: bool = False) -> Tensor:
    """A tensor filled with `value`."""
    out = place(apply("full", [], shape=_ints(shape), fill_value=value, dtype=dtype), device, "full")
    return made(out, requires_grad)


def zeros_like(x, dtype: str | None = None, *, requires_grad: bool = False) -> Tensor:
    """Zeros of x's shape and (by default) dtype."""
    x = as_tensor(x)
    out = apply("zeros_like", [x]) if dtype in (None, x.dtype) else zeros(x.shape, dtype, device=_device_of(x))
    return made(out, requires_grad)


def ones_like(x, dtype: str | None = None, *, requires_grad: bool = False) -> Tensor:
    """Ones of x's shape and (by default) dtype."""
    x = as_tensor(x)
    out = apply("ones_like", [x]) if dtype in (None, x.dtype) else ones(x.shape, dtype, device=_device_of(x))
    return made(out, requires_grad)


def full_like(x, value, dtype: str | None = None, *, requires_grad: bool = False) -> Tensor:
    """`value` in x's shape and (by default) dtype."""
    x = as_tensor(x)
    if dtype in (None, x.dtype):
        return made(apply("full_like", [x], fill_value=value), requires_grad)
    return full(x.shape, value, dtype, device=_device_of(x), requires_grad=requires_grad)


__all__ = [
    "argmax", "broadcast_to", "concat", "cumsum", "expand_dims", "full", "full_like", "matmul", "max", "mean", "min",
    "ones", "ones_like", "permute_dims", "reshape", "split", "squeeze", "stack", "sum", "take", "transpose",
    "tril", "triu", "var", "zeros", "zeros_like",
]
OPERATORS = {
    "__getitem__": getitem, "__matmul__": matmul, "__rmatmul__": lambda self, other: matmul(other, self),
    "T": property(_T),
}
METHODS = {
    "sum": sum, "mean": mean, "max": max, "min": min, "var": var, "argmax": argmax, "matmul": matmul,
    "reshape": _reshape_method, "permute_dims": permute_dims, "transpose": transpose, "broadcast_to": broadcast_to,
    "expand_dims": expand_dims, "squeeze": squeeze, "take": take, "tril": tril, "triu": triu,
}
