"""The user's entry points: grad, value_and_grad and gradcheck.

The first call with a given input signature traces `fn`, runs the Gradient pass and the clean-up
passes, and compiles the adjoint; later calls with the same shapes and dtypes replay it, feeding the
current values of every tensor `fn` captured (so in-place optimizer updates are seen).
"""
from __future__ import annotations

import functools
import operator
from dataclasses import dataclass

import numpy as np

import ir
from ir import Executor, IRModule, substitute
from tracer import Tensor
from tracer.rng import draw_seed
from tracer.tensor import active_trace, apply, to_expr
from tracer.trace import Spec, arg_type, trace_function

from .gradient import Gradient


def _flatten_wrt(wrt):
    if isinstance(wrt, Tensor):
        return [wrt], lambda gs: gs[0]
    if isinstance(wrt, dict):
        keys = list(wrt)
        return [wrt[k] for k in keys], lambda gs: dict(zip(keys, gs, strict=True))
    if isinstance(wrt, (list, tuple)):
        leaves = list(wrt)
        kind = type(wrt) if isinstance(wrt, tuple) else list
        return leaves, lambda gs: kind(gs)
    # generators (model.parameters()) are materialized once
    try:
        leaves = list(wrt)
    except TypeError:
        got = type(wrt).__name__
        raise TypeError(f"wrt must be a Tensor, or a list, tuple or dict of Tensors, got {got}") from None
    return leaves, list


@dataclass
class _Compiled:
    mod: IRModule
    executor: Executor
    captured: list[Tensor]
    out_tree: object
    grad_slots: list[tuple[int, ...]]  # for each wrt leaf: its indices among require_grads (none: unused)
    guards_hold: object  # () -> bool: the Python values the trace read (model.training) are unchanged


