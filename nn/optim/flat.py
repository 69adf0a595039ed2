"""Optimizer state in flat buffers, updated by one numba call per step (ir.runtime.numba_adam, the `fast` extra).

An optimizer with a `_flat_kind` (Adam, AdamW, Adadelta, RMSprop, Adagrad) keeps, where numba is wanted and
its parameters are NumPy's C-contiguous float32/float64 arrays, its state in parts: each part holds parameters of
one dtype and one 1-D buffer per state name; each parameter's state entries (opt.state[i]["exp_avg"], ...) are
views of its part's buffers, put there at the parameter's first update (a parameter that never had a gradient
has no state, as before), also while the tiered start still runs the NumPy update. The parameters stay the
user's arrays. Each step checks that every entry is still its view: one the user (or load_state_dict) replaced
is copied into the view, which goes back in its place, so the values are never stale, and state_dict() copies as
before. An entry this cannot take (another dtype, shape or array type) sends the step to the NumPy update, which
then raises or computes exactly what it did before.

A reference held to an entry stays the live state, as torch's and the NumPy update's do, across the re-layouts
too (add_param_group, p.data = new_array, a group's options needing another state name): a parameter still
there (found by identity) with the same shape and dtype keeps its part's buffers and its views (a rebound array
is only the part's new view of the parameter); a state name a group takes up (amsgrad switched on) gets a buffer
of its own in the part, the other entries kept; only new parameters get new space, after a part's parameters
where it has room (a part made at a re-layout keeps SPARE elements of room, so that groups added one at a time
do not make a part, a numba call, each), else in a new part. Still replaced, where a re-layout cannot keep them:
the entries of a parameter whose array changed shape or dtype (it leaves its part, whose space it had stays
unused; its old entries no longer fit, so steps take the NumPy update, which raises or follows them, until
they are replaced: opt.state[i] = {} starts them afresh in views of the new part), and an entry the user set
(its values copied into its view at the next step). Entries load_state_dict loads and those a constructor or
add_param_group makes (Adagrad's "sum") are moved into their views at once (`adopt`), so a reference taken to
them afterwards is the live state.

The NumPy per-parameter update stays the fallback (numba absent or switched off, its tiered start still
loading, a gradient not C-contiguous, CuPy, float16): it runs on the same views, and gives the same bits.
"""
from __future__ import annotations

import math
import operator

import numpy as np

from ir.runtime import numba_adam, numba_hook

SLOTS = numba_adam.SLOTS
SPARE = 1 << 16  # room a part made at a re-layout keeps for the parameters added next (add_param_group again)


