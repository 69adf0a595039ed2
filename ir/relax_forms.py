"""The TVMScript forms the parser reads into tracegrad's IR beyond one op call per binding: TVM's
operator sugar, the metadata section of large constants, Relax's creation-op signatures (a dtype, a
tensor fill value) and Relax's strided_slice bounds. A mixin of ir.parser's parser; see docs/design.md,
"Relax fidelity".
"""
from __future__ import annotations

import ast

import numpy as np

from .metadata import CONSTANT_KEYS, load_constants
from .nodes import Constant, Expr
from .ops.registry import make_call
from .types import IRError, TensorType

# Relax's signatures of the creation ops the parser reads into tracegrad's (see RelaxForms.creation)
CREATION_FORMS = {"zeros_like": ("x", "dtype"), "ones_like": ("x", "dtype"),
                  "full_like": ("x", "fill_value", "dtype"), "full": ("shape", "fill_value", "dtype")}
# TVM 0.27 prints a non-finite scalar constant as R.const("inf", "float32") (also "-inf", "nan")
NONFINITE = ("inf", "-inf", "nan")
# Relax ops that are one of tracegrad's with an attribute set: name -> (tracegrad's op, attributes)
OP_ALIASES = {"nn.gelu_tanh": ("nn.gelu", {"approximate": "tanh"})}
# TVMScript's operator sugar on Relax values
BINARY_SUGAR = {ast.Add: "add", ast.Sub: "subtract", ast.Mult: "multiply", ast.Div: "divide",
                ast.FloorDiv: "floor_divide", ast.Pow: "power"}


