"""TVMScript text of a module, as Relax prints it; names are assigned here, deterministically."""
from __future__ import annotations

import keyword
import math

import numpy as np

from . import nodes
from .nodes import Block, Call, Constant, Expr, Function, IRModule, Tuple, TupleGetItem, Var, free_vars
from .ops.manipulate import relax_slice_end
from .ops.registry import get_op
from .types import Type, shape_str

INDENT = "    "


def print_module(mod: IRModule, show_source: bool = False) -> str:
    """The module's text; show_source=True ends each binding with `# file.py:LINE` (see `ir.Source`)."""
    lines = ["# from tvm.script import ir as I", "# from tvm.script import relax as R", "",
             "@I.ir_module", "class Module:"]
    for i, (name, fn) in enumerate(mod.items()):
        if i:
            lines.append("")
        lines.extend(INDENT + line for line in print_function(fn, name, show_source).splitlines())
    return "\n".join(lines) + "\n"


def print_type(t: Type) -> str:
    return str(t)


class _Namer:
    def __init__(self):
        self.names: dict[Var, str] = {}
        self.used: set[str] = set()
        self.counters: dict[str, int] = {}

    def bind(self, var: Var) -> str:
        ok = var.name.isidentifier() and not keyword.iskeyword(var.name) and var.name not in ("R", "I", "T")
        hint = var.name if ok else "v"
        name, n = hint, self.counters.get(hint, 0)
        if n or name in self.used:
            while True:
                n += 1
                name = f"{hint}{n}"
                if name not in self.used:
                    break
        self.counters[hint] = n
        self.used.add(name)
        self.names[var] = name
        return name

    def __getitem__(self, var: Var) -> str:
        try:
            return self.names[var]
        except KeyError:
            return f"<undefined {var.name}>"


def assign_names(fn: Function) -> dict[Var, str]:
    """The names the printer gives fn's params and bound vars."""
    namer = _Namer()
    for p in fn.params:
        namer.bind(p)
    for block in fn.blocks:
        for b in block.bindings:
            namer.bind(b.var)
    return namer.names


def print_function(fn: Function, name: str, show_source: bool = False) -> str:
    """`fn` as TVMScript text under `name`; show_source adds "# file.py:LINE" of the user code to each binding."""
    namer = _Namer()
    params = ", ".join(f"{namer.bind(p)}: {print_type(p.type)}" for p in fn.params)
    out = ["@R.function", f"def {name}({params}) -> {print_type(fn.ret_type)}:"]
    for block in fn.blocks:
        out.extend(INDENT + line for line in _print_block(block, namer, fn.body, show_source))
    out.append(f"{INDENT}return {print_expr(fn.body, namer)}")
    return "\n".join(out)


def _print_block(block: Block, namer: _Namer, body: Expr, show_source: bool = False) -> list[str]:
    lines = []
    for b in block.bindings:
        value = print_expr(b.value, namer)
        source = f"  # {b.var.loc}" if show_source and b.var.loc is not None and b.var.loc.file else ""
        lines.append(f"{namer.bind(b.var)}: {print_type(b.var.type)} = {value}{source}")
    if not block.is_dataflow:
        return lines
    mine = {b.var for b in block.bindings}
    outputs = list(dict.fromkeys(v for v in free_vars(body) if v in mine))
    lines.append(f"R.output({', '.join(namer[v] for v in outputs)})")
    return ["with R.dataflow():"] + [INDENT + line for line in lines]


def print_expr(e: Expr, namer) -> str:
    if isinstance(e, Var):
        return namer[e]
    if isinstance(e, Constant):
        return print_const(e)
    if isinstance(e, Tuple):
        inner = ", ".join(print_expr(f, namer) for f in e.fields)
        return f"({inner},)" if len(e.fields) == 1 else f"({inner})"
    if isinstance(e, TupleGetItem):
        return f"{print_expr(e.tuple_value, namer)}[{e.index}]"
    if isinstance(e, Call):
        op = get_op(e.op)
        parts = [print_expr(a, namer) for a in e.args]
        attrs = e.attrs
        if e.op == "strided_slice":  # an end past index 0 in the form Relax reads the same way
            shape = e.args[0].type.shape
            attrs = {**attrs, "end": tuple(relax_slice_end(shape[a], end, st) for a, end, st
                                           in zip(attrs["axes"], attrs["end"], attrs["strides"], strict=True))}
        if e.op == "nn.gelu":  # Relax has no attribute here: the tanh form is its own op
            return f"R.nn.gelu{'_tanh' if attrs['approximate'] == 'tanh' else ''}({', '.join(parts)})"
        if e.op in ("full", "full_like"):  # Relax's fill value is a scalar tensor
            dtype = attrs.get("dtype") or e.args[0].type.dtype
            # the attribute's own literal (R.const rounds it to dtype just as the kernel does), so it reads back exact
            value = attrs["fill_value"]
            if not dtype.startswith("float") and isinstance(value, float):
                dtype = "float64"  # a fraction for an integer result: the constant holds it, full_like casts it
            fill = print_attr("number", value)
            attrs = {**attrs, "fill_value": _Verbatim(f'R.const({fill}, "{dtype}")')}
        if e.op == "round" and attrs["decimals"] == 0:  # Relax's round has no attribute (decimals is tracegrad's)
            return f"R.round({parts[0]})"
        positional = True  # leading shape attributes are positional, as Relax writes R.reshape(x, R.shape([..]))
        for a in op.attrs:
            positional = positional and a.kind == "shape"
            text = print_attr(a.kind, attrs[a.name])
            parts.append(text if positional else f"{a.name}={text}")
        return f"R.{e.op}({', '.join(parts)})"
    raise TypeError(f"cannot print {e!r}")


class _Verbatim(str):
    """Attribute text printed as it is."""


def print_attr(kind: str, value) -> str:
    if isinstance(value, _Verbatim):
        return str(value)
    if value is None:
        return "None"
    if kind == "shape":
        return f"R.shape({list(value)})"
    if kind in ("ints", "axes") or kind == "sections" and not isinstance(value, int):
        return str(list(value))
    if kind in ("str", "dtype"):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'  # a Python string literal
    if kind == "float" or isinstance(value, float):
        return _float(value)
    return repr(value)


def _float(v: float) -> str:
    if math.isnan(v):
        return 'float("nan")'
    if math.isinf(v):
        return 'float("inf")' if v > 0 else '-float("inf")'
    return repr(float(v))


def print_const(c: Constant) -> str:
    data = c.data
    if data.ndim == 0:
        v = data.item()
        text = _float(v) if isinstance(v, float) else repr(v)
    else:
        text = _nested(data)
    # Nested lists read back only down to their first empty level ([] is (0,) whatever the shape was),
    # so a zero-size constant whose empty dimension is not the last says its shape.
    read_back = data.shape[:data.shape.index(0) + 1] if 0 in data.shape else data.shape
    shape = f", shape={shape_str(data.shape)}" if read_back != data.shape else ""
    return f'R.const({text}, "{data.dtype}"{shape})'


def _nested(a: np.ndarray) -> str:
    if a.ndim == 0:
        v = a.item()
        return _float(v) if isinstance(v, float) else repr(v)
    return "[" + ", ".join(_nested(x) for x in a) + "]"


__all__ = ["assign_names", "print_function", "print_module", "print_type"]


nodes._PRINTER[0] = print_module  # IRModule.__str__ / script() print through this module
