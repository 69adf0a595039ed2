"""A `fused` chain as one CUDA kernel: the source of a `cupy.ElementwiseKernel`, one launch per chain.

The body is one typed temporary per sub-op, each the op's own formula in C (the same operations in
the same order and in the same precision as the op's NumPy kernel, so values agree to the math
library's last bits), then `y = t<last>;`. ElementwiseKernel broadcasts the inputs itself. NaN
propagates through maximum, minimum and relu as in NumPy.

The body is written in the subset of C++ that also reads as Python over NumPy arrays (calls, infix
arithmetic, parenthesized comparisons, `|` between them, functional casts such as `float(0.5)`,
`a ? b : c` as the preamble's `tg_where` macro), so tests/fake_cupy.py runs the generated text on a
CPU and a wrong formula fails there.

A form whose formula reads a sub-expression several times (floor_divide's NumPy algorithm, clamp) binds it
once with `let`, a temporary of its own. Functions that NumPy's kernel computes in float64 whatever the
input (lgamma) are called on `double(x)` here too. A chain with a sub-op or a dtype without a form here
(float16, integer arithmetic; the ops in FALLBACK) gives None and runs op by op. Kernels are cached by
(expr, input dtypes).
"""
from __future__ import annotations

import functools
import hashlib
import math
import warnings
from typing import NamedTuple

from ..ops.fused import Const, Leaf, _types, parse_expr
from ..types import TensorType

PREAMBLE = "#define tg_where(c, a, b) ((c) ? (a) : (b))\ntypedef long long tg_int64;\n"
C_TYPES = {"float32": "float", "float64": "double", "bool": "bool", "int32": "int", "int64": "long long"}
_CASTS = {**C_TYPES, "int64": "tg_int64"}  # functional casts need a one-word name
_NODE_DTYPES = frozenset({"float32", "float64", "bool"})  # sub-op results; integer division etc. stay op by op


def _float(fn):
    """A form for floating-point results only (math functions get C's `f` suffix for float32)."""
    fn.float_only = True
    return fn


def _math(name):
    return _float(lambda a, m, c, attrs: f"{m(name)}({a[0]})")


def _sigmoid(x, m, c):
    # as ir.ops.elementwise._sigmoid: e = exp(-|x|); where(x >= 0, 1, e) / (1 + e)
    e = f"{m('exp')}(-{m('fabs')}({x}))"
    return f"(tg_where(({x} >= {c(0)}), {c(1)}, {e}) / ({c(1)} + {e}))"


def _max(a, b):
    return f"tg_where((({a} >= {b}) | ({a} != {a})), {a}, {b})"  # NaN in either gives NaN, as np.maximum


def _min(a, b):
    return f"tg_where((({a} <= {b}) | ({a} != {a})), {a}, {b})"


def _gelu(a, m, c, attrs):
    x = a[0]
    if attrs.get("approximate", "none") == "tanh":
        inner = f"({c(math.sqrt(2.0 / math.pi))} * ({x} + {c(0.044715)} * {x} * {x} * {x}))"
        return f"({c(0.5)} * {x} * ({c(1.0)} + {m('tanh')}({inner})))"
    return f"({c(0.5)} * {x} * ({c(1.0)} + {m('erf')}({x} * {c(1.0 / math.sqrt(2.0))})))"


def _binary(symbol):
    return lambda a, m, c, attrs: f"({a[0]} {symbol} {a[1]})"


FORMS = {
    "add": _binary("+"), "multiply": _binary("*"),
    "subtract": _float(_binary("-")), "divide": _float(_binary("/")),
    "power": _float(lambda a, m, c, attrs: f"{m('pow')}({a[0]}, {a[1]})"),
    "maximum": lambda a, m, c, attrs: _max(a[0], a[1]),
    "minimum": lambda a, m, c, attrs: _min(a[0], a[1]),
    "negative": _float(lambda a, m, c, attrs: f"(-{a[0]})"),
    "abs": _float(lambda a, m, c, attrs: f"{m('fabs')}({a[0]})"),
    "exp": _math("exp"), "log": _math("log"), "sqrt": _math("sqrt"), "sin": _math("sin"), "cos": _math("cos"),
    "tanh": _math("tanh"),
    "rsqrt": _float(lambda a, m, c, attrs: f"({c(1.0)} / {m('sqrt')}({a[0]}))"),  # 1 / sqrt, not rsqrtf's 2 ulp
    "sigmoid": _float(lambda a, m, c, attrs: _sigmoid(a[0], m, c)),
    "nn.relu": lambda a, m, c, attrs: _max(a[0], c(0)),
    "nn.silu": _float(lambda a, m, c, attrs: f"({a[0]} * {_sigmoid(a[0], m, c)})"),
    "nn.log_sigmoid": _float(lambda a, m, c, attrs: f"({_min(a[0], c(0))} - {m('log1p')}({m('exp')}"
                                                     f"(-{m('fabs')}({a[0]}))))"),
    "nn.gelu": _float(_gelu),
    "less": _binary("<"), "less_equal": _binary("<="), "greater": _binary(">"), "greater_equal": _binary(">="),
    "equal": _binary("=="), "not_equal": _binary("!="),
    "where": lambda a, m, c, attrs: f"tg_where({a[0]}, {a[1]}, {a[2]})",
    "astype": lambda a, m, c, attrs: f"{_CASTS[attrs['dtype']]}({a[0]})",
}


