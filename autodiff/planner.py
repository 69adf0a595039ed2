"""The checkpoint planner: which forward values to recompute so that a training step fits a byte budget.

A plan is a set of checkpoint regions over the forward function's bindings, written into the IR as
`grad.start_checkpoint` / `grad.end_checkpoint` markers, so it prints and differentiates like regions a
person placed. Each candidate is differentiated, cleaned up and optimized as the real step is (so the
optimizer's own recomputation of activations is counted), and its peak
is worked out by `ir.runtime.memory.estimate_peak_bytes`, which replays the executor's freeing rules on the
types (milliseconds, no arrays). The chosen plan is then run once on the executor (on zeros of the
parameters' types; bytes depend only on shapes and dtypes): its exact `stats.peak_bytes` is what is
compared with the budget, and where the estimate was low the search runs again below it; a
candidate whose estimate is just above the budget (within 0.5%) is run for its exact peak too.

The search works on any graph, not only chains:

1. Units, two lists of binding ranges: the segments, cut where few bytes cross from one binding to the
   next (local minima of the crossing bytes; every op of a plain chain), and the model's repeated
   blocks, found as the longest run of bindings that repeats with a period (the same ops on the same
   types) and cut where the fewest bytes cross (a transformer's or a residual net's blocks, exactly
   where a person would put `tracer.checkpoint`; empty for a graph that does not repeat).
2. Chains of candidates: per list and group size g (1, 2, 3, 4, 6, 8, 12, 16), the groups of g units,
   for small g also from a later unit on; a candidate is the first k groups of a chain. Regions at the
   start are the ones to choose: their backward runs last, after the later activations are freed, so
   their recomputation lands where memory is lowest; larger groups keep fewer boundaries but recompute
   more at once. Per chain, bisection finds the smallest k that fits (the longest prefix but one is
   tried where the longest does not: a last region around the loss only adds recomputation). The
   prefixes are nested, so recomputation grows with k: a chain is left as soon as a prefix that does
   not fit recomputes as much as the best plan so far, and the best plan's extent is the first guess.
3. Take the fitting candidate with the least recomputation (FLOPs estimated from shapes per op, summed
   over the bindings the Gradient pass marks as recomputed), the lower peak breaking ties. Where the
   blocks are found, every block, segments of g blocks and `checkpoint_sequential`'s all-but-the-last
   are among the candidates, so the planner reaches the peaks of those hand-placed plans.

Why this and not Checkmate's integer program or a dynamic program on chains: it needs no solver, it
handles branching graphs (the regions are intervals of the topological order, which is all the markers
can express), and measuring each candidate on the real pipeline means no memory model can disagree
with the executor. Randomness is safe: dropout's mask is a function of its seed input, and a
recomputation reads the same seed.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

import ir
from ir import Block, Call, Function, IRModule, Var, free_vars, substitute
from ir.nodes import role_of
from ir.runtime.memory import estimate_peak_bytes, format_bytes, type_bytes, zeros_for
from tracer.trace import insert_checkpoint_markers

from .gradient import Gradient

MARKERS = ("grad.start_checkpoint", "grad.end_checkpoint")
_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


def parse_budget(budget) -> int:
    """Bytes from a number or a string with a unit: "64MiB", "1.5 GB", "1e6", "4096" (fractions of a
    byte are dropped). ValueError for a budget below one byte, NaN, infinity or an unknown unit.

    >>> parse_budget("64MiB"), parse_budget("1.5 kB"), parse_budget(1000), parse_budget("1e6")
    (67108864, 1500, 1000, 1000000)
    """
    if isinstance(budget, bool) or not isinstance(budget, (int, float, np.integer, np.floating, str)):
        raise TypeError(f"memory budget must be a number of bytes or a string like '64MiB', got {budget!r}")
    if isinstance(budget, str):
        m = re.fullmatch(r"\s*([+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)\s*([a-zA-Z]*)\s*", budget)
        if m is None or m.group(2).lower() not in _UNITS:
            raise ValueError(f"memory budget {budget!r} is not a size: write bytes or a number with a unit "
                             "(B, kB, MB, GB, KiB, MiB, GiB), like '64MiB'")
        size = float(m.group(1)) * _UNITS[m.group(2).lower()]
    else:
        size = budget
    if not np.isfinite(size):
        raise ValueError(f"memory budget must be a finite number of bytes, got {budget!r}")
    if size < 1:
        raise ValueError(f"memory budget must be at least 1 byte, got {budget!r}")
    return int(size)


@dataclass
class Plan:
    """A measured plan: the forward module with its regions as markers, the regions as (start, end)
    binding ranges of the unmarked function, the step's exact peak, the FLOPs its backward recomputes,
    and how many candidate plans the search differentiated to find it."""

    module: IRModule
    regions: list[tuple[int, int]]
    peak_bytes: int
    recompute_flops: int
    candidates: int = 0


def plan_checkpoints(mod: IRModule, budget, *, func_name: str = "main", require_grads=None,
                     target_index: int = 0, device: str = "cpu") -> IRModule:
    """`mod` with checkpoint regions chosen so that its training step (the Gradient pass on `func_name`,
    cleaned up) peaks at most at `budget` bytes (an int, or a string like "64MiB") with the least
    recomputation found. Regions already in `mod` are replaced by the plan. Raises ValueError when no
    plan reaches the budget, giving the lowest peak found.

    A module that already has `<func_name>_adjoint` (a step's `step.module`, or the output of
    `autodiff.Gradient`) is planned too: the adjoint tells which parameters get gradients (unless
    `require_grads` says), and the result carries a new adjoint, differentiated from the planned forward and
    cleaned up as `value_and_grad` compiles it, in place of the old one.

    >>> import tracer, autodiff
    >>> def f(x):
    ...     for _ in range(8):
    ...         x = x + tracer.tanh(x)
    ...     return (x * x).sum()
    >>> mod = tracer.trace(f, tracer.spec((1024,)))  # its step peaks at 41000 bytes
    >>> planned = autodiff.plan_checkpoints(mod, "30kB")
    >>> "R.grad.start_checkpoint" in str(planned)  # the plan, as checkpoint regions in the IR
    True
    >>> autodiff.plan_checkpoints(mod, 20000)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ValueError: plan_checkpoints: no plan fits the memory budget of 19.53 KiB (20000 bytes); the lowest peak...
    >>> step = autodiff.Gradient("main")(mod)  # a differentiated module: planned, its adjoint made again
    >>> sorted(autodiff.plan_checkpoints(step, "30kB"))
    ['main', 'main_adjoint']
    """
    adjoint = f"{func_name}_adjoint"
    if adjoint not in mod:
        return make_plan(mod, budget, func_name=func_name, require_grads=require_grads,
                         target_index=target_index, device=device).module
    forward = _without(mod, adjoint)
    if require_grads is None:
        require_grads = differentiated_params(mod, func_name, target_index)
    planned = make_plan(forward, budget, func_name=func_name, require_grads=require_grads,
                        target_index=target_index, device=device).module
    return _compile_step(planned, func_name, require_grads, target_index)


def _without(mod: IRModule, name: str) -> IRModule:
    return IRModule({k: f for k, f in mod.items() if k != name})


def _compile_step(mod: IRModule, func_name: str, require_grads, target_index: int) -> IRModule:
    """The Gradient pass, cleaned up and optimized, as autodiff.value_and_grad compiles a step."""
    step = Gradient(func_name, require_grads, target_index)(mod)
    return ir.transform.optimize()(ir.transform.cleanup()(step))


def differentiated_params(mod: IRModule, func_name: str = "main", target_index: int = 0) -> list[Var]:
    """The parameters of `func_name` whose gradients `<func_name>_adjoint` returns, in its order.

    The adjoint returns (value, (grad, ...)); each gradient has its parameter's type. The parameters are
    matched to the gradients' types from the last parameter backwards (a step's captured weights come after
    its inputs), and the match is confirmed by differentiating `func_name` again with them: the result must
    be the adjoint given, as the Gradient pass makes it or as a step compiles it. ValueError when no match
    is confirmed (pass require_grads then)."""
    fn, adjoint = mod[func_name], mod[f"{func_name}_adjoint"]
    ret = adjoint.body.type
    if not (isinstance(ret, ir.TupleType) and len(ret.fields) == 2 and isinstance(ret.fields[1], ir.TupleType)):
        raise ValueError(f"plan_checkpoints: {func_name}_adjoint does not return (value, (gradients...)) as the "
                         f"Gradient pass makes it, it returns {ret}; plan the module before differentiating it")
    wanted = list(ret.fields[1].fields)
    free = [p for p in fn.params if _is_float(p.type)]
    chosen: list[Var] = []
    for t in reversed(wanted):
        match = next((p for p in reversed(free) if p.type == t and p not in chosen), None)
        if match is None:
            chosen = None
            break
        chosen.append(match)
    if chosen is not None:
        chosen.reverse()
        forward = _without(mod, f"{func_name}_adjoint")
        raw = Gradient(func_name, chosen, target_index)(forward)
        if any(ir.structural_equal(step[f"{func_name}_adjoint"], adjoint)
               for step in (raw, ir.transform.optimize()(ir.transform.cleanup()(raw)))):
            return chosen
    names = ", ".join(p.name for p in fn.params)
    raise ValueError(f"plan_checkpoints: cannot tell which parameters of {func_name} ({names}) "
                     f"{func_name}_adjoint differentiates; pass require_grads=[...] (the Vars of "
                     f"mod[{func_name!r}].params) or plan the module before differentiating it")


def _is_float(t) -> bool:
    if isinstance(t, ir.TupleType):
        return bool(t.fields) and all(_is_float(f) for f in t.fields)
    return t.is_float


def make_plan(mod: IRModule, budget, *, func_name: str = "main", require_grads=None, target_index: int = 0,
              device: str = "cpu") -> Plan:
    """The planner itself (see the module docstring); `plan_checkpoints` returns its module."""
    limit = parse_budget(budget)
    if f"{func_name}_adjoint" in mod:
        raise ValueError(f"make_plan: the module already has {func_name}_adjoint; plan the traced module "
                         "(plan_checkpoints takes a differentiated one: it plans the forward and differentiates "
                         "it again)")
    search = _Search(mod, func_name, require_grads, target_index, device)
    unplanned = search.measure(())
    if search.verify(unplanned) <= limit:  # the exact peak: no estimate may add regions that are not needed
        unplanned.candidates = search.count
        return unplanned
    target = limit
    for _ in range(4):  # the estimate is checked by a real run; where it was low, search again below it
        plan = search.best_under(target)
        if plan is None:
            break
        estimate = plan.peak_bytes
        measured = search.verify(plan)  # from here on the plan carries its measured peak
        if measured <= limit:
            plan.candidates = search.count
            return plan
        target -= measured - estimate
    lowest = min(search.cache.values(), key=lambda p: p.peak_bytes)
    peak = search.verify(lowest)
    raise ValueError(
        f"plan_checkpoints: no plan fits the memory budget of {format_bytes(limit)} ({limit} bytes); the lowest "
        f"peak found is {format_bytes(peak)} ({peak} bytes, with {len(lowest.regions)} checkpoint region(s)), "
        f"against {format_bytes(search.verify(search.measure(())))} without checkpoints")


class _Search:
    """Candidate plans, each differentiated and its peak worked out by `ir.runtime.memory.estimate_peak_bytes`
    (cheap); `verify` runs one on the executor for the exact number."""

    def __init__(self, mod: IRModule, func_name: str, require_grads, target_index: int, device: str):
        self.mod, self.func_name, self.device = mod, func_name, device
        self.require_grads, self.target_index = require_grads, target_index
        self.fn = _strip_markers(mod[func_name])
        self.bindings = self.fn.bindings
        self.cache: dict[tuple, Plan] = {}
        self.steps: dict[tuple, IRModule] = {}
        self.measured: dict[tuple, int] = {}
        self.count = 0  # candidates differentiated
        self._chains: list | None = None

    def best_under(self, limit: int) -> Plan | None:
        """The plan with the least recomputation whose peak is at most limit (None: none found).

        Candidates are chains of prefixes: over a list of units (the segments, cut where few bytes
        cross, and the model's repeated blocks, see `blocks`), groups of g consecutive units from unit
        `offset` on, and the first k of them as regions. Regions at the start are the right ones to
        choose: their backward runs last, when the later activations are already freed, so their
        recomputation adds to the smallest total. Per chain the smallest fitting k is found by
        bisection; the prefixes are nested, so the recomputation grows with k and a chain is left as
        soon as a prefix that does not fit already recomputes as much as the best plan so far. The
        longest prefix but one is tried where the longest does not fit (every group but the last, as
        `checkpoint_sequential`: a last region around the loss only adds its recomputation).
        """
        none = self.measure(())
        if none.peak_bytes <= limit:
            return none
        best: Plan | None = None
        for groups in self.chains():
            n = len(groups)
            # the best plan's extent is a good first guess for this chain; else its longest prefixes
            guess = next((k for k in range(1, n + 1) if groups[k - 1][1] >= best.regions[-1][1]), n) if best else n
            hi = None
            for k in dict.fromkeys(k for k in (guess, n, n - 1) if k >= 1):
                if self.fits(groups[:k], limit):
                    hi = k
                    break
                if k == guess < n - 1 and best and self.flops(groups[:k]) >= best.recompute_flops:
                    break  # the prefixes that fit are longer and recompute more
            if hi is None:
                continue
            lo, probe = 1, hi - 1  # the smallest k that fits, trying the one just below first
            while lo < hi:
                mid = probe if lo <= probe < hi else (lo + hi) // 2
                probe = 0
                if self.fits(groups[:mid], limit):
                    hi = mid
                elif best and self.flops(groups[:mid]) >= best.recompute_flops:
                    break  # the prefixes are nested: the longer ones that fit recompute even more
                else:
                    lo = mid + 1
            if lo < hi:
                continue
            plan = self.measure(tuple(groups[:lo]))
            if best is None or (plan.recompute_flops, plan.peak_bytes) < (best.recompute_flops, best.peak_bytes):
                best = plan
        return best

    def chains(self) -> list[list[tuple[int, int]]]:
        """The candidate chains (see `best_under`): per list of units and group size g, the groups of g
        units from unit 0 on, and for g <= 3 also from units 1 .. g - 1 on (to line up with blocks)."""
        if self._chains is None:
            self._chains = []
            for units in (self.blocks(), self.segments()):
                for g in (g for g in _SIZES if g <= len(units)):
                    for offset in range(g if g <= 3 else 1):
                        groups = _groups(units, g, offset)
                        if groups and groups not in self._chains:
                            self._chains.append(groups)
        return self._chains

    def fits(self, regions: list[tuple[int, int]], limit: int) -> bool:
        """Whether the plan's peak is at most limit: its estimate, or where the estimate is just above
        (within 0.5%), its exact peak from a run."""
        plan = self.measure(tuple(regions))
        if plan.peak_bytes > limit and tuple(regions) not in self.measured and plan.peak_bytes <= limit * 1.005:
            self.verify(plan)
        return plan.peak_bytes <= limit

    def flops(self, regions: list[tuple[int, int]]) -> int:
        return self.measure(tuple(regions)).recompute_flops

    def measure(self, regions: tuple[tuple[int, int], ...]) -> Plan:
        hit = self.cache.get(regions)
        if hit is None:
            self.count += 1
            fn = self.fn
            bindings, body = insert_checkpoint_markers(list(fn.bindings), list(regions), fn.body)
            planned = self.mod.with_function(self.func_name, Function(fn.params, [Block(bindings)], body, fn.attrs))
            step = Gradient(self.func_name, self.require_grads, self.target_index)(planned)
            step = ir.transform.optimize()(ir.transform.cleanup()(step))  # as autodiff.value_and_grad compiles it
            adjoint = step[f"{self.func_name}_adjoint"]
            recompute = sum(op_flops(b.value) for b in adjoint.bindings if role_of(b.var) == "recompute")
            hit = self.cache[regions] = Plan(planned, list(regions), estimate_peak_bytes(adjoint), recompute)
            self.steps[regions] = step
        return hit

    def verify(self, plan: Plan) -> int:
        """The plan's exact peak: its step run once on the executor (zeros of the parameters' types)."""
        key = tuple(plan.regions)
        if key not in self.measured:
            step = self.steps[key]
            ex = ir.Executor(step, device=self.device)
            name = f"{self.func_name}_adjoint"
            with np.errstate(all="ignore"):  # zeros may divide by zero; only the bytes matter here
                ex[name](*[zeros_for(ex.xp, p.type) for p in step[name].params])
            self.measured[key] = plan.peak_bytes = ex.stats.peak_bytes
        return self.measured[key]

    def segments(self) -> list[tuple[int, int]]:
        """Binding ranges between the local minima of the bytes crossing each boundary (at most 48)."""
        n = len(self.bindings)
        crossing = self._crossing()
        cuts = [p for p in range(1, n)
                if crossing[p] <= crossing[p - 1] and (p + 1 >= n or crossing[p] <= crossing[p + 1])]
        bounds = [0] + cuts + [n]
        segments = [(a, b) for a, b in zip(bounds, bounds[1:], strict=False) if b > a]
        flops = [sum(op_flops(bd.value) for bd in self.bindings[a:b]) for a, b in segments]
        while len(segments) > _MAX_UNITS:  # merge the cheapest neighbours: each candidate costs a Gradient pass
            i = min(range(len(segments) - 1), key=lambda i: flops[i] + flops[i + 1])
            segments[i:i + 2] = [(segments[i][0], segments[i + 1][1])]
            flops[i:i + 2] = [flops[i] + flops[i + 1]]
        return segments

    def blocks(self) -> list[tuple[int, int]]:
        """The model's repeated blocks as binding ranges: the longest run of bindings that repeats with a
        period P (the same ops on the same types: a transformer's or a residual net's blocks), cut into
        periods where the fewest bytes cross. Empty when nothing repeats over a quarter of the function."""
        n = len(self.bindings)
        ids: dict = {}
        sig = np.array([ids.setdefault((type(b.value).__name__, getattr(b.value, "op", None),
                                        getattr(b.value, "index", None), str(b.var.type)), len(ids))
                        for b in self.bindings], dtype=np.int64)
        best = (0, 0, 0, 0)  # covered bindings, -P, start, end
        for period in range(1, n // 2 + 1):
            same = np.concatenate(([False], sig[:-period] == sig[period:], [False])).astype(np.int8)
            edges = np.flatnonzero(np.diff(same))
            if not len(edges):
                continue
            lengths = edges[1::2] - edges[::2]
            i = int(np.argmax(lengths))
            start, end = int(edges[2 * i]), int(edges[2 * i + 1]) + period
            covered = (end - start) // period * period
            if covered >= 2 * period and (covered, -period) > best[:2]:
                best = (covered, -period, start, end)
        covered, period, start, end = best[0], -best[1], best[2], best[3]
        if covered * 4 < n:
            return []
        crossing = self._crossing()
        phases = [(max(crossing[c] for c in range(start + phase, end + 1, period)), phase) for phase in range(period)]
        phase = min(phases)[1]
        first = start + phase
        return [(a, a + period) for a in range(first, end - period + 1, period)]

    def _crossing(self) -> list[int]:
        """crossing[p]: bytes of values made before binding p (or, for parameters, first read before it)
        that are read at p or later (or returned)."""
        index = {b.var: i for i, b in enumerate(self.bindings)}
        n = len(self.bindings)
        last = {}
        for i, b in enumerate(self.bindings):
            for u in free_vars(b.value):
                if u in index:
                    last[u] = i
                elif u in self.fn.params:
                    index.setdefault(u, i)  # a parameter counts from its first read: x feeding block 1's add
                    last[u] = i
        for u in free_vars(self.fn.body):
            if u in index:
                last[u] = n
        delta = [0] * (n + 2)
        for v, i in index.items():
            end = last.get(v, i)
            if end > i:
                size = type_bytes(v.type)
                delta[i + 1] += size
                delta[end + 1] -= size
        crossing, run = [], 0
        for p in range(n + 1):
            run += delta[p]
            crossing.append(run)
        return crossing


_SIZES = (1, 2, 3, 4, 6, 8, 12, 16)  # regions of g units each
_MAX_UNITS = 48


def _groups(segments: list[tuple[int, int]], g: int, offset: int) -> list[tuple[int, int]]:
    """Binding ranges of g consecutive segments each, from segment `offset` on (a shorter last one)."""
    n = len(segments)
    return [(segments[i][0], segments[min(i + g, n) - 1][1]) for i in range(offset, n, g)]


def _strip_markers(fn: Function) -> Function:
    """fn without checkpoint markers (each marker's uses read its input instead)."""
    mapping: dict[Var, ir.Expr] = {}
    kept = []
    for b in fn.bindings:
        value = substitute(b.value, mapping)
        if isinstance(value, Call) and value.op in MARKERS:
            mapping[b.var] = value.args[0]
            continue
        kept.append(ir.Binding(b.var, value))
    return Function(fn.params, [Block(kept)], substitute(fn.body, mapping), fn.attrs)


def op_flops(value) -> int:
    """Floating-point operations of one binding, estimated from shapes: 2 per multiply-add for matmul and
    convolutions, one per element read or written for everything else; markers and views cost nothing."""
    if not isinstance(value, Call) or value.op in MARKERS:
        return 0
    out = type_bytes(value.type) // max(_itemsize(value.type), 1)
    args = [a for a in value.args if isinstance(a.type, ir.TensorType)]
    if value.op == "matmul":
        return 2 * out * args[0].type.shape[-1]
    if value.op == "nn.conv2d":
        weight = args[1].type.shape  # (O, I / groups, kh, kw)
        return 2 * out * int(np.prod(weight[1:]))
    if value.op in ("reshape", "permute_dims", "expand_dims", "squeeze", "broadcast_to"):
        return 0
    return max([out] + [a.type.size for a in args])


def _itemsize(t) -> int:
    if isinstance(t, ir.TupleType):
        return _itemsize(t.fields[0]) if t.fields else 1
    return np.dtype(t.dtype).itemsize


__all__ = ["Plan", "differentiated_params", "make_plan", "op_flops", "parse_budget", "plan_checkpoints"]
