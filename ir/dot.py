"""A function as a Graphviz picture: `to_dot` writes the DOT text, `render` runs the `dot` program.

Forward, gradient and recomputed bindings have their own colours (recomputed ones also say so),
checkpoint regions are clusters, and every edge carries the shape of the value it moves.
"""
from __future__ import annotations

import os
import shutil
import subprocess

from .analysis import checkpoint_regions
from .nodes import Call, Constant, IRModule, Tuple, TupleGetItem, free_vars, role_of
from .printer import assign_names
from .types import TensorType

COLOURS = {"forward": "#cfe2ff", "gradient": "#ffd6cc", "recompute": "#ffe39a", "argument": "#e8e8e8"}


def to_dot(mod: IRModule, fn_name: str | None = None) -> str:
    """Graphviz DOT text of `mod[fn_name]`; by default the module's only function, or else its
    first `*_adjoint` (the whole training step), or else its first function.

    >>> import tracer, ir
    >>> text = ir.to_dot(tracer.trace(lambda x: tracer.exp(x).sum(), tracer.spec((3,))))
    >>> text.splitlines()[0]
    'digraph main {'
    >>> '"x" -> "lv" [label="(3,)"]' in text
    True
    """
    name = _default_function(mod) if fn_name is None else fn_name
    fn = mod[name]
    names = assign_names(fn)
    lines = [f"digraph {_quote(name) if not name.isidentifier() else name} {{",
             '  rankdir=TB; node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize=10];',
             '  edge [fontname="Helvetica", fontsize=8, color="#555555"];']
    for p in fn.params:
        lines.append(f'  {_quote(names[p])} [label={_quote(names[p] + chr(10) + _type(p.type))}, shape=ellipse, '
                     f'fillcolor="{COLOURS["argument"]}"];')
    bindings = fn.bindings
    in_region: dict[int, int] = {}
    for k, (lo, hi) in enumerate(checkpoint_regions(fn)):
        for point in range(lo, hi + 1):
            in_region[point - 1] = k
    clusters: dict[int, list[str]] = {}
    for i, b in enumerate(bindings):
        node = _node(names[b.var], b)
        if i in in_region:
            clusters.setdefault(in_region[i], []).append(node)
        else:
            lines.append("  " + node)
    for k, nodes in clusters.items():
        lines.append(f"  subgraph cluster_checkpoint{k} {{")
        lines.append(f'    label="checkpoint region {k + 1}"; style=dashed; color="#2ca02c"; fontname="Helvetica";')
        lines.extend("    " + n for n in nodes)
        lines.append("  }")
    for b in bindings:
        lines.extend(_edges(b.value, _quote(names[b.var]), names))
    lines.append('  "return" [shape=doublecircle, label="return", fillcolor="#ffffff"];')
    lines.extend(_edges(fn.body, '"return"', names))
    lines.append("}")
    return "\n".join(lines) + "\n"


def render(mod: IRModule, path, fn_name: str | None = None) -> None:
    """Draw `to_dot(mod, fn_name)` into `path` with Graphviz's `dot`; the format is the file's
    extension (svg, png, pdf, ...; svg when there is none)."""
    dot = shutil.which("dot")
    if dot is None:
        raise RuntimeError("ir.render needs Graphviz's `dot` program, which is not on PATH: install the "
                           "Debian/Ubuntu package `graphviz` (apt-get install graphviz) or the conda package "
                           "`graphviz` (conda install -c conda-forge graphviz); ir.to_dot gives the text alone")
    fmt = os.path.splitext(str(path))[1].lstrip(".").lower() or "svg"
    done = subprocess.run([dot, f"-T{fmt}", "-o", str(path)], input=to_dot(mod, fn_name), text=True,
                          capture_output=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"ir.render: dot -T{fmt} failed ({done.returncode}): {done.stderr.strip()}")


def _default_function(mod: IRModule) -> str:
    names = list(mod)
    if not names:
        raise ValueError("to_dot: the module has no function")
    adjoints = [n for n in names if n.endswith("_adjoint")]
    return names[0] if len(names) == 1 else (adjoints or names)[0]


def _node(name: str, b) -> str:
    role = role_of(b.var)
    v = b.value
    what = f"R.{v.op}" if isinstance(v, Call) else type(v).__name__
    label = f"{name} = {what}"
    if role == "recompute":
        label += "\n(recomputed)"
    if b.var.loc is not None and b.var.loc.file:
        label += f"\n{b.var.loc.where}"
    style = ', style="rounded,filled,bold", color="#d08000"' if role == "recompute" else ""
    return f'{_quote(name)} [label={_quote(label)}, fillcolor="{COLOURS[role]}"{style}];'


def _edges(value, target: str, names) -> list[str]:
    out = []
    for u in dict.fromkeys(free_vars(value)):
        out.append(f'  {_quote(names.get(u, u.name))} -> {target} [label={_quote(_type(u.type, short=True))}];')
    if _has_constant(value):
        out.append(f"  // {target} also reads constants")
    return out


def _has_constant(e) -> bool:
    if isinstance(e, Constant):
        return True
    if isinstance(e, Call):
        return any(_has_constant(a) for a in e.args)
    if isinstance(e, Tuple):
        return any(_has_constant(f) for f in e.fields)
    if isinstance(e, TupleGetItem):
        return _has_constant(e.tuple_value)
    return False


def _type(t, short: bool = False) -> str:
    if isinstance(t, TensorType):
        return str(t.shape) if short else f"{t.shape} {t.dtype}"
    return "tuple"


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


__all__ = ["render", "to_dot"]
