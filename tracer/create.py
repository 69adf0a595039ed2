"""PyTorch's constructors: randn, rand, randint, arange, linspace, eye, empty, cat and the *_like forms.

The random ones draw a seed from tracegrad's seeded generator (`manual_seed`, or a `Generator` passed as
`generator=`, or an int `seed=`) and run a counter-based random op on it, so eager calls and traced ones
give the same values for the same seed. Inside a traced, compiled function every call draws afresh (as
dropout's mask), from the global generator or from `generator=`, in the same sequence as eager calls; an
int `seed=` fixes the values.

`device="cuda"` (or a `tracer.device`) puts a result on the GPU; the random ones draw on the host and move,
so every device sees the same values. The `*_like` forms follow x's device. Inside a trace device= is
ignored: the executor places values.
"""
from __future__ import annotations

import math

import numpy as np

import ir
from ir.types import INT_DTYPES

from .math import as_tensor, astype
from .placement import place, tensor_device
from .rng import Generator, fresh_seed
from .shape import _size_args, concat, zeros, zeros_like
from .tensor import Tensor, active_trace, apply
from .tensor_grad import made


def _seed(fn: str, generator, seed) -> Tensor:
    if generator is not None and seed is not None:
        raise TypeError(f"{fn}: pass generator= or seed=, not both")
    if generator is not None and not isinstance(generator, Generator):
        raise TypeError(f"{fn}: generator must be a tracer.Generator, got {type(generator).__name__}")
    if seed is not None:
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
            raise TypeError(f"{fn}: seed must be an int, got {seed!r}")
        return Tensor(np.asarray(seed, dtype="int64"))
    if active_trace() is None:
        return Tensor(fresh_seed(generator or True), name="seed")
    # as dropout's seed: a parameter that each call of the compiled step draws (from `generator` when one is
    # given: the marker says which, see rng.fresh_seed); tracing draws nothing, so the draws of a compiled
    # step follow the same sequence as eager calls
    t = Tensor(np.zeros((), "int64"), name="seed")
    t._fresh_seed = generator or True
    return t


def _random(op: str, fn: str, size, dtype, generator, seed, device=None, requires_grad=False, **attrs) -> Tensor:
    shape, dtype = _size_args(fn, size, dtype)
    # drawn where the seed lives (the host), then moved: the same values on every device
    out = place(apply(op, [_seed(fn, generator, seed)], shape=shape, dtype=dtype, **attrs), device, fn)
    return made(out, requires_grad)


def rand(*size, dtype: str | None = None, generator: Generator | None = None, seed: int | None = None,
         device=None, requires_grad: bool = False) -> Tensor:
    """Uniform values in [0, 1): `rand(2, 3)` or `rand((2, 3))`.

    >>> import tracer
    >>> x = tracer.rand(1000, seed=0)
    >>> 0.0 <= float(x.min()) and float(x.max()) < 1.0
    True
    """
    return _random("random.uniform", "rand", size, dtype, generator, seed, device, requires_grad)


def randn(*size, dtype: str | None = None, generator: Generator | None = None, seed: int | None = None,
          device=None, requires_grad: bool = False) -> Tensor:
    """Standard normal values: `randn(2, 3)` or `randn((2, 3))`.

    >>> import tracer
    >>> abs(float(tracer.randn(10000, seed=0).mean())) < 0.05
    True
    """
    return _random("random.normal", "randn", size, dtype, generator, seed, device, requires_grad)


def randint(*args, size=None, dtype: str = "int64", generator: Generator | None = None,
            seed: int | None = None, device=None) -> Tensor:
    """Integers uniform in low..high-1: `randint(high, size)` or `randint(low, high, size)`, as torch.

    >>> import tracer
    >>> sorted(set(tracer.randint(3, 7, (1000,), seed=0).tolist()))
    [3, 4, 5, 6]
    """
    if size is None:
        if not args:
            raise TypeError("randint: missing the size")
        *args, size = args
    if len(args) not in (1, 2):
        raise TypeError(f"randint: expected (high, size) or (low, high, size), got {len(args)} bound(s)")
    low, high = (0, args[0]) if len(args) == 1 else args
    shape, dtype = _size_args("randint", (size,), dtype)
    out = apply("random.randint", [_seed("randint", generator, seed)], shape=shape, low=low, high=high, dtype=dtype)
    return place(out, device, "randint")