# ---------------------------------------------------------------- issue 22's elementwise ops


def _let(fn):
    """A form that binds sub-expressions to temporaries: it is called with `let(text, of=dtype) -> name`."""
    fn.uses_let = True
    return fn


def _via_double(name):
    # the NumPy kernel computes in float64 whatever the input dtype, then rounds once
    return _float(lambda a, m, c, attrs: f"{name}(double({a[0]}))")


def _sign(a, m, c, attrs):
    # (x > 0) - (x < 0): 0 for NaN and for -0.0 (+0.0), as torch's sign
    return f"tg_where(({a[0]} > {c(0)}), {c(1)}, tg_where(({a[0]} < {c(0)}), {c(-1)}, {c(0)}))"


def _round(a, m, c, attrs):
    # as ir.ops.unary_math._round: rint(x * 10^d) / 10^d, rint(x / 10^-d) * 10^-d, half to even
    decimals = attrs.get("decimals", 0)
    if decimals == 0:
        return f"{m('rint')}({a[0]})"
    scale = c(10.0 ** abs(decimals))
    if decimals > 0:
        return f"({m('rint')}(({a[0]} * {scale})) / {scale})"
    return f"({m('rint')}(({a[0]} / {scale})) * {scale})"


def _log_add_exp(a, m, c, attrs, let):
    # NumPy's npy_logaddexp: x + log 2 when equal (infinities of one sign), else the larger plus
    # log1p(exp(-|x - y|)); NaN from the difference otherwise
    x, y = a
    d = let(f"({x} - {y})")
    return (f"tg_where(({x} == {y}), ({x} + {c(math.log(2.0))}), tg_where(({d} > {c(0)}), ({x} + {m('log1p')}"
            f"({m('exp')}((-{d})))), tg_where(({d} <= {c(0)}), ({y} + {m('log1p')}({m('exp')}({d}))), {d})))")


def _xlogy(a, m, c, attrs):
    x, y = a
    return f"tg_where((({x} == {c(0)}) & ({y} == {y})), {c(0)}, ({x} * {m('log')}({y})))"


def _floor_mod(a, m, c, attrs, let):
    # NumPy's npy_divmod remainder: fmod, then the divisor's sign (+-0 as the divisor's); NaN for b == 0
    x, y = a
    r = let(f"{m('fmod')}({x}, {y})")
    return (f"tg_where(({y} == {c(0)}), {r}, tg_where(({r} != {c(0)}), tg_where((({y} < {c(0)}) != ({r} < {c(0)})),"
            f" ({r} + {y}), {r}), {m('copysign')}({c(0)}, {y})))")


def _floor_divide(a, m, c, attrs, let):
    # NumPy's npy_floor_divide: a / b for b == 0; else (a - fmod(a, b)) / b, one less when the remainder's
    # sign differs from b's, floored and rounded back up past .5, +-0 with the sign of a / b
    x, y = a
    r = let(f"{m('fmod')}({x}, {y})")
    q = let(f"(({x} - {r}) / {y})")
    d = let(f"tg_where((({r} != {c(0)}) & (({y} < {c(0)}) != ({r} < {c(0)}))), ({q} - {c(1)}), {q})")
    f = let(f"{m('floor')}({d})")
    rounded = f"tg_where((({d} - {f}) > {c(0.5)}), ({f} + {c(1)}), {f})"
    return (f"tg_where(({y} == {c(0)}), ({x} / {y}), tg_where(({d} != {c(0)}), {rounded}, "
            f"{m('copysign')}({c(0)}, ({x} / {y}))))")


def _heaviside(a, m, c, attrs):
    x, values = a
    return f"tg_where(({x} == {c(0)}), {values}, tg_where(({x} > {c(0)}), {c(1)}, {c(0)}))"  # NaN gives 0


def _clamp(a, m, c, attrs, let):
    # minimum(maximum(x, min), max): NaN anywhere gives NaN, min > max gives max
    low = let(_max(a[0], a[1]))
    return _min(low, a[2])


def _c_binary(name):
    return _float(lambda a, m, c, attrs: f"{m(name)}({a[0]}, {a[1]})")


FORMS.update({
    **{op: _math(op) for op in ("tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "erf",
                                "erfc", "erfinv", "log2", "log10", "log1p", "expm1", "exp2", "trunc", "floor",
                                "ceil")},
    "lgamma": _via_double("lgamma"),
    "atan2": _c_binary("atan2"), "hypot": _c_binary("hypot"), "copysign": _c_binary("copysign"),
    "fmax": _c_binary("fmax"), "fmin": _c_binary("fmin"), "mod": _c_binary("fmod"),
    "log_add_exp": _float(_let(_log_add_exp)), "xlogy": _float(_xlogy),
    "floor_mod": _float(_let(_floor_mod)), "floor_divide": _float(_let(_floor_divide)),
    "heaviside": _float(_heaviside), "sign": _float(_sign), "round": _float(_round),
    "clamp": _let(_clamp),
})
# every op ir.transform.FuseElementwise fuses has a form above; these run op by op on CUDA instead:
# CUDA's math library has no digamma or polygamma (a C transcription of ir.ops.gamma_fns' shifted series
# would be a second implementation to keep in step)
FALLBACK: frozenset = frozenset({"digamma", "polygamma"})


