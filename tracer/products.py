"""torch's products and norms: einsum, outer, dot, mv, mm, bmm, addmm, baddbmm, tensordot, kron, cross, cdist and
F.normalize's normalize at the top of tracer; vector_norm, matrix_norm, norm and cross of torch.linalg here too,
spelled `tracer.linalg.<name>` (tracer/linalg.py).

einsum is one IR op (Relax's R.einsum, see ir/ops/linalg.py) after this module has written torch's equation
in the op's normal form: '...' expanded to letters, the implicit output made explicit, repeated letters within
an operand taken as diagonals first and size-1 dims broadcast. The rest are compositions of matmul, multiply,
permute_dims, reshape, sum and the norms of tracer.torch_methods.
"""
from __future__ import annotations

import math
import string

import numpy as np

from . import shape as _shape
from .math import as_tensor, promote
from .svd import singular_value_norm
from .tensor import Tensor
from .torch_methods import _dim, clamp
from .torch_methods import norm as _norm
from .view_ops import diagonal

# ---------------------------------------------------------------- einsum


def _einsum_form(equation: str, shapes: list[tuple[int, ...]]) -> tuple[list[str], str]:
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    subs = lhs.split(",")
    if len(subs) != len(shapes):
        raise ValueError(f"einsum: equation {equation!r} names {len(subs)} operand(s), got {len(shapes)}")
    free = [c for c in string.ascii_uppercase + string.ascii_lowercase if c not in eq]
    ell_dims = []
    for i, (s, shape) in enumerate(zip(subs, shapes, strict=True)):
        bad = [c for c in s.replace("...", "") if not c.isalpha()]
        if bad or s.count("...") > 1:
            raise ValueError(f"einsum: invalid subscript {s!r} for operand {i} in {equation!r}")
        named = len(s) - 3 * s.count("...")
        if ("..." in s and named > len(shape)) or ("..." not in s and named != len(shape)):
            raise ValueError(f"einsum: subscript {s!r} does not fit operand {i} of shape {shape}")
        ell_dims.append(len(shape) - named if "..." in s else 0)
    n_ell = max(ell_dims, default=0)
    ell = "".join(free[:n_ell])
    subs = [s.replace("...", ell[n_ell - e:]) for s, e in zip(subs, ell_dims, strict=True)]
    if arrow:
        out = rhs.replace("...", ell)
        if not all(c.isalpha() for c in out):
            raise ValueError(f"einsum: invalid output subscript {rhs!r} in {equation!r}")
    else:  # torch's implicit output: the ellipsis dims, then the letters seen once, in alphabetical order
        counts = {c: "".join(subs).count(c) for c in "".join(subs)}
        out = ell + "".join(sorted(c for c, k in counts.items() if k == 1 and c not in ell))
    return subs, out


def einsum(equation: str, *operands) -> Tensor:
    """Sums of products named by torch's equation ("ij,jk->ik", "bij,bjk", "...ij->...ji", "ii->i"):
    operands as varargs or one list.

    >>> import tracer
    >>> tracer.einsum("ij,j->i", tracer.ones((2, 3)), tracer.tensor([1.0, 2.0, 3.0])).tolist()
    [6.0, 6.0]
    """
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    if not operands:
        raise ValueError("einsum: needs at least one operand")
    xs = promote(*operands)
    subs, out = _einsum_form(equation, [x.shape for x in xs])
    # repeated letters within an operand: its diagonal (moved last), until every letter is distinct
    for i, s in enumerate(subs):
        while len(set(s)) != len(s):
            c = next(c for c in s if s.count(c) > 1)
            a = s.index(c)
            b = s.index(c, a + 1)
            if xs[i].shape[a] != xs[i].shape[b]:
                raise ValueError(f"einsum: letter {c!r} labels dims of sizes {xs[i].shape[a]} and {xs[i].shape[b]} "
                                 f"in operand {i} (shape {xs[i].shape})")
            xs[i] = diagonal(xs[i], 0, a, b)
            s = s[:a] + s[a + 1:b] + s[b + 1:] + c
        subs[i] = s
    # a size-1 dim broadcasts against the letter's size elsewhere, as torch's
    size: dict[str, int] = {}
    for x, s in zip(xs, subs, strict=True):
        for c, d in zip(s, x.shape, strict=True):
            if d != 1:
                if size.get(c, d) != d:
                    raise ValueError(f"einsum: letter {c!r} has sizes {size[c]} and {d} in {equation!r} (shapes "
                                     f"{[t.shape for t in xs]})")
                size[c] = d
    for i, (x, s) in enumerate(zip(xs, subs, strict=True)):
        want = tuple(size.get(c, 1) for c in s)
        if want != x.shape:
            xs[i] = _shape.broadcast_to(x, want)
    missing = [c for c in out if c not in "".join(subs)]
    if missing or len(set(out)) != len(out):
        raise ValueError(f"einsum: output subscript {out!r} must name distinct letters of the operands ({equation!r})")
    if len(xs) == 1 and subs[0] == out:
        return xs[0]
    from .tensor import apply
    return apply("einsum", [xs], subscripts=",".join(subs) + "->" + out)