def rand_like(x, dtype: str | None = None, *, generator=None, seed=None) -> Tensor:
    """Uniform values in [0, 1) of x's shape, (by default) dtype and device."""
    x = as_tensor(x)
    return rand(x.shape, dtype=dtype or x.dtype, generator=generator, seed=seed, device=tensor_device(x))


def randn_like(x, dtype: str | None = None, *, generator=None, seed=None) -> Tensor:
    """Standard normal values of x's shape, (by default) dtype and device."""
    x = as_tensor(x)
    return randn(x.shape, dtype=dtype or x.dtype, generator=generator, seed=seed, device=tensor_device(x))


def randint_like(x, low: int = 0, high: int | None = None, *, dtype: str | None = None, generator=None,
                 seed=None) -> Tensor:
    """Integers in low..high-1 of x's shape (`randint_like(x, high)` or `randint_like(x, low, high)`)."""
    x = as_tensor(x)
    low, high = (0, low) if high is None else (low, high)
    dtype = dtype or x.dtype
    out = randint(low, high, x.shape, dtype=dtype if dtype in INT_DTYPES else "int64", generator=generator,
                  seed=seed, device=tensor_device(x))
    return astype(out, dtype)  # whole numbers in x's dtype, as torch.randint_like of a float tensor


def empty(*size, dtype: str | None = None, device=None, requires_grad: bool = False) -> Tensor:
    """A tensor to be overwritten. tracegrad fills it with zeros, so nothing reads uninitialized memory."""
    shape, dtype = _size_args("empty", size, dtype)
    return zeros(shape, dtype=dtype, device=device, requires_grad=requires_grad)


def empty_like(x, dtype: str | None = None) -> Tensor:
    """As zeros_like (see empty)."""
    return zeros_like(x, dtype)


def arange(start, end=None, step=1, *, dtype: str | None = None, device=None, requires_grad: bool = False) -> Tensor:
    """Values from start (inclusive) to end (exclusive) by step; int64 when all three are ints, else float32,
    as torch. Inside a trace it is a constant.

    >>> import tracer
    >>> tracer.arange(5).tolist(), tracer.arange(1, 2, 0.25).tolist()
    ([0, 1, 2, 3, 4], [1.0, 1.25, 1.5, 1.75])
    """
    if end is None:
        start, end = 0, start
    for name, v in (("start", start), ("end", end), ("step", step)):
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
            raise TypeError(f"arange: {name} must be a number, got {v!r}")
    if step == 0:
        raise ValueError("arange: step must not be 0")
    if dtype is None:
        dtype = "int64" if all(isinstance(v, (int, np.integer)) for v in (start, end, step)) else "float32"
    ir.types.check_dtype(dtype, "arange")
    if dtype in INT_DTYPES:
        return place(Tensor(np.arange(start, end, step, dtype=dtype)), device, "arange")
    n = max(math.ceil((end - start) / step), 0)
    out = place(Tensor((start + np.arange(n, dtype="float64") * step).astype(dtype)), device, "arange")
    return made(out, requires_grad)


def linspace(start, end, steps: int, *, dtype: str = "float32", device=None, requires_grad: bool = False) -> Tensor:
    """`steps` evenly spaced values from start to end, both included. Inside a trace it is a constant."""
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 0:
        raise ValueError(f"linspace: steps must be an int >= 0, got {steps!r}")
    values = np.linspace(start, end, int(steps), dtype="float64").astype(ir.types.check_dtype(dtype, "linspace"))
    return made(place(Tensor(values), device, "linspace"), requires_grad)


def eye(n: int, m: int | None = None, *, dtype: str = "float32", device=None, requires_grad: bool = False) -> Tensor:
    """The n x m identity matrix (m defaults to n). Inside a trace it is a constant."""
    for name, v in (("n", n), ("m", n if m is None else m)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
            raise ValueError(f"eye: {name} must be an int >= 0, got {v!r}")
    return made(place(Tensor(np.eye(n, m, dtype=ir.types.check_dtype(dtype, "eye"))), device, "eye"), requires_grad)


def cat(tensors, axis: int = 0) -> Tensor:
    """torch.cat: tensors joined along an existing axis (`dim=` or `axis=`), as tracer.concat."""
    return concat(tensors, axis=axis)


__all__ = ["Generator", "arange", "cat", "empty", "empty_like", "eye", "linspace", "rand", "rand_like",
           "randint", "randint_like", "randn", "randn_like"]
