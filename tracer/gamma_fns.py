"""torch.lgamma, torch.digamma, torch.polygamma and Gamma(concentration, 1) draws (torch._standard_gamma),
on the ops of ir/ops/gamma_fns.py. Integer input is computed in float32, as torch's."""
from __future__ import annotations

from .create import _seed
from .math import as_tensor, astype, stop_gradient
from .tensor import Tensor, apply

_FLOATS = ("float16", "float32", "float64")


def _floating(x) -> Tensor:
    t = as_tensor(x)
    return t if t.dtype in _FLOATS else astype(t, "float32")


def lgamma(input) -> Tensor:  # noqa: A002 (torch's name)
    """log|Gamma(x)| (+inf at 0, -1, -2, ...), as torch.lgamma; its derivative is digamma.

    >>> import math, tracer
    >>> abs(float(tracer.lgamma(tracer.tensor(4.5, dtype="float64"))) - math.lgamma(4.5)) < 1e-13
    True
    """
    return apply("lgamma", [_floating(input)])


def digamma(input) -> Tensor:  # noqa: A002
    """psi(x) = d/dx lgamma(x) (-inf at 0, NaN at negative integers), as torch.digamma."""
    return apply("digamma", [_floating(input)])


def polygamma(n: int, input) -> Tensor:  # noqa: A002
    """The n-th derivative of digamma, as torch.polygamma(n, input); n = 0 is digamma."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"polygamma: n must be a non-negative int, got {n!r}")
    return digamma(input) if n == 0 else apply("polygamma", [_floating(input)], n=n)


def standard_gamma(concentration, generator=None, *, seed: int | None = None) -> Tensor:
    """One Gamma(concentration, 1) draw per element (torch._standard_gamma); no gradient flows through it.
    Inside a compiled step each call draws afresh, as randn does; an int `seed` fixes the draws."""
    alpha = _floating(concentration)
    seed = _seed("standard_gamma", generator, seed)
    return apply("random.gamma", [seed, stop_gradient(alpha)])


__all__ = ["digamma", "lgamma", "polygamma"]