# ---------------------------------------------------------------- products


def _need(fn: str, x: Tensor, ndim: int, name: str) -> None:
    if x.ndim != ndim:
        raise RuntimeError(f"{fn}: {name} must be {ndim}-D, got shape {x.shape}")


def outer(input, vec2) -> Tensor:  # noqa: A002 (torch's names)
    """input[i] * vec2[j] (torch.outer; two 1-D tensors)."""
    x, y = promote(input, vec2)
    _need("outer", x, 1, "input")
    _need("outer", y, 1, "vec2")
    return _shape.reshape(x, (-1, 1)) * _shape.reshape(y, (1, -1))


def dot(input, tensor) -> Tensor:  # noqa: A002
    """The inner product of two 1-D tensors of one size and dtype (torch.dot)."""
    x, y = as_tensor(input), as_tensor(tensor)
    _need("dot", x, 1, "input")
    _need("dot", y, 1, "tensor")
    if x.shape != y.shape:
        raise RuntimeError(f"dot: inconsistent tensor size, input has {x.shape[0]} elements, tensor {y.shape[0]}")
    if x.dtype != y.dtype:
        raise RuntimeError(f"dot: expected both vectors to have the same dtype, got {x.dtype} and {y.dtype}")
    return _shape.matmul(x, y)


def mv(input, vec) -> Tensor:  # noqa: A002
    """Matrix (2-D) times vector (1-D), torch.mv."""
    x, v = as_tensor(input), as_tensor(vec)
    _need("mv", x, 2, "input")
    _need("mv", v, 1, "vec")
    return _shape.matmul(x, v)


def mm(input, mat2) -> Tensor:  # noqa: A002
    """The product of two 2-D tensors (torch.mm; matmul broadcasts, this does not)."""
    x, y = as_tensor(input), as_tensor(mat2)
    _need("mm", x, 2, "input")
    _need("mm", y, 2, "mat2")
    return _shape.matmul(x, y)


def bmm(input, mat2) -> Tensor:  # noqa: A002
    """The batched product of two 3-D tensors with one batch size (torch.bmm)."""
    x, y = as_tensor(input), as_tensor(mat2)
    _need("bmm", x, 3, "input")
    _need("bmm", y, 3, "mat2")
    if x.shape[0] != y.shape[0]:
        raise RuntimeError(f"bmm: batch sizes differ: input {x.shape}, mat2 {y.shape}")
    return _shape.matmul(x, y)


def _scaled_sum(input, product: Tensor, beta, alpha) -> Tensor:
    """beta * input + alpha * product; beta = 0 leaves input out (its NaN and inf too), as torch."""
    scaled = product if alpha == 1 else product * alpha
    if beta == 0:
        return _shape.broadcast_to(scaled, scaled.shape)
    base = as_tensor(input)
    return scaled + (base if beta == 1 else base * beta)


def addmm(input, mat1, mat2, *, beta=1, alpha=1) -> Tensor:  # noqa: A002
    """beta * input + alpha * (mat1 @ mat2), input broadcast to the product's shape (torch.addmm)."""
    return _scaled_sum(input, mm(mat1, mat2), beta, alpha)


def baddbmm(input, batch1, batch2, *, beta=1, alpha=1) -> Tensor:  # noqa: A002
    """beta * input + alpha * bmm(batch1, batch2) (torch.baddbmm)."""
    return _scaled_sum(input, bmm(batch1, batch2), beta, alpha)