def dotted(node: ast.expr) -> str | None:
    """`R.nn.softmax` -> "R.nn.softmax"; None for anything that is not a dotted name."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def callee(node: ast.expr) -> str | None:
    return dotted(node.func) if isinstance(node, ast.Call) else None


class RelaxForms:
    """Methods of the parser (it supplies error, source, expr, literal, const, emit and `metadata`)."""

    def load_metadata(self, stmt: ast.Assign) -> None:
        call = stmt.value
        if len(call.args) != 1 or not isinstance(call.args[0], ast.Constant) or not isinstance(call.args[0].value, str):
            raise self.error(stmt, "metadata = tvm.ir.load_json(...) expects one string of JSON")
        try:
            self.metadata = load_constants(call.args[0].value)
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as e:
            raise self.error(stmt, f"cannot read the metadata section: {e}") from None

    def sugar(self, node: ast.expr, op_name: str, operands: list[ast.expr]) -> Expr:
        """`a + b`, `-a`, ... on Relax values: the op call they stand for."""
        args = []
        for operand in operands:
            if isinstance(operand, ast.BinOp | ast.UnaryOp | ast.Call) and callee(operand) not in ("R.const",):
                raise self.error(operand, f"nested expression `{self.source(operand)}` is not supported; bind it "
                                          "to a variable first")
            if is_number(operand):
                raise self.error(operand, f"`{self.source(node)}`: a Python number is not a Relax value; write "
                                          "R.const(value, dtype)")
            args.append(self.expr(operand))
        try:
            return make_call(op_name, args)
        except (IRError, TypeError) as e:
            raise self.error(node, str(e)) from None

    def creation(self, node: ast.Call, name: str) -> Expr:
        """Relax's zeros_like / ones_like / full_like with a dtype, and full / full_like whose fill value is a
        tensor: tracegrad's creation ops take the fill as a number, so a tensor fill becomes
        broadcast_to(astype(fill, dtype), shape) (its gradient, the sum, flows back to the fill value)."""
        op_name = name[2:]
        params = CREATION_FORMS[op_name]
        given = self.arguments(node, name, params)
        missing = [p for p in params if p not in given and p != "dtype"]
        if missing:
            raise self.error(node, f"{name} expects {missing[0]}")
        dtype = self.literal(given["dtype"]) if "dtype" in given else None
        dtype = None if dtype in ("void", "") else dtype
        if "x" in given:
            x = self.expr(given["x"])
            if not isinstance(x.type, TensorType):
                raise self.error(given["x"], f"{name}: x must be a tensor, got {x.type}")
            shape, like = x.type.shape, x
        else:
            shape, like = self.literal(given["shape"]), None
        try:
            if "fill_value" not in given:  # zeros_like / ones_like
                if dtype in (None, like.type.dtype):
                    return make_call(op_name, [like])
                return make_call(op_name.removesuffix("_like"), [], {"shape": shape, "dtype": dtype})
            fill = given["fill_value"]
            number = self.fill_number(fill)
            if number is not None:
                out = dtype or (like.type.dtype if like is not None else number[1])
                if like is not None and out == like.type.dtype:
                    return make_call("full_like", [like], {"fill_value": number[0]})
                return make_call("full", [], {"shape": shape, "fill_value": number[0], "dtype": out})
            value = self.expr(fill)
            if not isinstance(value.type, TensorType) or value.type.shape != ():
                raise IRError(f"{op_name}: fill_value must be a 0-d tensor, got {value.type}")
            out = dtype or (like.type.dtype if like is not None else value.type.dtype)
            if value.type.dtype != out:
                value = self.emit(make_call("astype", [value], {"dtype": out}), "fill")
            return make_call("broadcast_to", [value], {"shape": shape})
        except (IRError, TypeError) as e:
            raise self.error(node, str(e)) from None

    def nll_loss(self, node: ast.Call, name: str) -> Expr:
        """Relax's `nn.nll_loss(predictions, targets, weights=None, reduction, ignore_index)`. tracegrad's op has
        no class weights, so weights read as ops: w[t] for the counted targets times the unweighted per-item
        loss, summed, and for "mean" divided by the sum of those w[t] (PyTorch's and Relax's weighted mean)."""
        params = ("predictions", "targets", "weights", "reduction", "ignore_index")
        given = self.arguments(node, name, params)
        for p in params[:2]:
            if p not in given:
                raise self.error(node, f"{name} expects {p}")
        pred, targets = self.expr(given["predictions"]), self.expr(given["targets"])
        attrs = {k: self.literal(given[k]) for k in params[3:] if k in given}
        weights = given.get("weights")
        try:
            if weights is None or isinstance(weights, ast.Constant) and weights.value is None:
                return make_call("nn.nll_loss", [pred, targets], attrs)
            w = self.expr(weights)
            reduction = attrs.get("reduction", "mean")
            per_item = self.emit(make_call("nn.nll_loss", [pred, targets], {**attrs, "reduction": "none"}), "lv")
            tdtype = targets.type.dtype
            ignore = Constant(np.asarray(attrs.get("ignore_index", -100), tdtype))
            counted = self.emit(make_call("not_equal", [targets, ignore]), "lv")
            safe = self.emit(make_call("where", [counted, targets, Constant(np.zeros((), tdtype))]), "lv")
            picked = self.emit(make_call("take", [w, safe], {"axis": 0}), "lv")
            mask = self.emit(make_call("astype", [counted], {"dtype": w.type.dtype}), "lv")
            wt = self.emit(make_call("multiply", [picked, mask]), "lv")
            weighted = make_call("multiply", [per_item, wt])
            if reduction == "none":
                return weighted
            total = make_call("sum", [self.emit(weighted, "lv")], {"axis": None, "keepdims": False})
            if reduction == "sum":
                return total
            norm = self.emit(make_call("sum", [wt], {"axis": None, "keepdims": False}), "lv")
            return make_call("divide", [self.emit(total, "lv"), norm])
        except (IRError, TypeError) as e:
            raise self.error(node, str(e)) from None

    def arguments(self, node: ast.Call, name: str, params: tuple[str, ...]) -> dict:
        """{parameter: argument node} of a call, positional then keyword, each given once."""
        given = dict(zip(params, node.args, strict=False))
        if len(node.args) > len(params):
            raise self.error(node, f"{name} takes {list(params)}, got {len(node.args)} positional arguments")
        for kw in node.keywords:
            if kw.arg not in params or kw.arg in given:
                raise self.error(kw.value, f"{name}: unexpected or repeated argument {kw.arg!r}; it takes "
                                           f"{list(params)}")
            given[kw.arg] = kw.value
        return given

    def fill_number(self, node: ast.expr):
        """(value, dtype) of a literal fill value or of R.const(scalar, dtype); None for a tensor expression."""
        if callee(node) == "R.const":
            c = self.const(node)  # checked; the literal itself is kept (0.1 stays 0.1 for a float16 fill)
            literal = self.literal(node.args[0])
            literal = float(literal) if isinstance(literal, str) else literal  # TVM's "inf", checked by const
            return (literal, c.type.dtype) if c.data.ndim == 0 and not isinstance(literal, list) else None
        if isinstance(node, ast.Name | ast.Subscript | ast.Tuple):
            return None
        value = self.literal(node)  # a number, float("inf"), -float("nan"), ...
        if not isinstance(value, bool | int | float):
            raise self.error(node, f"fill_value must be a number or a 0-d tensor, got `{self.source(node)}`")
        return value, ("float32" if isinstance(value, float) else "int32")

    def metadata_constant(self, node: ast.Subscript) -> Constant:
        """`metadata["relax.expr.Constant"][i]`: the i-th constant of the metadata section."""
        inner = node.value
        if not (isinstance(inner, ast.Subscript) and isinstance(inner.value, ast.Name)):
            raise self.error(node, f"expected metadata[\"relax.expr.Constant\"][i], got `{self.source(node)}`")
        key, index = self.literal(inner.slice), self.literal(node.slice)
        if self.metadata is None:
            raise self.error(node, f"`{self.source(node)}` refers to the metadata section, which this text does not "
                                   "have: print the module with mod.script(show_meta=True)")
        entries = self.metadata.get(key)
        if key not in CONSTANT_KEYS or entries is None:  # TVM 0.27 names its constants ir.GenericConst
            raise self.error(node, f"metadata[{key!r}]: only {' and '.join(CONSTANT_KEYS)} entries are supported "
                                   f"(the section has {sorted(self.metadata)})")
        if not isinstance(index, int) or not 0 <= index < len(entries):
            raise self.error(node, f"metadata[{key!r}][{index!r}]: the section holds {len(entries)} constant(s)")
        return Constant(entries[index])


def normalized_slice(t, attrs: dict) -> dict:
    """Relax's strided_slice begin/end (negative ones counted from the back, out-of-range ones clamped, as
    Python's slices) in tracegrad's normalized form; strides default to ones, as in Relax."""
    axes, begin, end = attrs.get("axes"), attrs.get("begin"), attrs.get("end")
    strides = attrs.get("strides") or [1] * len(axes or ())
    if not isinstance(t, TensorType) or not all(isinstance(v, list | tuple) for v in (axes, begin, end, strides)) \
            or not len(axes) == len(begin) == len(end) == len(strides) \
            or not all(isinstance(a, int) and -t.ndim <= a < t.ndim for a in axes) or 0 in strides:
        return attrs  # inference names what is wrong
    bounds = [slice(b, e, st).indices(t.shape[a]) for a, b, e, st in zip(axes, begin, end, strides, strict=True)]
    return {**attrs, "begin": [lo for lo, _, _ in bounds], "end": [hi for _, hi, _ in bounds], "strides": strides}


def relax_take_axis(t, attrs: dict) -> dict:
    """Relax's take without an axis (or with axis=None, its default) indexes a 1-d x, as axis 0; any other x
    is refused, as TVM 0.27 refuses it."""
    if attrs.get("axis") is not None:
        return attrs
    if isinstance(t, TensorType) and t.ndim != 1:
        raise IRError(f"take: axis=None (Relax's default) takes from a 1-d x only, got x of shape {t.shape}; "
                      "give the axis")
    return {**attrs, "axis": 0}


def is_number(node: ast.expr) -> bool:
    while isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        node = node.operand
    return isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool)


def is_metadata(stmt: ast.stmt) -> bool:
    """`metadata = tvm.ir.load_json(...)`, which mod.script(show_meta=True) writes above the module."""
    return (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
            and stmt.targets[0].id == "metadata" and callee(stmt.value) in ("tvm.ir.load_json", "ir.load_json"))