class _GradFunction:
    def __init__(self, fn, wrt, has_aux: bool, return_value: bool):
        self.fn, self.has_aux, self.return_value = fn, has_aux, return_value
        self.leaves, self.rebuild = _flatten_wrt(wrt)
        for i, t in enumerate(self.leaves):
            if not isinstance(t, Tensor):
                raise TypeError(f"wrt[{i}] must be a Tensor, got {type(t).__name__}")
            if t.dtype not in ir.FLOAT_DTYPES:
                raise TypeError(f"wrt[{i}] has dtype {t.dtype}; only floating-point tensors have gradients")
        self.cache: dict[tuple, list[_Compiled]] = {}
        self.leaf_index = {id(t): i for i, t in enumerate(self.leaves)}
        self.last: _Compiled | None = None

    @property
    def module(self) -> IRModule:
        """The module (main and the cleaned-up main_adjoint) that the last call ran."""
        if self.last is None:
            raise RuntimeError("no call yet: the module is traced on the first call")
        return self.last.mod

    @property
    def stats(self) -> ir.Stats:
        """The executor's stats of the last call: peak bytes held at once, op counts."""
        if self.last is None:
            raise RuntimeError("no call yet: the module is traced on the first call")
        return self.last.executor.stats

    def __call__(self, *args):
        ctx = active_trace()
        if ctx is not None:  # grad of grad, or grad inside any traced function: inline the adjoint
            return self._call_in_trace(ctx, args)
        # Which argument is which wrt leaf is part of the signature; any other tensor only by type.
        key = tuple(_signature(a, self.leaf_index) for a in args)
        entries = self.cache.setdefault(key, [])
        compiled = next((c for c in entries if c.guards_hold()), None)
        if compiled is None:
            compiled = self._compile(args)
            entries.append(compiled)
        self.last = compiled
        return self._run(compiled, args)

    def _compile(self, args) -> _Compiled:
        traced = trace_function(self.fn, args)
        mod, slots = self._differentiate(traced, args)
        # CuPy arrays in (arguments or captured weights) run the compiled step on the GPU
        arrays = [_array(a) for a in args] + [t._data for t in traced.captured]
        device = "cuda" if any(_on_gpu(a) for a in arrays) else "cpu"
        executor = Executor(mod, device=device)
        return _Compiled(mod, executor, traced.captured, traced.out_tree, slots, traced.guards_hold)

    def _differentiate(self, traced, args) -> tuple[IRModule, list[tuple[int, ...]]]:
        """Gradient and clean-up of a trace; for each wrt leaf, its indices among the gradients."""
        fn_ir = traced.mod["main"]
        arg_params = [p for p in fn_ir.params[: len(fn_ir.params) - len(traced.captured)]]
        # A leaf may reach fn by several routes (passed twice, or passed and captured): one parameter
        # each, and the leaf's gradient is the sum of theirs.
        by_identity: dict[int, list[ir.Var]] = {}
        tensor_args = [a for a in args if arg_type(a) is not None]
        for a, p in zip(tensor_args, arg_params, strict=True):
            by_identity.setdefault(id(a), []).append(p)
        for t, p in zip(traced.captured, fn_ir.params[len(arg_params):], strict=True):
            by_identity.setdefault(id(t), []).append(p)
        require, slots = [], []
        for t in self.leaves:
            params = by_identity.get(id(t), [])
            require.extend(p for p in params if p not in require)
            slots.append(tuple(require.index(p) for p in params))
        self._check_output(traced)
        if self.has_aux:
            tree = traced.out_tree
            if tree == "tensor" or len(tree[1]) != 2:
                raise TypeError("has_aux=True: fn must return a pair (value, aux)")
        mod = Gradient("main", require_grads=require, target_index=0)(traced.mod)
        mod = ir.transform.cleanup()(mod)
        ir.verify(mod)
        return mod, slots

    def _call_in_trace(self, ctx, args):
        """Inside a trace, the adjoint's bindings are recorded into it, so the result is itself
        differentiable: grad(lambda x: grad(f, wrt=x)(x).sum(), wrt=...) is a second derivative."""
        traced = trace_function(self.fn, args)  # nested: outer values fn reads become its parameters
        mod, slots = self._differentiate(traced, args)
        ctx.guards.extend(traced.guards)
        adjoint = mod["main_adjoint"]
        inputs = [a if isinstance(a, Tensor) else Tensor(a) for a in args if arg_type(a) is not None]
        mapping = {p: to_expr(t, ctx) for p, t in zip(adjoint.params, inputs + traced.captured, strict=True)}
        for bd in adjoint.bindings:
            mapping[bd.var] = ctx.builder.emit(substitute(bd.value, mapping), name=bd.var.name)
        value, grads = substitute(adjoint.body, mapping).fields

        def tensor(e):
            if isinstance(e, ir.Tuple):
                return tuple(tensor(f) for f in e.fields)
            return Tensor(_var=e, _trace=ctx) if isinstance(e, ir.Var) else Tensor(e.data)
        def zeros(t):
            return apply("zeros", [], shape=t.shape, dtype=t.dtype)
        return self._assemble(tensor(value), tensor(grads), slots, zeros, traced.out_tree, _traced_leaf)

    def _check_output(self, traced) -> None:
        body = traced.mod["main"].body
        value = body.fields[0] if self.has_aux and isinstance(body, ir.Tuple) else body
        t = value.type
        if not (isinstance(t, ir.TensorType) and t.shape == () and t.is_float):
            which = " as its first value" if self.has_aux else ""
            raise TypeError(f"grad: fn must return a floating-point scalar{which}, got {t}; "
                            "reduce it first (e.g. .sum() or .mean())")

    def _run(self, c: _Compiled, args):
        feed = [_array(a) for a in args if arg_type(a) is not None]
        for t in c.captured:
            if t._fresh_seed:  # a dropout without a seed: a fresh mask every step
                t._data = draw_seed()
            feed.append(t._data)
        value, grads = _unshared(c.executor["main_adjoint"](*feed), {id(_owner(a)) for a in feed})
        def zeros(t):
            return Tensor.wrap(c.executor.xp.zeros(t.shape, t.dtype))
        return self._assemble(value, grads, c.grad_slots, zeros, c.out_tree, Tensor.wrap)

    def _assemble(self, value, grads, slots, zeros, out_tree, leaf):
        """The user's result: gradients in wrt's structure (`zeros(t)` for leaves fn never read), and
        the value (with aux in fn's output structure); `leaf` turns each result into a Tensor."""
        gradients = self.rebuild([leaf(functools.reduce(operator.add, [grads[i] for i in s])) if s else zeros(t)
                                  for t, s in zip(self.leaves, slots, strict=True)])
        if self.has_aux:
            aux = _wrap(value[1], out_tree[1][1], leaf)
            if not self.return_value:
                return gradients, aux
            return (leaf(value[0]), aux), gradients
        return (leaf(value), gradients) if self.return_value else gradients


def _traced_leaf(t):
    return t  # results made inside a trace are Tensors already


def _wrap(value, tree, leaf):
    if tree == "tensor":
        return leaf(value)
    kind, subtrees = tree
    return kind(_wrap(v, t, leaf) for v, t in zip(value, subtrees, strict=True))


