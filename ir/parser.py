"""Reads TVMScript text (what ir.printer writes, and what Relax's own tests write) back into an IRModule.

Built on Python's `ast`: the text is Python syntax, so we parse it with Python and walk the tree,
giving every error its line and column. Calls are generic: `R.<dotted op name>(...)` is looked up in
the op registry and built with `make_call`, so types are inferred and attributes normalized.
"""
from __future__ import annotations

import ast
import textwrap

import numpy as np

from .nodes import Binding, Block, Constant, Expr, Function, IRModule, Tuple, TupleGetItem, Var
from .ops.registry import OPS, make_call
from .relax_forms import (
    BINARY_SUGAR,
    CREATION_FORMS,
    NONFINITE,
    OP_ALIASES,
    RelaxForms,
    is_metadata,
    is_number,
    normalized_slice,
    relax_take_axis,
)
from .relax_forms import (
    callee as _callee,
)
from .relax_forms import (
    dotted as _dotted,
)
from .types import IRError, TensorType, TupleType, Type, check_dtype


def parse(text: str) -> IRModule:
    """Parse TVMScript text into an IRModule; raises IRError with line and column when malformed.

    >>> mod = parse('''
    ... @I.ir_module
    ... class Module:
    ...     @R.function
    ...     def main(x: R.Tensor((2,), "float32")):
    ...         with R.dataflow():
    ...             y = R.exp(x)
    ...             R.output(y)
    ...         return y
    ... ''')
    >>> mod["main"].ret_type
    TensorType(shape=(2,), dtype='float32')
    """
    dedented = textwrap.dedent(text)
    margin = _margin(text, dedented)
    try:
        tree = ast.parse(dedented)
    except SyntaxError as e:
        raise IRError(f"line {e.lineno or 1}, column {(e.offset or 0) + margin}: invalid syntax ({e.msg})") from None
    return _Parser(margin).module(tree)


def _margin(text: str, dedented: str) -> int:
    """How many columns dedent removed, so reported columns match the text as given."""
    for before, after in zip(text.splitlines(), dedented.splitlines(), strict=False):
        if after.strip():
            return len(before) - len(after)
    return 0


def _root_name(node: ast.expr) -> str | None:
    while isinstance(node, ast.Attribute | ast.Subscript):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _is_decorator(dec: ast.expr, names: tuple[str, ...]) -> bool:
    # decorator arguments (`@R.function(pure=True)`, `@I.ir_module(s_tir=True)`) are accepted and ignored
    return (_callee(dec) if isinstance(dec, ast.Call) else _dotted(dec)) in names


