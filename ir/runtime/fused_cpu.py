"""The `fused` op's kernels (the op itself, its grammar and inference: `ir.ops.fused`).

On NumPy a chain runs as a program made once per input signature (`_program`): NumPy's own ufuncs,
heaviest argument first, each writing through `out=` into a temporary the chain owns and no longer
needs, so n ops allocate as many arrays as the chain holds at once (two for tanh-GELU's VJP) and the
values equal the unfused path bit for bit. On CuPy one generated ElementwiseKernel launch
(`ir.runtime.fused_cuda`). Importing this module installs `_fused_kernel` as the op's kernel.
"""
from __future__ import annotations

import functools
import math
from typing import NamedTuple

import numpy as np

from ..ops.elementwise import _where
from ..ops.fused import Const, Leaf, Node, _evaluate, _types, parse_expr
from ..ops.registry import get_op, provide_kernel
from ..types import TensorType
from . import numba_hook

# sub-ops whose kernel is exactly this NumPy ufunc when the result is floating (or, for comparisons, bool)
_UFUNC_OPS = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply, "divide": np.true_divide,
              "power": np.power, "maximum": np.maximum, "minimum": np.minimum, "negative": np.negative,
              "abs": np.absolute, "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "sin": np.sin, "cos": np.cos,
              "tanh": np.tanh}
_COMPARE_OPS = {"less": np.less, "less_equal": np.less_equal, "greater": np.greater,
                "greater_equal": np.greater_equal, "equal": np.equal, "not_equal": np.not_equal}


_WHERE_LARGE = functools.partial(_where, np)


def _need(node) -> int:
    """Temporaries a subtree holds at once when its heaviest argument goes first (Sethi-Ullman)."""
    if not isinstance(node, Node):
        return 0
    needs = sorted((_need(a) for a in node.args), reverse=True)
    return max([1] + [n + i for i, n in enumerate(needs)])


class _Program(NamedTuple):
    steps: tuple | None  # None: a 0-d chain, evaluated op by op
    fresh: bool  # the last step is a ufunc: its result is a buffer of the chain's own, never an input's
    n_registers: int
    constants: tuple
    result: int
    shape: tuple
    dtype: str
    run: object = None  # the steps as one generated Python function of the input tuple


@functools.lru_cache(maxsize=4096)
def _program(expr: str, inputs: tuple, donated: int = -1) -> _Program:
    """How to run the chain on inputs of these (shape, NumPy dtype), made once per signature; input
    `donated` (read once in expr) dies here, so its buffer is one of the chain's own temporaries.

    Registers 0..n-1 hold the inputs, then the scalar constants, then temporaries the chain owns.
    A step is (callable, argument registers, out register or -1, attrs, destination register): a
    ufunc writes into a temporary that dies there (an argument's or a freed one of the same shape and
    dtype) through `out=`, everything else calls the sub-op's kernel into a new temporary. Arguments
    are evaluated heaviest first, so the chain holds as few temporaries as a tree allows; the order of
    evaluation changes no value (each sub-op is the same ufunc or kernel as unfused)."""
    types = [TensorType(shape, np.dtype(dtype).name) for shape, dtype in inputs]
    shape = np.broadcast_shapes(*(t.shape for t in types))
    dtype = _types(parse_expr(expr), types).dtype
    if not shape:
        return _Program(None, False, 0, (), 0, shape, dtype)
    consts: list = []
    steps: list = []
    meta: dict[int, TensorType] = {}  # temporary register -> its type
    free: list[int] = []
    n = [len(types)]

    def const_reg(c):
        consts.append(c.array())
        return -len(consts)  # renumbered once the constants are counted

    def visit(node):
        if isinstance(node, Leaf):
            if node.index == donated:
                meta[donated] = types[donated]
            return node.index, types[node.index], node.index == donated
        if isinstance(node, Const):
            return const_reg(node), TensorType((), node.dtype), False
        order = sorted(range(len(node.args)), key=lambda k: -_need(node.args[k]))
        done = {k: visit(node.args[k]) for k in order}
        args = [done[k] for k in range(len(node.args))]
        op = get_op(node.op)
        t = op.infer(op, [a[1] for a in args], **node.attrs)
        ufunc = _UFUNC_OPS.get(node.op) if t.dtype in ("float32", "float64", "float16") else None
        if ufunc is not None and any(a[1].dtype != t.dtype for a in args):
            ufunc = None
        if ufunc is None and t.dtype == "bool":
            ufunc = _COMPARE_OPS.get(node.op)
        owned = [a[0] for a in args if a[2]]
        out = -1
        if ufunc is not None and t.shape:  # a 0-d result may be a NumPy scalar: never an `out=`
            out = next((r for r in owned if meta[r] == t), -1)
            if out < 0:
                out = next((r for r in free if meta[r] == t), -1)
                if out >= 0:
                    free.remove(out)
        if out >= 0:
            dest = out
            steps.append((ufunc, [a[0] for a in args], out, None, dest))
        else:
            dest = next((r for r in free if meta[r] == t), None)  # the kernel allocates; the register is reused
            if dest is None:
                dest = n[0]
                n[0] += 1
            else:
                free.remove(dest)
            if node.op == "where":  # the kernel's own choice, made once: its dtype.name costs 10 us a call
                ufunc = np.where if max(math.prod(a[1].shape) for a in args) < 4096 else _WHERE_LARGE
            if ufunc is not None:  # a new array from the ufunc itself: what the kernel computes, one call less
                steps.append((ufunc, [a[0] for a in args], -2, None, dest))
            else:
                steps.append((op.kernel, [a[0] for a in args], -1, node.attrs, dest))
        meta[dest] = t
        free.extend(r for r in owned if r != dest)
        return dest, t, True

    result, _, _ = visit(parse_expr(expr))
    base = n[0]  # constants go after the temporaries: register base + k for constant k

    def fix(r):
        return base + (-r - 1) if r < 0 else r
    steps = tuple((fn, tuple(fix(r) for r in args), out, attrs, dest) for fn, args, out, attrs, dest in steps)
    run = _generate(steps, len(types), base, tuple(consts), result)
    return _Program(steps, steps[-1][2] != -1, base + len(consts), tuple(consts), result, shape, dtype, run)


