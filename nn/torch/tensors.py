"""torch's tensor functions, with torch's meaning: every torch function tracegrad has, under torch's name.

Three sources, in this order of preference:

1. the functions below, where torch's signature or meaning differs from tracegrad's function of that name
   (`full` infers its dtype, `where(cond)` finds indices, `equal` is one bool, `manual_seed` seeds weight
   initialisation too, `dropout(input, p, train)`, `softmax(input, dim, dtype=)`, the conv and pool
   functions from nn.functional);
2. the Tensor method of that name, called on the first argument (`torch.max(x, 1)` is `x.max(1)`, so it
   has the method's torch meaning: (values, indices); likewise var, std, split, squeeze, take, sum, ...);
3. tracer's function of that name (cat, stack, zeros, randn, einsum, ...).

Only names torch has are exported (tracer.trace, tracer.spec and the other tracegrad-only names are not).
"""
from __future__ import annotations

import functools
import inspect

import numpy as np

import tracer
from tracer import Tensor
from tracer.math import as_tensor as _as_tensor

from .. import functional as F
from .. import init as _init
from . import names
from .dtypes import __all__ as _DTYPES

# ---------------------------------------------------------------- torch's forms that differ from tracer's


def full(size, fill_value, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """`size` filled with fill_value; the dtype follows the value when not given (bool, int64, float32), as
    torch.full."""
    if dtype is None:
        v = fill_value.item() if isinstance(fill_value, Tensor) else fill_value
        dtype = "bool" if isinstance(v, (bool, np.bool_)) else "int64" if isinstance(v, (int, np.integer)) \
            else "float32"
    shape = tuple(size) if hasattr(size, "__iter__") else (size,)
    return tracer.full(shape, fill_value, str(dtype), device=device, requires_grad=requires_grad)


def full_like(input, fill_value, *, dtype=None, device=None, requires_grad: bool = False,  # noqa: A002
              memory_format=None) -> Tensor:
    """fill_value in input's shape and (by default) dtype."""
    x = _as_tensor(input)
    return _on(tracer.full_like(x, fill_value, None if dtype is None else str(dtype), requires_grad=requires_grad),
               device)


def _like(fn):
    @functools.wraps(fn)
    def like(input, *, dtype=None, device=None, requires_grad: bool = False, memory_format=None,  # noqa: A002
             layout=None, generator=None):
        x = _as_tensor(input)
        kwargs = {"generator": generator} if generator is not None else {}
        out = fn(x, None if dtype is None else str(dtype), **kwargs)
        out = _on(out, device)
        return out.requires_grad_() if requires_grad else out
    return like


def _on(t: Tensor, device) -> Tensor:
    return t if device is None else t.to(device)


def linspace(start, end, steps: int, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """`steps` evenly spaced values from start to end, both included (float32 by default)."""
    return tracer.linspace(start, end, steps, dtype=str(dtype or "float32"), device=device,
                           requires_grad=requires_grad)


def logspace(start, end, steps: int, base: float = 10.0, *, dtype=None, device=None,
             requires_grad: bool = False) -> Tensor:
    """base ** linspace(start, end, steps)."""
    values = np.power(float(base), np.linspace(start, end, int(steps), dtype="float64"))
    return tracer.tensor(values.astype(str(dtype or "float32")), device=device, requires_grad=requires_grad)


def eye(n: int, m: int | None = None, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """The n x m identity matrix (float32 by default)."""
    return tracer.eye(n, m, dtype=str(dtype or "float32"), device=device, requires_grad=requires_grad)


def as_tensor(data, dtype=None, device=None) -> Tensor:
    """`data` as a tensor: a Tensor of that dtype and device is returned as it is, a NumPy array of the dtype
    shares its memory (torch.as_tensor), anything else is copied."""
    if isinstance(data, Tensor):
        out = data if dtype is None else data.to(dtype)
    elif isinstance(data, np.ndarray) and (dtype is None or np.dtype(str(dtype)) == data.dtype) \
            and data.dtype.kind in "fiub":
        out = tracer.from_numpy(data)
    else:
        out = tracer.tensor(data, None if dtype is None else str(dtype))
    return _on(out, device)


def scalar_tensor(s, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A 0-d tensor of s (float32 by default)."""
    return tracer.tensor(np.asarray(s, str(dtype or "float32")), device=device, requires_grad=requires_grad)


def where(condition, input=None, other=None) -> Tensor | tuple:  # noqa: A002
    """`where(condition, input, other)`: input where condition, else other; `where(condition)` alone is
    `nonzero(condition, as_tuple=True)`, as torch."""
    if input is None and other is None:
        return tracer.nonzero(condition, as_tuple=True)
    if input is None or other is None:
        raise TypeError("where() takes a condition alone or a condition, input and other")
    return tracer.where(condition, input, other)


def equal(input, other) -> bool:  # noqa: A002
    """True when both have the same shape and elements (one Python bool, as torch.equal)."""
    return tracer.array_equal(input, other)


def pow(input, exponent) -> Tensor:  # noqa: A001,A002
    """input ** exponent (either may be a number), as torch.pow."""
    if not isinstance(input, Tensor):
        return tracer.power(input, _as_tensor(exponent))
    return tracer.power(input, exponent)


def dropout(input, p: float = 0.5, train: bool = True) -> Tensor:  # noqa: A002
    """torch.dropout(input, p, train): F.dropout with torch's positional order."""
    return F.dropout(input, p, training=train)


def _cast(x, dtype):
    return _as_tensor(x) if dtype is None else _as_tensor(x).to(dtype)


def softmax(input, dim: int, dtype=None) -> Tensor:  # noqa: A002
    """exp(input) normalized along dim (cast to dtype first when given)."""
    return tracer.softmax(_cast(input, dtype), axis=dim)


def log_softmax(input, dim: int, dtype=None) -> Tensor:  # noqa: A002
    """log(softmax(input, dim)), computed stably."""
    return tracer.log_softmax(_cast(input, dtype), axis=dim)


def numel(input) -> int:  # noqa: A002
    """The number of elements."""
    return int(np.prod(_as_tensor(input).shape))


def is_tensor(obj) -> bool:
    """True for tracegrad Tensors (nn.Parameter included)."""
    return isinstance(obj, Tensor)


def is_nonzero(input) -> bool:  # noqa: A002
    """The truth of a one-element tensor."""
    return bool(_as_tensor(input))


def is_same_size(input, other) -> bool:  # noqa: A002
    """Whether both have one shape."""
    return _as_tensor(input).shape == _as_tensor(other).shape


def manual_seed(seed: int):
    """Seed every draw tracegrad makes: dropout and the random constructors (tracer.manual_seed) and weight
    initialisation (nn.init.manual_seed), as torch.manual_seed seeds both. Returns a Generator of that seed.
    The numbers differ from torch's."""
    tracer.manual_seed(int(seed))
    _init.manual_seed(int(seed))
    _SEED[0] = int(seed)
    return Generator().manual_seed(int(seed))


_SEED = [0]


def initial_seed() -> int:
    """The seed last given to manual_seed (0 before)."""
    return _SEED[0]


def seed() -> int:
    """Seed from fresh entropy (as torch.seed); returns the seed."""
    s = int(np.random.SeedSequence().entropy % 2 ** 63)
    manual_seed(s)
    return s


class Generator(tracer.Generator):
    """torch.Generator: `Generator()`, `Generator(device="cpu")`, `.manual_seed(s)` (returns it); pass it as
    `generator=` to the random functions. Its numbers differ from torch's."""

    def __init__(self, device="cpu"):
        if isinstance(device, (int, np.integer)) and not isinstance(device, bool):  # tracer's Generator(seed)
            super().__init__(int(device))
            self._seed = int(device)
            return
        super().__init__(None)
        self._seed = None
        self.device = tracer.device(device)

    def manual_seed(self, seed: int) -> Generator:
        self._seed = int(seed)
        return super().manual_seed(int(seed))

    def initial_seed(self) -> int:
        return self._seed

    def seed(self) -> int:
        s = int(np.random.SeedSequence().entropy % 2 ** 63)
        self.manual_seed(s)
        return s


def layer_norm(input, normalized_shape, weight=None, bias=None, eps: float = 1e-5, cudnn_enable=None) -> Tensor:  # noqa: A002
    """F.layer_norm(input, normalized_shape, weight, bias, eps)."""
    return F.layer_norm(input, normalized_shape, weight, bias, eps)


def concatenate(tensors, dim: int = 0, axis=None) -> Tensor:
    """torch.concatenate: torch.cat."""
    return tracer.cat(tensors, axis=dim if axis is None else axis)


def _from_functional(name: str):
    fn = getattr(F, name)

    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        return fn(*args, **kwargs)
    return wrapped


def permute(input, dims) -> Tensor:  # noqa: A002
    """input with its axes in the order `dims`."""
    return _as_tensor(input).permute(*dims)


def reshape(input, shape) -> Tensor:  # noqa: A002
    """input with another shape of the same size (one -1 inferred)."""
    return _as_tensor(input).reshape(*shape) if hasattr(shape, "__iter__") else _as_tensor(input).reshape(shape)


def tile(input, dims) -> Tensor:  # noqa: A002
    """input repeated dims[i] times along each axis."""
    return tracer.tile(input, dims)


OVERRIDES = {
    "full": full, "full_like": full_like, "linspace": linspace, "logspace": logspace, "eye": eye,
    "as_tensor": as_tensor, "asarray": as_tensor, "scalar_tensor": scalar_tensor, "where": where,
    "equal": equal, "pow": pow, "dropout": dropout, "softmax": softmax, "log_softmax": log_softmax,
    "numel": numel, "is_tensor": is_tensor, "is_nonzero": is_nonzero, "is_same_size": is_same_size,
    "manual_seed": manual_seed, "initial_seed": initial_seed, "seed": seed, "Generator": Generator,
    "layer_norm": layer_norm, "concatenate": concatenate, "concat": concatenate, "permute": permute,
    "reshape": reshape, "tile": tile,
    "zeros_like": _like(tracer.zeros_like), "ones_like": _like(tracer.ones_like),
    "empty_like": _like(lambda x, dtype: tracer.zeros_like(x, dtype)),
    "rand_like": _like(tracer.rand_like), "randn_like": _like(tracer.randn_like),
    "Tensor": Tensor, "is_grad_enabled": tracer.is_grad_enabled,
}
# torch's top-level conv / pool / activation functions are nn.functional's, with the same signatures
for _name in ("conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
              "max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d", "adaptive_avg_pool1d", "adaptive_max_pool1d",
              "batch_norm", "instance_norm", "group_norm", "pixel_shuffle", "pixel_unshuffle", "celu", "selu",
              "prelu", "rrelu", "hardshrink", "threshold", "embedding", "binary_cross_entropy_with_logits",
              "kl_div", "cosine_similarity", "pairwise_distance", "pdist", "rms_norm", "alpha_dropout",
              "feature_alpha_dropout"):
    if hasattr(F, _name) and _name in names.TORCH:
        OVERRIDES[_name] = _from_functional(_name)

# names whose Tensor method and tracer function differ, where the method is torch's meaning
_METHOD_FIRST = frozenset({"max", "min", "var", "std", "split", "squeeze", "take", "tril", "triu", "sum", "mean",
                           "cumsum", "trace", "add", "sub", "subtract", "mul", "multiply", "div", "divide"})
# tracer functions that share a torch name but not its meaning, with no torch-meaning method either
_NOT_TORCH = frozenset({"checkpoint", "device", "autograd"})


def _method_function(name: str):
    method = getattr(Tensor, name)

    def fn(input, *args, **kwargs):  # noqa: A002
        return method(input if isinstance(input, Tensor) else tracer.tensor(input), *args, **kwargs)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"torch.{name}(input, ...): input.{name}(...) (see Tensor.{name})."
    return fn


_KEYWORDS = {"x": "input", "x1": "input", "a": "input", "xs": "tensors", "x2": "other", "b": "other",
             "sizes_": "sizes"}  # tracegrad's parameter names -> torch's


def _torch_keywords(fn):
    """fn also taking torch's keyword names (input=, other=, tensors=) for tracegrad's (x, x1, x2, xs)."""
    if not inspect.isfunction(fn):
        return fn
    try:
        params = list(inspect.signature(fn).parameters)[:2]
    except (TypeError, ValueError):
        return fn
    renames = {_KEYWORDS[p]: p for p in params if p in _KEYWORDS and _KEYWORDS[p] not in params}
    if not renames:
        return fn

    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        for torch_name, ours in renames.items():
            if torch_name in kwargs:
                kwargs[ours] = kwargs.pop(torch_name)
        return fn(*args, **kwargs)
    return wrapped


def functions() -> dict:
    """Every torch function name tracegrad has, with torch's meaning: {name: function}."""
    return {name: _torch_keywords(fn) for name, fn in _sources().items()}


def _sources() -> dict:
    out = {}
    for name in sorted(names.TORCH):
        if name in OVERRIDES:
            out[name] = OVERRIDES[name]
        elif name in _NOT_TORCH or name in names.TORCH_MODULES or name in _DTYPES:
            continue
        elif name in _METHOD_FIRST or (name not in tracer.__all__ and callable(getattr(Tensor, name, None))
                                       and not isinstance(getattr(Tensor, name, None), property)):
            if callable(getattr(Tensor, name, None)):
                out[name] = _method_function(name)
        elif name in tracer.__all__:
            out[name] = getattr(tracer, name)
    return out



def _legacy(dtype: str, name: str):
    def make(*args, device=None):
        if len(args) == 1 and not isinstance(args[0], (int, np.integer)):
            return tracer.tensor(np.asarray(args[0]), dtype, device=device)  # FloatTensor([1, 2]): the values
        return tracer.zeros(*args, dtype=dtype, device=device)  # FloatTensor(2, 3): a size (zeros here)
    make.__name__ = make.__qualname__ = name
    make.__doc__ = f"torch.{name}(data) or torch.{name}(*size): a {dtype} tensor (legacy constructor)."
    return make


for _dtype, _name in (("float32", "FloatTensor"), ("float64", "DoubleTensor"), ("float16", "HalfTensor"),
                      ("int64", "LongTensor"), ("int32", "IntTensor"), ("int16", "ShortTensor"),
                      ("int8", "CharTensor"), ("uint8", "ByteTensor"), ("bool", "BoolTensor")):
    OVERRIDES[_name] = _legacy(_dtype, _name)

FUNCTIONS = functions()  # nn/torch/__init__.py hands them on
__all__ = ["FUNCTIONS", "functions"]