class _Part:
    """Parameters of one dtype whose state shares the buffers `bufs` (`size` long; one per name of opt._flat_order,
    an empty one for a name not in `names`, which none of them uses yet; [0, end) given out): `slots` (parameter
    index, start in the buffers, shape, its views {name: view}), and what a step needs from them (offsets,
    coefficients, the (p, g) pairs)."""

    def __init__(self, dtype, size, end, names, bufs, slots, datas, group_of, width, fn=None):
        self.dtype, self.size, self.end, self.names, self.bufs, self.slots = dtype, size, end, names, bufs, slots
        self.fn = fn
        self.rows = rows = [i for i, _, _, _ in slots]
        n = -(-len(rows) // SLOTS) * SLOTS  # padded to whole calls
        self.offs = np.zeros(n, np.int64)
        self.offs[:len(rows)] = [a for _, a, _, _ in slots]
        self.coef = np.zeros((n, width), dtype)
        self.flat_p = [datas[i].reshape(-1) for i in rows]
        self.empty = self.scratch = np.zeros(0, dtype)  # scratch: -g where a group maximizes (made then)
        self.largest = max(datas[i].size for i in rows)
        self.pairs = [self.empty] * (2 * n)  # the kernel's (p, g) arguments; the gradients' emptied after a step
        self.no_grads = [self.empty] * n
        # runs of rows in one group: (group, first row, end row)
        self.runs = []
        for r, i in enumerate(rows):
            if self.runs and self.runs[-1][0] == group_of[i] and self.runs[-1][2] == r:
                self.runs[-1][2] = r + 1
            else:
                self.runs.append([group_of[i], r, r + 1])


def _part(opt, datas, used, width, base, slots, rows=()):
    """A part on `base`'s buffers ((dtype, size, end, names, bufs, fn)) with `slots`, then `rows` (new parameters)
    from `end` on, and a new buffer (and each parameter's view of it) for each state name its groups use that it
    has none for; the other buffers and views are the same objects."""
    dtype, size, end, names, bufs, fn = base
    order, group_of = opt._flat_order, opt._group_of
    slots = list(slots)
    for i in rows:
        d = datas[i]
        slots.append((i, end, d.shape, {n: b[end:end + d.size].reshape(d.shape)
                                        for n, b in zip(order, bufs, strict=True) if n in names}))
        end += d.size
    need = {n for i, _, _, _ in slots for n in used[group_of[i]]} - names
    if need:
        bufs = tuple(np.zeros(size, dtype) if n in need else b for n, b in zip(order, bufs, strict=True))
        slots = [(i, a, shape, {**views, **{n: bufs[k][a:a + math.prod(shape)].reshape(shape)
                                             for k, n in enumerate(order) if n in need}})
                 for i, a, shape, views in slots]
        names = names | need
    return _Part(dtype, size, end, names, bufs, slots, datas, group_of, width, fn)


def _base(part):
    return part.dtype, part.size, part.end, part.names, part.bufs, part.fn


class NotCopied:
    """Copied (copy.deepcopy, pickle) as None: what refers to the parameters' arrays by identity is made again by
    the copy's optimizer at its next step."""

    __slots__ = ()

    def __deepcopy__(self, memo):
        return None

    def __reduce__(self):
        return _none, ()


class Flat(NotCopied):
    """The flat state of one optimizer for one set of parameter arrays (`datas`, by identity) and of the state
    names its groups use (`used`); `ok` False where the arrays do not qualify (the NumPy update runs). `old`: the
    flat state before (or None), whose parts that still fit are kept, their views with them. A copy (copy.deepcopy,
    pickle) would hold copies of the parameters' 1-D views, not views of the copied parameters: the copy's optimizer
    makes its own at its next step, and takes the copied state entries there."""

    def __init__(self, opt, datas, used, old=None):
        self.datas, self.used, self.group_of = datas, used, list(opt._group_of)  # (coefficients are per group)
        self.plan = None  # the step's plan (Optimizer._plan) under which this was found current
        self.ok = all(type(d) is np.ndarray and d.dtype in numba_adam.DTYPES and d.flags.c_contiguous
                      and d.flags.writeable for d in datas)
        if not self.ok:  # the parts kept for when the arrays qualify again
            self.params, self.parts = (old.params, old.parts) if old is not None else ([], [])
            return
        self.params = list(opt.params)
        self.parts = _layout(opt, datas, used, old)
        views = [None] * len(datas)
        for part in self.parts:
            for i, _, _, v in part.slots:
                views[i] = v
        # every (parameter, state name) the groups use, flat: the per-step check that each entry is its view
        keys = [(i, n) for i in range(len(datas)) for n in used[opt._group_of[i]]]
        self.key_params = [i for i, _ in keys]
        self.key_names = [n for _, n in keys]
        self.key_views = [views[i][n] for i, n in keys]
        self.views = views
        self.last_rows = None  # the coefficient rows written last (unchanged ones are not written again)



def _none():
    return None


def _layout(opt, datas, used, old) -> list:
    """The parts for `datas`: old's parts with the parameters still there at the same shape and dtype (found by
    identity, wherever they are now in opt.params; a rebound array is only the part's new view of it); the other
    parameters of a dtype after those of a part with room for them, else in a new part (with room to spare for
    the next ones where this is a re-layout)."""
    width = len(numba_adam.ROWS[opt._flat_kind])
    pos = {id(p): i for i, p in enumerate(opt.params)}
    placed = [False] * len(datas)
    parts = []
    for part in old.parts if old is not None else ():
        slots = []
        for j, a, shape, views in part.slots:
            i = pos.get(id(old.params[j]))
            if i is not None and not placed[i] and datas[i].dtype == part.dtype and datas[i].shape == shape:
                placed[i] = True
                slots.append((i, a, shape, views))
        if slots:
            parts.append(_part(opt, datas, used, width, _base(part), slots))
    for dtype in numba_adam.DTYPES:
        rows = [i for i, d in enumerate(datas) if d.dtype == dtype and not placed[i]]
        if not rows:
            continue
        need = sum(datas[i].size for i in rows)
        room = [k for k, part in enumerate(parts) if part.dtype == dtype and part.size - part.end >= need]
        if room:
            parts[room[-1]] = _part(opt, datas, used, width, _base(parts[room[-1]]), parts[room[-1]].slots, rows)
        else:
            size = need + (SPARE if old is not None and old.parts else 0)
            parts.append(_part(opt, datas, used, width, (dtype, size, 0, frozenset(), (np.zeros(0, dtype),) * 3,
                                                         None), (), rows))
    return parts


def update(opt, arrays: list) -> bool:
    """One step of `opt` over every parameter through numba, or False (nothing changed but state entries moved
    into their views, same values) where the NumPy update must run."""
    if not numba_hook.ENABLED:
        return False
    flat, plan = opt._flat_state, opt._plan
    if plan is None or flat is None or flat.plan is not plan:  # (the plan holds: the same arrays and options)
        flat = _current(opt)
        flat.plan = plan
    if not flat.ok:
        return False
    groups = opt.param_groups
    ndarray, missing = np.ndarray, False
    for g in arrays:
        if g is None:
            missing = True
        elif type(g) is not ndarray or not g.flags.c_contiguous:
            return False
    states = opt.state
    if (missing or not all(map(operator.is_, map(dict.get, [states[i] for i in flat.key_params], flat.key_names),
                                flat.key_views))) and not _sync(opt, flat, arrays):
        return False
    kind = opt._flat_kind
    for part in flat.parts:
        if part.fn is None:
            if not numba_adam.ready(kind, part.dtype):  # queued for the background load
                return False
            part.fn = numba_adam.kernel(kind)
    step, skipped, coefs = opt.step_count, opt.skipped, opt._flat_coefs
    same_t = not missing and skipped.count(skipped[0]) == len(skipped)
    rows = [coefs(g, step - skipped[0]) for g in groups] if same_t else None
    write = not same_t or rows != flat.last_rows
    flat.last_rows = rows
    maximize = any(g["maximize"] for g in groups)
    for part in flat.parts:
        if maximize and part.scratch.size < part.largest:
            part.scratch = np.empty(part.largest, part.dtype)
        coef, pairs, flat_p = part.coef, part.pairs, part.flat_p
        if write:
            for gi, a, b in part.runs:
                if same_t:
                    coef[a:b] = rows[gi]
                else:
                    for r in range(a, b):
                        i = part.rows[r]
                        if arrays[i] is not None:
                            coef[r] = coefs(groups[gi], step - skipped[i])
        for r, i in enumerate(part.rows):
            g = arrays[i]
            if g is None:
                pairs[2 * r] = pairs[2 * r + 1] = part.empty
            else:
                pairs[2 * r] = flat_p[r]
                pairs[2 * r + 1] = g if g.ndim == 1 else g.reshape(-1)
        numba_adam.run(part.fn, part.offs, coef, part.bufs, part.scratch, pairs)
        pairs[1::2] = part.no_grads  # not kept alive until the next step
    if missing:
        for i, g in enumerate(arrays):
            if g is None:
                skipped[i] += 1
    return True


def _current(opt) -> Flat:
    """opt's flat state for its parameters' arrays and groups now (made again, keeping what fits, on a change)."""
    flat = opt._flat_state
    used = [opt._flat_names(g) for g in opt.param_groups]
    datas = [p._data for p in opt.params]
    if flat is None or flat.used != used or flat.group_of != opt._group_of or len(datas) != len(flat.datas) or \
            not all(map(operator.is_, flat.datas, datas)):
        flat = opt._flat_state = Flat(opt, datas, used, flat)
    return flat


def adopt(opt) -> None:
    """Every state entry there is now (loaded by load_state_dict, made by a constructor: Adagrad's "sum") moved
    into its view, its values copied, so that a reference taken to it from here on is the live state, as torch's
    is. Entries that do not fit their view (another dtype or shape) stay, for the next step to decide."""
    if not numba_hook.ENABLED or opt._flat_kind is None or not opt.params:
        return
    flat = _current(opt)
    if not flat.ok:
        return
    for state, mine in zip(opt.state, flat.views, strict=True):
        for name, view in (mine or {}).items():
            cur = state.get(name)
            if cur is not None and cur is not view and type(cur) is np.ndarray and cur.dtype == view.dtype \
                    and cur.shape == view.shape:
                np.copyto(view, cur)
                state[name] = view


def _sync(opt, flat, arrays) -> bool:
    """Every state entry of a parameter with a gradient is its view: a missing one is initialised there, one
    replaced since is copied into it. False where an entry cannot be taken (the NumPy update decides)."""
    states, group_of, used, views = opt.state, opt._group_of, flat.used, flat.views
    joint = opt._flat_joint
    for i, g in enumerate(arrays):
        if g is None:
            continue
        state, mine = states[i], views[i]
        partial = bool(state)
        for name in used[group_of[i]]:
            cur = state.get(name)
            view = mine[name]
            if cur is view:
                continue
            if cur is None:
                if partial and name in joint:  # the NumPy update's own rule for a partial state (Adam: KeyError)
                    return False
                view[...] = opt._flat_init(opt.param_groups[group_of[i]], name)
            elif type(cur) is np.ndarray and cur.dtype == view.dtype and cur.shape == view.shape:
                np.copyto(view, cur)
            else:
                return False
            state[name] = view
    return True


__all__ = ["Flat", "NotCopied", "adopt", "update"]