def _generate(steps, n_inputs, base, consts, result):
    """The steps as one straight-line Python function of the input tuple (a loop over the steps costs
    about 1.7 us a step more: as much as a small ufunc call)."""
    def name(r):
        return f"x{r}" if r < n_inputs else f"c{r - base}" if r >= base else f"t{r}"
    ns = {"np": np, **{f"c{k}": c for k, c in enumerate(consts)}}
    lines = [f"def run(xs):\n    {''.join(f'x{i}, ' for i in range(n_inputs))}= xs"]
    for k, (fn, args, out, attrs, dest) in enumerate(steps):
        ns[f"f{k}"] = fn
        operands = ", ".join(name(a) for a in args)
        if out >= 0:
            lines.append(f"    {name(dest)} = f{k}({operands}, out={name(out)})")
        elif out == -2:
            lines.append(f"    {name(dest)} = f{k}({operands})")
        else:
            ns[f"a{k}"] = attrs
            lines.append(f"    {name(dest)} = f{k}(np, {operands}{f', **a{k}' if attrs else ''})")
    lines.append(f"    return {name(result)}")
    exec(compile("\n".join(lines) + "\n", "<tracegrad fused>", "exec"), ns)  # noqa: S102 - made from the IR above
    return ns["run"]


def _run_program(prog: _Program, xs):
    """The chain through NumPy on a program of in-place ufuncs (see `_program`): n ops allocate about
    as many arrays as the chain holds at once, and the values equal the unfused path bit for bit."""
    return prog.run(xs)


def leaf_count(expr: str, index: int) -> int:
    """How many times the chain reads input `index` (a buffer read once can be written once read)."""
    def count(node):
        if isinstance(node, Leaf):
            return int(node.index == index)
        return sum(count(a) for a in node.args) if isinstance(node, Node) else 0
    return count(parse_expr(expr))


def into(expr: str, k: int):
    """`run(xs)`: the chain on NumPy arrays, free to overwrite input k, which dies at the fused binding
    (ir.runtime.reuse.plan_fused_reuse decides which; expr reads it once). The result is a buffer of its own
    or input k's, never another input's; a chain whose input dies there allocates one array less.

    >>> import numpy as np
    >>> x, y = np.arange(3.0), np.ones(3)
    >>> r = into("exp(add(x0, x1))", 0)((x, y))
    >>> r is x, np.allclose(r, np.exp(np.arange(3.0) + 1))
    (True, True)
    """
    return functools.partial(_run_into, expr=expr, k=k)


def _run_into(xs, expr, k):
    if numba_hook.ENABLED:  # the chain's numba loop (ir.runtime.numba_hook), where it has one
        result = numba_hook.into(xs, expr, k)
        if result is not None:
            return result
    prog = _program(expr, tuple([(x.shape, x.dtype) for x in xs]), k)
    if prog.steps is None:
        result = np.asarray(_evaluate(np, parse_expr(expr), list(xs)))
    else:
        result = np.asarray(_run_program(prog, xs))
    if any(np.may_share_memory(result, x) for i, x in enumerate(xs) if i != k):
        return np.array(result)
    return result


def _fused_kernel(xp, xs, expr):
    node = parse_expr(expr)
    if xp is not np:  # CuPy: one generated ElementwiseKernel launch (ir/runtime/fused_cuda.py), else op by op
        from .fused_cuda import run

        out = run(xp, xs, expr)
        return out if out is not None else xp.asarray(_evaluate(xp, node, list(xs)))
    prog = _program(expr, tuple([(x.shape, x.dtype) for x in xs]))  # dtype.name costs 10 us: not per call
    if prog.steps is None:  # 0-d: kernels may give NumPy scalars
        out = np.asarray(_evaluate(xp, node, list(xs)))
    else:
        out = _run_program(prog, xs)
        if prog.fresh:
            return out
        out = np.asarray(out)
    # always a buffer of its own (as ir.runtime.reuse's FRESH ops), never (a view of) an input a kernel handed back
    return out.copy() if any(np.may_share_memory(out, x) for x in xs) else out

provide_kernel("fused", numba_hook.fused_kernel(_fused_kernel) if numba_hook.ENABLED else _fused_kernel)
