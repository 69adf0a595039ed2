"""Module backward hooks with `loss.backward()`, as torch's `register_full_backward_hook` and
`register_full_backward_pre_hook`.

loss.backward() runs one compiled adjoint per recorded tape, with no per-op callbacks, so a module with backward
hooks cuts the tape at its boundary instead (torch wraps the same place in a BackwardHookFunction): each tensor
argument that requires grad enters the forward as a fresh leaf sharing its buffer, and each output leaves it as
a fresh leaf. The caller's backward then ends at the output leaves; after it, `resume` takes each cut module,
latest first (a module's segment only sends gradient to what was recorded before it), and runs: backward pre-hooks
on grad_output (each may replace it), the segment's backward (the module's parameters accumulate .grad as
usual), the hooks on (grad_input, grad_output) (each may replace grad_input), and the backward of the caller's
tensors from grad_input, which may reach earlier cut modules. The outputs a hooked module returns are leaves
(is_leaf True, no grad_fn), unlike torch's. Inside a compiled step (autodiff.grad / value_and_grad) the hooks
cannot run: calling such a module there raises, naming them.
"""
from __future__ import annotations

import itertools
import sys

from tracer import Tensor
from tracer import autograd as ag
from tracer.tensor import active_trace

_order = itertools.count()
_pending: list[_Boundary] = []
_busy = False
_HELD = 3  # sys.getrefcount of an output leaf that only a boundary holds (its list, the loop's name, the call)


def _hook_names(hooks) -> str:
    return ", ".join(getattr(fn, "__qualname__", repr(fn)) for _, fn, _, _ in hooks.backward_pre + hooks.backward)


def _cut(t):
    """A leaf with t's values that requires grad (None when t takes no part in autograd)."""
    if not isinstance(t, Tensor) or t._ag is None or not ag.grad_mode.enabled:
        return None
    leaf = Tensor.wrap(t._data)
    leaf.requires_grad_(True)
    return leaf


class _Boundary:
    """One call of a module with backward hooks: the caller's tensor arguments, the leaves the forward read
    instead, the forward's outputs and the leaves returned instead (weakly: a dropped output ends it)."""

    def __init__(self, start, module, hooks, args, in_leaves, outputs, out_leaves):
        self.start, self.order = start, next(_order)  # the modules called inside it are numbered in between
        self.module, self.hooks = module, hooks
        self.args, self.in_leaves = args, in_leaves
        self.outputs = outputs
        self.out_leaves = out_leaves

    def alive(self) -> bool:
        """Whether gradient can still reach an output leaf: it holds one, or something besides this boundary
        refers to one (a tape reading it, the caller). A tape lets its leaves go once its backward ran, so the
        leaves are held here, not weakly."""
        return any(o is not None and (o._grad is not None or sys.getrefcount(o) > _HELD) for o in self.out_leaves)

    def ready(self) -> bool:
        return any(o is not None and o._grad is not None for o in self.out_leaves)

    def run(self, retain_graph, create_graph) -> None:
        outs = self.out_leaves
        grad_output = tuple(None if o is None else o._grad for o in outs)
        for o in outs:
            if o is not None:
                o._grad = None
        for _, hook, _, _ in self.hooks.backward_pre:
            result = hook(self.module, grad_output)
            if result is not None:
                grad_output = _checked(result, len(grad_output), "grad_output", "pre-hook")
        targets = [(o, g) for o, g in zip(self.outputs, grad_output, strict=True)
                   if g is not None and o is not None and o._ag is not None]
        if targets:
            ag._impl().backward([o for o, _ in targets], [g for _, g in targets], retain_graph, create_graph, None)
        _drain(self.start, self.order, retain_graph, create_graph)  # hooked modules inside this one, first
        grad_input = tuple(None if leaf is None else leaf._grad for leaf in self.in_leaves)
        for leaf in self.in_leaves:
            if leaf is not None:
                leaf._grad = None
        for _, hook, _, _ in self.hooks.backward:
            result = hook(self.module, grad_input, grad_output)
            if result is not None:
                grad_input = _checked(result, len(grad_input), "grad_input", "hook")
        for a, g in zip(self.args, grad_input, strict=True):
            if g is not None and isinstance(a, Tensor) and a._ag is not None:
                ag._impl().backward([a], [g], retain_graph, create_graph, None)


def _either(leaf, t):
    return t if leaf is None else leaf


def _checked(result, n: int, what: str, kind: str) -> tuple:
    result = tuple(result) if isinstance(result, (tuple, list)) else (result,)
    if len(result) != n:
        raise RuntimeError(f"Backward {kind} returned an invalid number of {what}, got {len(result)}, but expected {n}")
    return result


def call_cut(module, hooks, forward, args: tuple):
    """forward(args) with the tape cut around it for the module's backward hooks (see the module docstring)."""
    if active_trace() is not None:
        raise NotImplementedError(
            f"{type(module).__name__} has backward hooks ({_hook_names(hooks)}) that a compiled step "
            "(autodiff.grad / value_and_grad) cannot call: its adjoint is one compiled program; remove them "
            "(handle.remove()) for the compiled step, or train with loss.backward()")
    start = next(_order)
    in_leaves = [_cut(a) for a in args]  # one per argument, None where it is no tensor, as torch's grad_input
    inner_args = tuple(_either(leaf, a) for leaf, a in zip(in_leaves, args, strict=True))
    output = forward(inner_args)
    single = isinstance(output, Tensor)
    outs = [output] if single else list(output) if isinstance(output, tuple) else None
    if outs is None:
        return output
    out_leaves = [_cut(o) for o in outs]
    if not any(leaf is not None for leaf in out_leaves):
        return output
    _pending[:] = [b for b in _pending if b.alive()]
    _pending.append(_Boundary(start, module, hooks, args, in_leaves, outs, out_leaves))
    returned = [_either(leaf, o) for leaf, o in zip(out_leaves, outs, strict=True)]
    return returned[0] if single else type(output)(returned) if type(output) is tuple else tuple(returned)


def resume(retain_graph, create_graph) -> None:
    """After a backward(): run every cut module whose outputs received gradient, latest first."""
    global _busy
    if _busy or not _pending:
        return
    _busy = True
    try:
        _drain(-1, float("inf"), retain_graph, create_graph)
    finally:
        _busy = False
        _pending[:] = [b for b in _pending if b.alive()]


def _drain(lo, hi, retain_graph, create_graph) -> None:
    """Run the ready cut modules numbered between lo and hi, latest first, until none is ready."""
    while True:
        ready = [b for b in _pending if lo < b.order < hi and b.ready()]
        if not ready:
            return
        b = max(ready, key=lambda b: b.order)
        if not retain_graph:
            _pending.remove(b)
        b.run(retain_graph, create_graph)


ag.add_after_backward(resume)

__all__ = ["call_cut", "resume"]