def literal(value, dtype: str) -> str:
    """A constant of `dtype` in the body: `float(0.5)`, `double(inf)` as bits, `bool(1)`.

    >>> literal(0.5, "float32"), literal(float("-inf"), "float64"), literal(True, "bool")
    ('float(0.5)', 'double(-__int_as_float(0x7f800000))', 'bool(1)')
    """
    cast = _CASTS[dtype]
    if dtype == "bool":
        return f"bool({int(bool(value))})"
    if dtype in ("int32", "int64"):
        return f"{cast}({int(value)})"
    v = float(value)
    if math.isnan(v):
        return f"{cast}(__int_as_float(0x7fc00000))"
    if math.isinf(v):
        return f"{cast}({'-' if v < 0 else ''}__int_as_float(0x7f800000))"
    return f"{cast}({v!r})"


class Source(NamedTuple):
    """What cupy.ElementwiseKernel takes: in_params, out_params, operation (the body), name, preamble."""

    in_params: str
    out_params: str
    operation: str
    name: str
    preamble: str


@functools.lru_cache(maxsize=4096)
def kernel_source(expr: str, dtypes: tuple) -> Source | None:
    """The ElementwiseKernel source of a `fused` chain on inputs of `dtypes`; None when it has no CUDA form.

    >>> src = kernel_source('nn.relu(add(x0, x1))', ("float32", "float32"))
    >>> src.in_params, src.out_params
    ('float32 x0, float32 x1', 'float32 y')
    >>> print(src.operation)
    float t0 = (x0 + x1);
    float t1 = tg_where(((t0 >= float(0.0)) | (t0 != t0)), t0, float(0.0));
    y = t1;
    """
    if any(d not in C_TYPES for d in dtypes):
        return None
    node = parse_expr(expr)
    lines: list[str] = []

    def emit(n):
        """(C expression, dtype) of n, appending its statement; None when n has no form."""
        if isinstance(n, Leaf):
            return f"x{n.index}", dtypes[n.index]
        if isinstance(n, Const):
            return (literal(n.value, n.dtype), n.dtype) if n.dtype in C_TYPES else None
        args = [emit(a) for a in n.args]
        form = FORMS.get(n.op)
        if form is None or None in args:
            return None
        dtype = _types(n, [TensorType((), d) for d in dtypes]).dtype
        floating = dtype in ("float32", "float64")
        if dtype not in _NODE_DTYPES or (getattr(form, "float_only", False) and not floating):
            return None
        suffix = "f" if dtype == "float32" else ""

        def let(text, of=dtype):
            """Bind `text` to a new temporary of dtype `of` (the node's by default); its name."""
            name = f"t{len(lines)}"
            lines.append(f"{C_TYPES[of]} {name} = {text};")
            return name

        extra = {"let": let} if getattr(form, "uses_let", False) else {}
        text = form([a for a, _ in args], lambda name: name + suffix, lambda v: literal(v, dtype), n.attrs, **extra)
        return let(text), dtype

    result = emit(node)
    if result is None or not lines:
        return None
    name, dtype = result
    lines.append(f"y = {name};")
    digest = hashlib.sha1(f"{expr}|{dtypes}".encode()).hexdigest()[:16]
    return Source(", ".join(f"{d} x{i}" for i, d in enumerate(dtypes)), f"{dtype} y", "\n".join(lines),
                  f"tracegrad_fused_{digest}", PREAMBLE)


FAILED: dict = {}  # (expr, dtypes) -> why the kernel did not build or launch (it then runs op by op)


@functools.lru_cache(maxsize=4096)
def _kernel(xp, expr: str, dtypes: tuple):
    src = kernel_source(expr, dtypes)
    if src is None:
        return None
    return xp.ElementwiseKernel(src.in_params, src.out_params, src.operation, src.name, preamble=src.preamble)


def run(xp, xs, expr: str):
    """The chain on CuPy arrays `xs` as one kernel launch; None when it has no CUDA form (or its kernel
    failed once: a warning, FAILED says why, and the caller runs it op by op)."""
    dtypes = tuple(x.dtype.name for x in xs)
    if (expr, dtypes) in FAILED:
        return None
    kernel = _kernel(xp, expr, dtypes)
    if kernel is None:
        return None
    try:
        return kernel(*xs)
    except Exception as e:  # a CUDA compile error: wrong here, but the op-by-op path still computes the chain
        FAILED[expr, dtypes] = f"{type(e).__name__}: {e}"
        warnings.warn(f"tracegrad: the fused CUDA kernel for {expr!r} on {dtypes} failed ({FAILED[expr, dtypes]});"
                      " running it op by op", RuntimeWarning, stacklevel=2)
        return None