def _signature(a, leaf_index: dict[int, int]):
    t = arg_type(a)
    if t is not None:
        return ("tensor", t.shape, t.dtype, leaf_index.get(id(a)), _on_gpu(_array(a)))
    if isinstance(a, Spec):
        return ("spec", a.shape, a.dtype)
    try:
        hash(a)
    except TypeError:
        raise TypeError(f"grad: argument {a!r} is neither a tensor nor a hashable Python value") from None
    return ("py", type(a).__name__, a)


def _unshared(value, fed: set[int]):
    """value with every array that is (a view of) one fed in copied. A gradient may simplify to a weight
    itself (d(w1 * w2)/dw1 = w2); handing back w2's own buffer would let an optimizer, updating the weights
    in place one by one, change a gradient before using it."""
    if isinstance(value, tuple):
        return tuple(_unshared(v, fed) for v in value)
    return value.copy() if id(_owner(value)) in fed else value


def _owner(array):
    return array.base if array.base is not None else array  # NumPy and CuPy point a view at the owner


def _array(a):
    return a._data if isinstance(a, Tensor) else a


def _on_gpu(a) -> bool:
    return type(a).__module__.startswith("cupy")


def grad(fn, wrt, has_aux: bool = False):
    """The gradient of scalar `fn` with respect to `wrt` (a Tensor, or a list, tuple or dict of them).

    >>> import numpy as np, tracer, autodiff
    >>> w = tracer.tensor(np.ones((3, 2), "float32"))
    >>> g = autodiff.grad(lambda x: (x @ w).sum(), wrt=[w])(np.ones((4, 3), "float32"))
    >>> g[0].shape, float(g[0].numpy()[0, 0])
    ((3, 2), 4.0)
    """
    return _GradFunction(fn, wrt, has_aux, return_value=False)


def value_and_grad(fn, wrt, has_aux: bool = False):
    """Like `grad`, returning `(value, gradients)`, or `((value, aux), gradients)` with has_aux."""
    return _GradFunction(fn, wrt, has_aux, return_value=True)


def gradcheck(fn, *args, eps: float = 1e-6, rtol: float = 1e-5, atol: float = 1e-7) -> bool:
    """Check fn's gradients from the Gradient pass against float64 central differences.

    Floating arguments are promoted to float64; a non-scalar result is reduced with fixed random
    weights (checking one vector-Jacobian product). Returns True, or raises AssertionError naming the
    argument, the worst element and both values.

    >>> import tracer, autodiff
    >>> autodiff.gradcheck(lambda x: (x * x).sum(), tracer.tensor([1.0, 2.0]))
    True
    """
    tensors = [Tensor(np.asarray(_array(a), dtype="float64")) if _is_float_arg(a) else a for a in args]
    wrt = [t for t, a in zip(tensors, args, strict=True) if _is_float_arg(a)]
    if not wrt:
        raise TypeError("gradcheck: no floating-point argument to check")
    weights: dict[tuple, np.ndarray] = {}

    def scalar_fn(*xs):
        out = fn(*xs)
        if out.shape == ():
            return out
        w = weights.setdefault(out.shape, np.random.default_rng(0).uniform(0.5, 1.5, out.shape))
        return (out * Tensor(w.astype(out.dtype))).sum()

    analytic = grad(scalar_fn, wrt=wrt)(*tensors)
    traced = trace_function(scalar_fn, tensors)
    forward = Executor(traced.mod)["main"]

    def value(xs):
        feed = [_array(x) for x in xs if arg_type(x) is not None]
        return float(forward(*feed, *[t._data for t in traced.captured]))

    for k, (t, g) in enumerate(zip(wrt, analytic, strict=True)):
        base = t._data
        numeric = np.zeros_like(base)
        for idx in np.ndindex(base.shape):
            orig = base[idx]
            base[idx] = orig + eps
            hi = value(tensors)
            base[idx] = orig - eps
            lo = value(tensors)
            base[idx] = orig
            numeric[idx] = (hi - lo) / (2 * eps)
        got = np.asarray(g)
        err = np.abs(got - numeric) - (atol + rtol * np.abs(numeric))
        if err.size and err.max() > 0:
            worst = tuple(int(i) for i in np.unravel_index(int(np.argmax(err)), err.shape))
            raise AssertionError(
                f"gradcheck: gradient of float argument {k} (shape {base.shape}) disagrees at index {worst}: "
                f"Gradient pass {float(got[worst])!r}, finite differences {float(numeric[worst])!r} "
                f"(max abs error {np.abs(got - numeric).max():.3g})")
    return True


def _is_float_arg(a) -> bool:
    t = arg_type(a)
    return t is not None and t.is_float