_MODULE_DECORATORS = ("I.ir_module", "ir_module", "tvm.script.ir_module")
_FUNCTION_DECORATORS = ("R.function",)
_SPECIALIZES = "tracegrad specializes shapes: trace or write the module with concrete shapes"
class _Parser(RelaxForms):
    def __init__(self, margin: int):
        self.margin = margin
        self.scope: dict[str, Var] = {}
        self.shapes: dict[str, tuple[int, ...]] = {}  # `s = R.shape([2, 3])`: read where an attribute is
        self.metadata: dict[str, list] | None = None  # the `metadata = tvm.ir.load_json(...)` section

    def error(self, node: ast.AST, message: str) -> IRError:
        return IRError(f"line {node.lineno}, column {node.col_offset + 1 + self.margin}: {message}")

    def source(self, node: ast.AST) -> str:
        return ast.unparse(node)

    # ------------------------------------------------------------------ module and functions

    def module(self, tree: ast.Module) -> IRModule:
        functions: dict[str, Function] = {}
        classes = 0
        for stmt in tree.body:
            if isinstance(stmt, (ast.Import, ast.ImportFrom)) or _is_docstring(stmt):
                continue
            if is_metadata(stmt):
                self.load_metadata(stmt)
            elif isinstance(stmt, ast.ClassDef):
                if not any(_is_decorator(d, _MODULE_DECORATORS) for d in stmt.decorator_list):
                    raise self.error(stmt, f"expected @I.ir_module on class {stmt.name}")
                classes += 1
                if classes > 1:
                    raise self.error(stmt, "expected one @I.ir_module class, found a second")
                for item in stmt.body:
                    if _is_docstring(item) or isinstance(item, ast.Pass):
                        continue
                    if not isinstance(item, ast.FunctionDef):
                        raise self.error(item, f"expected an @R.function method, got `{self.source(item)}`")
                    self.add_function(functions, item)
            elif isinstance(stmt, ast.FunctionDef):
                self.add_function(functions, stmt)
            else:
                raise self.error(stmt, "expected an `@I.ir_module` class or an `@R.function` def, "
                                       f"got `{self.source(stmt)}`")
        if not functions:
            raise IRError("line 1, column 1: expected an @I.ir_module class with @R.function methods; found none")
        return IRModule(functions)

    def add_function(self, functions: dict, fdef: ast.FunctionDef) -> None:
        if any(_is_decorator(d, ("T.prim_func",)) for d in fdef.decorator_list):
            raise self.error(fdef, f"T.prim_func {fdef.name}: TIR functions are not supported; tracegrad runs "
                                   "Relax ops only (write the computation with R. ops)")
        if not any(_is_decorator(d, _FUNCTION_DECORATORS) for d in fdef.decorator_list):
            raise self.error(fdef, f"expected @R.function on def {fdef.name}")
        if fdef.name in functions:
            raise self.error(fdef, f"function {fdef.name} defined twice")
        functions[fdef.name] = self.function(fdef)

    def function(self, fdef: ast.FunctionDef) -> Function:
        a = fdef.args
        if a.vararg or a.kwarg or a.kwonlyargs or a.defaults:
            raise self.error(fdef, f"function {fdef.name}: only plain typed parameters are supported")
        self.scope, self.shapes = {}, {}
        params = []
        for arg in a.posonlyargs + a.args:
            if arg.annotation is None:
                raise self.error(arg, f"parameter {arg.arg} needs a type annotation: R.Tensor(shape, dtype)")
            if arg.arg in self.scope:
                raise self.error(arg, f"parameter {arg.arg} appears twice")
            var = Var(arg.arg, self.type(arg.annotation))
            self.scope[arg.arg] = var
            params.append(var)
        blocks: list[Block] = []
        plain: list[Binding] = []
        attrs: dict = {}
        body = None
        for stmt in fdef.body:
            if body is not None:
                raise self.error(stmt, "code after return")
            if _is_docstring(stmt) or isinstance(stmt, ast.Pass):
                continue
            if isinstance(stmt, ast.With):
                if plain:
                    blocks.append(Block(plain, is_dataflow=False))
                    plain = []
                blocks.append(self.dataflow(stmt))
            elif isinstance(stmt, (ast.Assign, ast.AnnAssign)):
                plain.extend(self.binding(stmt))
            elif isinstance(stmt, ast.Return):
                if stmt.value is None:
                    raise self.error(stmt, "return needs a value")
                body = self.expr(stmt.value)
            elif isinstance(stmt, ast.Expr) and _callee(stmt.value) == "R.func_attr":
                attrs.update(self.func_attr(stmt.value))
            else:
                raise self.error(stmt, f"expected a binding, `with R.dataflow():` or return, got `{self.source(stmt)}`")
        if plain:
            blocks.append(Block(plain, is_dataflow=False))
        if body is None:
            raise self.error(fdef, f"function {fdef.name} has no return")
        if fdef.returns is not None:
            declared = self.type(fdef.returns)
            if declared != body.type:
                raise self.error(fdef.returns, f"function {fdef.name}: return annotation says {declared}, "
                                               f"the returned value has type {body.type}")
        return Function(params, blocks, body, attrs)

    def func_attr(self, call: ast.Call) -> dict:
        if len(call.args) != 1 or not isinstance(call.args[0], ast.Dict):
            raise self.error(call, "R.func_attr expects one dict literal")
        d = call.args[0]
        if None in d.keys:
            raise self.error(call, "R.func_attr expects a dict literal without ** entries")
        return {self.literal(k): self.literal(v) for k, v in zip(d.keys, d.values, strict=True)}

    def dataflow(self, stmt: ast.With) -> Block:
        if len(stmt.items) != 1 or _callee(stmt.items[0].context_expr) != "R.dataflow" \
                or stmt.items[0].optional_vars is not None:
            raise self.error(stmt, "expected `with R.dataflow():`")
        bindings = []
        done = False
        for inner in stmt.body:
            if done:
                raise self.error(inner, "R.output(...) must be the last statement of a dataflow block")
            if isinstance(inner, (ast.Assign, ast.AnnAssign)):
                bindings.extend(self.binding(inner))
            elif isinstance(inner, ast.Expr) and _callee(inner.value) == "R.output":
                # Our IR has no dataflow-var scoping: R.output is checked, then derived again when printing.
                for name in inner.value.args:
                    if not isinstance(name, ast.Name):
                        raise self.error(name, f"R.output lists variables, got `{self.source(name)}`")
                    if name.id not in self.shapes:
                        self.lookup(name)
                done = True
            elif _is_docstring(inner) or isinstance(inner, ast.Pass):
                continue
            else:
                raise self.error(inner, f"expected a binding or R.output(...) in the dataflow block, "
                                        f"got `{self.source(inner)}`")
        return Block(bindings, is_dataflow=True)

    def binding(self, stmt: ast.Assign | ast.AnnAssign) -> list[Binding]:
        """The statement's binding, after any that reading its value emitted (see `emit`)."""
        self.pending: list[Binding] = []
        bound = self.bind(stmt)
        return self.pending + ([bound] if bound is not None else [])

    def emit(self, value: Expr, hint: str) -> Var:
        """Bind a value that a TVMScript form stands for but tracegrad writes with one more op."""
        var = Var(hint, value.type)
        self.pending.append(Binding(var, value))
        return var

    def bind(self, stmt: ast.Assign | ast.AnnAssign) -> Binding | None:
        if isinstance(stmt, ast.Assign):
            if len(stmt.targets) != 1:
                raise self.error(stmt, "expected one variable on the left of =")
            target, annotation = stmt.targets[0], None
        else:
            target, annotation = stmt.target, stmt.annotation
            if stmt.value is None:
                raise self.error(stmt, f"binding of {self.source(target)} has no value")
        if not isinstance(target, ast.Name):
            raise self.error(target, f"expected a variable name on the left of =, got `{self.source(target)}`")
        if _callee(stmt.value) == "R.shape":  # a shape value: kept by name, read where a shape attribute is
            if annotation is not None and _callee(annotation) != "R.Shape":
                raise self.error(stmt, f"binding {target.id}: a shape value is annotated R.Shape(...)")
            self.shapes[target.id] = self.literal(stmt.value)
            self.scope.pop(target.id, None)
            return None
        value = self.value(stmt.value)
        if annotation is not None:
            declared = self.type(annotation)
            if declared != value.type:
                raise self.error(stmt, f"binding {target.id}: annotation says {declared}, "
                                       f"inference says {value.type}")
        # Rebinding a name shadows it, as TVMScript does; the new var is a different var.
        var = Var(target.id, value.type)
        self.scope[target.id] = var
        self.shapes.pop(target.id, None)
        return Binding(var, value)

    # ------------------------------------------------------------------ expressions

    def value(self, node: ast.expr) -> Expr:
        """The right-hand side of a binding: an op call, or any argument expression."""
        name = _callee(node)
        if name == "R.call_tir" or name is not None and name.startswith("T."):
            raise self.error(node, f"{name}: TIR is not supported; tracegrad runs Relax ops only"
                                   + (f" ({_SPECIALIZES})" if name.startswith("T.") else ""))
        if name is not None and name.startswith("R.") and name not in ("R.const", "R.tuple"):
            return self.op_call(node, name)
        if isinstance(node, ast.BinOp) and type(node.op) in BINARY_SUGAR:
            return self.sugar(node, BINARY_SUGAR[type(node.op)], [node.left, node.right])
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and not is_number(node.operand):
            return self.sugar(node, "negative", [node.operand])
        return self.expr(node)

    def expr(self, node: ast.expr) -> Expr:
        """A variable, a constant, a tuple or a tuple item (never a call: IR arguments are atomic)."""
        if isinstance(node, ast.Name):
            return self.lookup(node)
        if isinstance(node, (ast.Tuple, ast.List)):
            return Tuple(self.expr(e) for e in node.elts)
        if isinstance(node, ast.Subscript):
            if _root_name(node) == "metadata" and "metadata" not in self.scope:
                return self.metadata_constant(node)
            try:
                index = self.literal(node.slice)
            except IRError:
                index = None
            if not isinstance(index, int) or isinstance(index, bool):
                raise self.error(node.slice, f"tuple index must be an integer, got `{self.source(node.slice)}`")
            try:
                return TupleGetItem(self.expr(node.value), index)
            except IRError as e:
                raise self.error(node, str(e)) from None
        name = _callee(node)
        if name == "R.const":
            return self.const(node)
        if name == "R.tuple":
            return Tuple(self.expr(e) for e in node.args)
        if name is not None and name.startswith("R."):
            raise self.error(node, f"nested call {name}(...) is not supported; bind it to a variable first")
        raise self.error(node, f"expected a variable, R.const(...), a tuple or a tuple item, "
                               f"got `{self.source(node)}`")

    def lookup(self, node: ast.Name) -> Var:
        try:
            return self.scope[node.id]
        except KeyError:
            raise self.error(node, f"undefined variable {node.id!r}") from None

    def op_call(self, node: ast.Call, name: str) -> Expr:
        op_name = name[2:]
        if op_name in CREATION_FORMS:
            return self.creation(node, name)
        if op_name == "nn.nll_loss":
            return self.nll_loss(node, name)
        op_name, implied = OP_ALIASES.get(op_name, (op_name, {}))
        op = OPS.get(op_name)
        if op is None:
            raise self.error(node, f"unknown op {name!r}")
        inputs = [i.lstrip("*") for i in op.inputs]
        if any(isinstance(a, ast.Starred) for a in node.args):
            raise self.error(node, f"{name}: *arguments are not supported")
        tensor_nodes: list = list(node.args[:len(inputs)])
        attr_nodes = node.args[len(inputs):]
        if len(attr_nodes) > len(op.attrs):
            raise self.error(node, f"{name} takes {len(inputs)} tensor argument(s) {tuple(inputs)} and "
                                   f"{len(op.attrs)} attribute(s) {[a.name for a in op.attrs]}, "
                                   f"got {len(node.args)} positional arguments")
        attrs = {**implied, **{a.name: self.literal(n) for a, n in zip(op.attrs, attr_nodes, strict=False)}}
        attr_names = [a.name for a in op.attrs]
        out_dtype = ("out_dtype", None)
        for kw in node.keywords:
            if kw.arg is None:
                raise self.error(kw.value, f"{name}: **arguments are not supported")
            if kw.arg in inputs:
                i = inputs.index(kw.arg)
                tensor_nodes += [None] * (i + 1 - len(tensor_nodes))
                if tensor_nodes[i] is not None:
                    raise self.error(kw.value, f"{name}: argument {kw.arg} given twice")
                tensor_nodes[i] = kw.value
            elif kw.arg in attr_names:
                if kw.arg in attrs:
                    raise self.error(kw.value, f"{name}: attribute {kw.arg} given twice")
                attrs[kw.arg] = self.literal(kw.value)
            elif kw.arg in ("out_dtype", "dtype") and kw.arg in op.fixed:
                out_dtype = (kw.arg, self.literal(kw.value))  # checked against the result once it is inferred
            elif kw.arg in op.fixed:
                value = self.literal(kw.value)
                if value not in op.fixed[kw.arg]:
                    raise self.error(kw.value, f"{name}: tracegrad supports {kw.arg} in {list(op.fixed[kw.arg])} "
                                               f"only, got {value!r}")
            else:
                raise self.error(kw.value, f"{name} has no argument or attribute {kw.arg!r}; "
                                           f"it takes {tuple(inputs)} and attributes {attr_names}")
        if len(tensor_nodes) < len(inputs) or None in tensor_nodes:
            raise self.error(node, f"{name} expects {len(inputs)} tensor argument(s) {tuple(inputs)}")
        args = [self.expr(n) for n in tensor_nodes]
        try:
            if op_name == "strided_slice":
                attrs = normalized_slice(args[0].type, attrs)
            elif op_name == "take":
                attrs = relax_take_axis(args[0].type, attrs)
            call = make_call(op_name, args, attrs)
        except (IRError, TypeError) as e:
            raise self.error(node, str(e)) from None
        # TVM 0.27 prints an unset out_dtype (cumsum's dtype) as None, older versions as "void"; the result's own
        # dtype means the same (tracegrad never converts inside an op)
        accepted = [None, "void", ""] + ([call.type.dtype] if isinstance(call.type, TensorType) else [])
        if out_dtype[1] not in accepted:
            raise self.error(node, f"{name}: tracegrad supports {out_dtype[0]} in {accepted} only, got "
                                   f"{out_dtype[1]!r}; convert with R.astype")
        return call

    def const(self, node: ast.Call) -> Constant:
        """R.const(value, "dtype"), with shape=(...) when the nested list cannot say it (a (0, 3) constant)."""
        kwargs = {k.arg: k.value for k in node.keywords}
        if set(kwargs) - {"dtype", "shape"} or len(kwargs) < len(node.keywords) or not 1 <= len(node.args) <= 2:
            raise self.error(node, 'expected R.const(value, "dtype")')
        value = self.literal(node.args[0])
        if isinstance(value, str) and value in NONFINITE:  # how TVM 0.27 prints an inf or nan scalar constant
            value = float(value)
        dtypes = [self.literal(n) for n in node.args[1:]] + [self.literal(kwargs[k]) for k in kwargs if k == "dtype"]
        shape = self.literal(kwargs["shape"]) if "shape" in kwargs else None
        if len(dtypes) > 1:
            raise self.error(node, "R.const: dtype given twice")
        try:
            if not _is_number_tree(value):
                raise TypeError("the value must be a number or a nested list of numbers")
            if dtypes:
                if not isinstance(dtypes[0], str):
                    raise TypeError(f"dtype must be a string, got {dtypes[0]!r}")
                data = np.asarray(value, dtype=check_dtype(dtypes[0], "R.const"))
            else:  # as Relax: Python ints are int32 and floats float32
                data = np.asarray(value)
                data = data.astype({"int64": "int32", "float64": "float32"}.get(str(data.dtype), data.dtype))
                check_dtype(str(data.dtype), "R.const")
            if shape is not None:
                if not isinstance(shape, list | tuple) or not all(type(d) is int and d >= 0 for d in shape) \
                        or data.size != int(np.prod(shape)):
                    raise ValueError(f"a value of shape {data.shape} cannot take shape {shape}")
                data = data.reshape(tuple(shape))
        except (TypeError, ValueError, OverflowError) as e:
            raise self.error(node, f"R.const: cannot make a constant of {self.source(node.args[0])}: {e}") from None
        return Constant(data)

    def literal(self, node: ast.expr):
        """A Python literal for an attribute or constant: numbers, strings, None, bools, lists, tuples,
        R.shape([...]), float("inf") / float("nan"), with unary minus."""
        if isinstance(node, ast.Constant) and not isinstance(node.value, bytes | complex):
            return node.value
        if isinstance(node, ast.Name) and node.id in self.shapes:
            return self.shapes[node.id]
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
            v = self.literal(node.operand)
            if isinstance(v, int | float) and not isinstance(v, bool):
                return -v if isinstance(node.op, ast.USub) else v
        elif isinstance(node, ast.List):
            return [self.literal(e) for e in node.elts]
        elif isinstance(node, ast.Tuple):
            return tuple(self.literal(e) for e in node.elts)
        elif _callee(node) == "R.shape" and len(node.args) == 1 and not node.keywords:
            dims = self.literal(node.args[0])
            if isinstance(dims, list | tuple) and all(isinstance(d, int) and not isinstance(d, bool) for d in dims):
                return tuple(dims)
        elif _callee(node) == "float" and len(node.args) == 1 and not node.keywords:
            text = self.literal(node.args[0])
            if isinstance(text, str) and text.strip().lower() in ("inf", "-inf", "+inf", "nan", "infinity"):
                return float(text)
        raise self.error(node, f"expected a literal (number, string, None, list, R.shape([...]) or "
                               f"float(\"inf\")), got `{self.source(node)}`")

    # ------------------------------------------------------------------ types

    def type(self, node: ast.expr) -> Type:
        name = _callee(node)
        if name == "R.Tuple":
            if node.keywords:
                raise self.error(node, "R.Tuple takes its field types positionally")
            return TupleType(tuple(self.type(f) for f in node.args))
        if name == "R.Tensor":
            return self.tensor_type(node)
        if _dotted(node) == "R.Tensor":
            raise self.error(node, "R.Tensor needs a static shape: R.Tensor((3, 3), dtype=\"float32\")")
        raise self.error(node, f"expected a type R.Tensor(shape, dtype) or R.Tuple(...), got `{self.source(node)}`")

    def tensor_type(self, node: ast.Call) -> TensorType:
        given = dict(zip(("shape", "dtype"), node.args, strict=False))
        if len(node.args) > 2:
            raise self.error(node, "R.Tensor takes (shape, dtype)")
        for kw in node.keywords:
            if kw.arg not in ("shape", "dtype", "ndim") or kw.arg in given:
                raise self.error(kw.value, f"R.Tensor: unexpected or repeated argument {kw.arg}")
            given[kw.arg] = kw.value
        if isinstance(given.get("shape"), ast.Tuple | ast.List):
            for d in given["shape"].elts:
                if isinstance(d, ast.Name) or isinstance(d, ast.Constant) and isinstance(d.value, str) \
                        or isinstance(d, ast.BinOp):
                    raise self.error(d, f"R.Tensor: symbolic dimension `{self.source(d)}`; {_SPECIALIZES}")
        shape = self.literal(given["shape"]) if "shape" in given else None
        if not isinstance(shape, list | tuple) or not all(isinstance(d, int) and not isinstance(d, bool)
                                                          for d in shape):
            raise self.error(node, f"R.Tensor needs a static shape of integers, got `{self.source(node)}`")
        dtype = self.literal(given["dtype"]) if "dtype" in given else "float32"
        if not isinstance(dtype, str):
            raise self.error(node, f"R.Tensor: dtype must be a string such as \"float32\", got {dtype!r}")
        if "ndim" in given and self.literal(given["ndim"]) != len(shape):
            raise self.error(node, f"R.Tensor: ndim disagrees with shape {tuple(shape)}")
        try:
            return TensorType(tuple(shape), check_dtype(dtype, "R.Tensor"))
        except (IRError, TypeError) as e:
            raise self.error(node, str(e)) from None


def _is_number_tree(value) -> bool:
    """A number, a bool, or a (nested) list of them: what R.const holds (np.asarray would also take None
    as nan and "1.5" as 1.5)."""
    if isinstance(value, list | tuple):
        return all(_is_number_tree(v) for v in value)
    return isinstance(value, bool | int | float)


def _is_docstring(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)
