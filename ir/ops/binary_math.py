"""Binary math beyond ir/ops/elementwise.py: atan2, hypot, copysign, fmin, fmax, log_add_exp, xlogy, mod,
heaviside, and clamp with tensor bounds. All broadcast as NumPy and take one dtype (the tracer promotes).

Primitives rather than composites, each for its values or its gradient:
- atan2 and hypot: atan(y / x) loses the quadrant and sqrt(x*x + y*y) overflows for |x| > 1e154;
- copysign: the sign of -0.0 is invisible to comparisons, so no select can read it;
- fmin/fmax: NaN-ignoring, and their gradient gives a tie wholly to x1 (torch), unlike maximum's;
- log_add_exp (Relax's name): log(exp(a) + exp(b)) overflows; the kernel is NumPy's logaddexp;
- xlogy: 0 * log(0) = 0 needs a select whose other branch, 0 * log(y), would make the gradient NaN;
- mod (Relax's truncating mod, C's fmod; floor_mod is Python's %);
- heaviside: NumPy's gives NaN at NaN where torch's gives 0, and its gradient reaches `values` at x == 0;
- clamp(x, min, max): torch routes the gradient among the three by its own rule (see its VJP), which no
  composition of where/maximum reproduces at ties and when min > max.
"""
from __future__ import annotations

from ..types import TensorType
from .common import broadcast_shape, require_float, require_numeric, same_dtype
from .elementwise import _nonzero_divisor
from .registry import declare
from .special import quiet as _quiet


def _infer(check):
    def infer(op, types):
        out = TensorType(broadcast_shape(op, types), same_dtype(op, types))
        if check is not None:
            check(op, out, "x1")
        return out
    return infer


def _binary(name, fn, check=require_float, differentiable=True, inputs=("x1", "x2")):
    def kernel(xp, *args):
        with _quiet(xp):
            return fn(xp, *args)
    declare(name, inputs, infer=_infer(check), kernel=kernel, differentiable=differentiable)


def _xlogy(xp, x, y):
    # 0 where x == 0 unless y is NaN, as torch and SciPy
    out = x * xp.log(y)
    return xp.where((x == 0) & ~xp.isnan(y), x.dtype.type(0), out)


def _mod(xp, a, b):
    _nonzero_divisor("mod", b)
    return xp.fmod(a, b)


_binary("atan2", lambda xp, y, x: xp.arctan2(y, x))
_binary("hypot", lambda xp, a, b: xp.hypot(a, b))
_binary("copysign", lambda xp, a, b: xp.copysign(a, b))
_binary("log_add_exp", lambda xp, a, b: xp.logaddexp(a, b))
_binary("xlogy", _xlogy)
_binary("fmin", lambda xp, a, b: xp.fmin(a, b), check=None)
_binary("fmax", lambda xp, a, b: xp.fmax(a, b), check=None)
_binary("mod", _mod, check=require_numeric)
# values where x == 0, else x > 0 (so NaN gives 0, as torch's; NumPy's heaviside gives NaN)
_binary("heaviside", lambda xp, x, v: xp.where(x == 0, v, (x > 0).astype(x.dtype)), check=require_numeric,
        inputs=("x", "values"))
# min(max(x, min), max): NaN anywhere gives NaN, and min > max gives max, as torch's clamp
_binary("clamp", lambda xp, x, lo, hi: xp.minimum(xp.maximum(x, lo), hi), check=require_numeric,
        inputs=("x", "min", "max"))