def tensordot(a, b, dims=2) -> Tensor:
    """Sum over the last `dims` dims of a and the first of b, or over the dim lists dims = (a's, b's), as
    torch.tensordot: one matmul of the two reshaped operands."""
    x, y = promote(a, b)
    if isinstance(dims, Tensor):
        dims = dims.tolist()
    if isinstance(dims, (int, np.integer)):
        if dims < 0 or dims > min(x.ndim, y.ndim):
            raise RuntimeError(f"tensordot: dims {dims} out of range for shapes {x.shape} and {y.shape}")
        da, db = list(range(x.ndim - dims, x.ndim)), list(range(int(dims)))
    else:
        da, db = ([d] if isinstance(d, (int, np.integer)) else list(d) for d in dims)
        da = [_dim("tensordot", d, x.ndim) for d in da]
        db = [_dim("tensordot", d, y.ndim) for d in db]
    if len(da) != len(db) or any(x.shape[i] != y.shape[j] for i, j in zip(da, db, strict=True)):
        raise RuntimeError(f"tensordot: contracted dims {da} of {x.shape} and {db} of {y.shape} do not match")
    fa, fb = [i for i in range(x.ndim) if i not in da], [j for j in range(y.ndim) if j not in db]
    k = math.prod(x.shape[i] for i in da)
    left = _shape.reshape(_shape.permute_dims(x, fa + da), (math.prod(x.shape[i] for i in fa), k))
    right = _shape.reshape(_shape.permute_dims(y, db + fb), (k, math.prod(y.shape[j] for j in fb)))
    return _shape.reshape(_shape.matmul(left, right), tuple(x.shape[i] for i in fa) + tuple(y.shape[j] for j in fb))


def kron(input, other) -> Tensor:  # noqa: A002
    """The Kronecker product (torch.kron): shapes padded with leading 1s to one length, sizes multiplied."""
    x, y = promote(input, other)
    n = max(x.ndim, y.ndim)
    xs, ys = (1,) * (n - x.ndim) + x.shape, (1,) * (n - y.ndim) + y.shape
    a = _shape.reshape(x, tuple(v for d in xs for v in (d, 1)))
    b = _shape.reshape(y, tuple(v for d in ys for v in (1, d)))
    return _shape.reshape(a * b, tuple(p * q for p, q in zip(xs, ys, strict=True)))


def _cross(fn: str, input, other, dim) -> Tensor:  # noqa: A002
    x, y = promote(input, other)
    try:
        shape = np.broadcast_shapes(x.shape, y.shape)
    except ValueError:
        raise RuntimeError(f"{fn}: shapes {x.shape} and {y.shape} do not broadcast") from None
    x, y = _shape.broadcast_to(x, shape), _shape.broadcast_to(y, shape)
    if dim is None:  # torch.cross's default: the first dim of size 3
        dim = next((i for i, n in enumerate(shape) if n == 3), None)
        if dim is None:
            raise RuntimeError(f"{fn}: no dimension of size 3 in shape {shape}")
    d = _dim(fn, dim, len(shape))
    if shape[d] != 3:
        raise RuntimeError(f"{fn}: dim {dim} must have size 3, got shape {shape}")
    lead = (slice(None),) * d
    xi = [x[lead + (slice(i, i + 1),)] for i in range(3)]
    yi = [y[lead + (slice(i, i + 1),)] for i in range(3)]
    return _shape.concat([xi[1] * yi[2] - xi[2] * yi[1], xi[2] * yi[0] - xi[0] * yi[2],
                          xi[0] * yi[1] - xi[1] * yi[0]], axis=d)


def cross(input, other, dim: int | None = None) -> Tensor:  # noqa: A002
    """The 3-vector cross product along dim (torch.cross: dim=None takes the first dim of size 3)."""
    return _cross("cross", input, other, dim)


def cdist(x1, x2, p: float = 2.0, compute_mode=None) -> Tensor:
    """The p-norm distances between the rows of x1 (..., P, M) and of x2 (..., R, M): shape (..., P, R)
    (torch.cdist). The gradient is 0 where a distance is 0, as torch's."""
    a, b = promote(x1, x2)
    if a.ndim < 2 or b.ndim < 2 or a.shape[-1] != b.shape[-1]:
        raise RuntimeError(f"cdist: x1 {a.shape} and x2 {b.shape} must be at least 2-D with the same last dim")
    if p < 0:
        raise RuntimeError(f"cdist: p must be >= 0, got {p}")
    diff = _shape.expand_dims(a, -2) - _shape.expand_dims(b, -3)
    return _norm(diff, p=p, axis=-1)


