"""tracegrad's IR: typed SSA bindings in one dataflow block, printed and parsed as TVMScript."""
from . import ops, transform
from .builder import Builder, as_expr, const
from .executor import Executor, Stats
from .nodes import (
                    Binding,
                    Block,
                    Call,
                    Constant,
                    Expr,
                    Function,
                    IRModule,
                    Tuple,
                    TupleGetItem,
                    Var,
                    free_vars,
                    substitute,
)
from .ops import OPS, get_op, make_call
from .parser import parse
from .printer import print_function, print_module
from .structural import structural_equal
from .types import DTYPES, FLOAT_DTYPES, IRError, TensorType, TupleType, Type
from .verifier import verify

__all__ = [
    "Binding", "Block", "Builder", "Call", "Constant", "DTYPES", "Executor", "Expr", "FLOAT_DTYPES",
    "Function", "IRError", "IRModule", "OPS", "Stats", "TensorType", "Tuple", "TupleGetItem", "TupleType",
    "Type", "Var", "as_expr", "const", "free_vars", "get_op", "make_call", "ops", "parse", "print_function",
    "print_module", "structural_equal", "substitute", "transform", "verify",
]
