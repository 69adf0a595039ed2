"""Op families; importing this package registers every op."""
from . import (  # noqa: F401
    attention,
    binary_math,
    bitwise,
    conv,
    create,
    decomp,
    elementwise,
    fused,
    gamma_fns,
    gamma_grad,
    index,
    linalg,
    manipulate,
    markers,
    nn,
    pool,
    random,
    reduction,
    resample,
    rnn_cell,
    scan,
    search,
    sort,
    svd,
    unary_math,
    update,
)
from .registry import OPS, REQUIRED, Attr, Op, declare, get_op, make_call

__all__ = ["OPS", "REQUIRED", "Attr", "Op", "declare", "get_op", "make_call"]