def normalize(input, p: float = 2.0, dim: int = 1, eps: float = 1e-12) -> Tensor:  # noqa: A002
    """input / max(norm_p(input, dim), eps) (torch.nn.functional.normalize); at a zero vector the value is 0 and
    the gradient g / eps, as torch's."""
    x = as_tensor(input)
    return x / clamp(_norm(x, p=p, axis=dim, keepdims=True), min=eps)


# ---------------------------------------------------------------- torch.linalg


def vector_norm(x, ord=2, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:  # noqa: A002
    """The ord-norm over dim (all elements when None): torch.linalg.vector_norm."""
    x = as_tensor(x)
    if dtype is not None:
        x = x.to(dtype)
    return _norm(x, p=ord, axis=dim, keepdims=keepdim)


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim: bool = False, *, dtype=None) -> Tensor:  # noqa: A002
    """The matrix norm over the two dims: 'fro', 'nuc', 1, -1, 2, -2, inf, -inf (torch.linalg.matrix_norm); the
    singular-value ones ('nuc', 2, -2) in tracer/svd.py."""
    x = as_tensor(A)
    if dtype is not None:
        x = x.to(dtype)
    if x.ndim < 2 or len(dim) != 2:
        raise RuntimeError(f"matrix_norm: needs a tensor of at least 2 dims and dim of two dims, got shape "
                           f"{x.shape}, dim {dim}")
    r, c = _dim("matrix_norm", dim[0], x.ndim), _dim("matrix_norm", dim[1], x.ndim)
    if ord == "fro":
        return _norm(x, p=2, axis=(r, c), keepdims=keepdim)
    if ord in ("nuc", 2, -2):
        return singular_value_norm(x, ord, r, c, keepdim)
    if ord not in (1, -1, float("inf"), -float("inf")):
        raise RuntimeError(f"matrix_norm: ord must be 'fro', 'nuc', 1, -1, 2, -2, inf or -inf, got {ord!r}")
    # 1 / -1: over columns of the column sums; inf / -inf: over rows of the row sums
    inner, outer_ = (r, c) if abs(ord) == 1 else (c, r)
    sums = _shape.sum(abs(x), axis=inner, keepdims=True)
    best = (_shape.max if ord > 0 else _shape.min)(sums, axis=outer_, keepdims=True)
    return best if keepdim else _shape.squeeze(best, (r, c))


def norm(A, ord=None, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:  # noqa: A002
    """torch.linalg.norm: a vector norm over one dim (or of the flattened tensor when ord and dim are None),
    a matrix norm over two dims (or of a 2-D tensor when dim is None and ord is given)."""
    x = as_tensor(A)
    if dim is None:
        if ord is None:
            return vector_norm(x.reshape(-1), 2, keepdim=False, dtype=dtype).reshape((1,) * x.ndim if keepdim else ())
        if x.ndim == 1:
            return vector_norm(x, ord, keepdim=keepdim, dtype=dtype)
        if x.ndim == 2:
            return matrix_norm(x, ord, keepdim=keepdim, dtype=dtype)
        raise RuntimeError(f"linalg.norm: with ord={ord!r} and dim=None the input must be 1-D or 2-D, got shape "
                           f"{x.shape}")
    dims = (dim,) if isinstance(dim, (int, np.integer)) else tuple(dim)
    if len(dims) == 1:
        return vector_norm(x, 2 if ord is None else ord, dims, keepdim, dtype=dtype)
    if len(dims) == 2:
        return matrix_norm(x, "fro" if ord is None else ord, dims, keepdim, dtype=dtype)
    raise RuntimeError(f"linalg.norm: dim must name one or two dims, got {dim}")


def linalg_cross(input, other, *, dim: int = -1) -> Tensor:  # noqa: A002
    """torch.linalg.cross: the cross product along dim (default the last)."""
    return _cross("linalg.cross", input, other, dim)


__all__ = ["addmm", "baddbmm", "bmm", "cdist", "cross", "dot", "einsum", "kron", "mm", "mv", "normalize", "outer",
           "tensordot"]
METHODS = {"outer": outer, "ger": outer, "dot": dot, "mv": mv, "addmm": addmm, "baddbmm": baddbmm, "kron": kron,
           "cross": cross}
