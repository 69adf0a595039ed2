"""VJP rules, one file per op family (the same families as ir/ops)."""
from . import (  # noqa: F401
    attention,
    binary_math,
    conv,
    create,
    decomp,
    elementwise,
    gamma_fns,
    index,
    linalg,
    manipulate,
    markers,
    nn,
    reduction,
    rnn_cell,
    scan,
    svd,
    unary_math,
    update,
)
from .registry import VJPS, register_vjp

__all__ = ["VJPS", "register_vjp"]
