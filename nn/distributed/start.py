"""The tensors a data-parallel step starts from, which data_parallel makes equal on every process.

As PyTorch's DistributedDataParallel broadcasts its module's parameters and buffers from rank 0 when it
is built, `data_parallel(step)` broadcasts rank 0's values of:

- the tensors the step differentiates: `wrt` of `autodiff.grad` / `value_and_grad`;
- the parameters and buffers of every `nn.Module` that the step's function reaches: its closure cells,
  the globals its code names, defaults, `self` of a bound method, attributes of the objects there (the
  same search a compiled step runs to find the tensors it captured, in tracer.capture), so a model held
  in a global, a closure or a trainer object is found, with its BatchNorm statistics and frozen weights.

Tensors reached only through plain containers or objects (a data shard captured by the function, a
per-process table) are left alone: they may differ by design. A step that is neither (a plain function
returning arrays) has nothing found, and `broadcast_parameters` is the way.
"""
from __future__ import annotations

from collections import deque

from tracer import Tensor
from tracer.capture import _children, _is_atom, _where  # the compiled step's own search for what a function reads

from ..module import Module

_MAX_EXPANSIONS = 5000  # objects looked into from one step
_MAX_DEPTH = 8


def modules_reached(root) -> list[tuple[str, Module]]:
    """(a name for it, module) for every nn.Module that `root` (a function, method, partial or object)
    reaches, breadth first (so a model is named before its submodules); deterministic for the same code
    and objects, so every process lists the same ones in the same order."""
    found: list[tuple[str, Module]] = []
    seen = {id(root)}
    queue = deque([(root, "", 0)])
    expansions = 0
    while queue and expansions < _MAX_EXPANSIONS:
        obj, path, depth = queue.popleft()
        expansions += 1
        if isinstance(obj, Module):
            found.append((path or "fn", obj))
        if depth >= _MAX_DEPTH:
            continue
        for kind, key, child in _children(obj):
            if isinstance(child, Tensor) or _is_atom(child) or id(child) in seen:
                continue
            seen.add(id(child))
            queue.append((child, _where(path, obj, kind, key), depth + 1))
    return found


def start_tensors(root, wrt=()) -> list[tuple[str, Tensor]]:
    """(name, tensor), each tensor once: the wrt tensors first, then the parameters and buffers of every
    module that root reaches."""
    names: dict[int, str] = {}
    order: list[Tensor] = []
    for path, module in modules_reached(root):
        for n, t in [*module.named_parameters(), *module.named_buffers()]:
            if id(t) not in names:
                names[id(t)] = f"{path}.{n}"
                order.append(t)
    out, done = [], set()
    for i, t in enumerate(wrt):
        if isinstance(t, Tensor) and id(t) not in done:
            out.append((names.get(id(t), f"wrt[{i}]"), t))
            done.add(id(t))
    out += [(names[id(t)], t) for t in order if id(t) not in done]
    return out
