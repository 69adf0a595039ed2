"""tracegrad's IR: typed SSA bindings in one dataflow block, printed and parsed as TVMScript."""
__tracegrad__ = True  # the marker ir/siblings.py looks for in each of tracegrad's four packages
from . import ops, siblings, transform  # siblings: tracer, autodiff, nn checked at the end
from .builder import Builder, as_expr, const
from .dot import render, to_dot
from .nodes import (
                    Binding,
                    Block,
                    Call,
                    Constant,
                    Expr,
                    Function,
                    IRModule,
                    Source,
                    Tuple,
                    TupleGetItem,
                    Var,
                    free_vars,
                    substitute,
)
from .ops import OPS, get_op, make_call
from .parser import parse
from .printer import print_function, print_module
from .runtime import Executor, MemoryProfile, Stats, memory_profile
from .structural import structural_equal
from .types import DTYPES, FLOAT_DTYPES, IRError, TensorType, TupleType, Type
from .verifier import verify

__all__ = [
    "Binding", "Block", "Builder", "Call", "Constant", "DTYPES", "Executor", "Expr", "FLOAT_DTYPES",
    "Function", "IRError", "IRModule", "MemoryProfile", "OPS", "Source", "Stats", "TensorType", "Tuple",
    "TupleGetItem", "TupleType", "Type", "Var", "as_expr", "const", "free_vars", "get_op", "make_call",
    "memory_profile", "ops", "parse", "print_function", "print_module", "render", "runtime", "structural_equal",
    "substitute", "to_dot", "transform", "verify",
]

siblings.check_siblings("ir")  # tracer, autodiff and nn: tracegrad's, or a PackageClashError
