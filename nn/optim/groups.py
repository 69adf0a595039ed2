"""Parameter groups, as torch.optim's: `optim.SGD([{"params": a}, {"params": b, "lr": 0.1}], lr=0.01)`; and the
plan of Optimizer.step, which checks the groups' options (and the gradients) cheaply between full checks.

Each group is a dict holding its parameters under "params" and every option of its optimizer (a group's
own value, else the constructor's default). Optimizers read the options from the groups at every step,
so `for g in opt.param_groups: g["lr"] = ...` takes effect at the next step, as in torch.
"""
from __future__ import annotations

from collections.abc import Mapping
from itertools import repeat
from operator import is_

import numpy as np

from tracer import Tensor

from .flat import NotCopied

_PLAIN = (float, int, bool, str, type(None))  # option values a snapshot may hold: immutable, so identity = content


def named(params) -> tuple[list[str] | None, list]:
    """(names, tensors) from a dict {name: tensor}, (name, tensor) pairs (`named_parameters()`), one tensor
    or plain tensors (names None)."""
    if isinstance(params, Tensor):
        return None, [params]
    if isinstance(params, Mapping):
        return [str(k) for k in params], list(params.values())
    items = list(params)
    if items and all(isinstance(i, tuple) and len(i) == 2 and isinstance(i[0], str) for i in items):
        return [n for n, _ in items], [p for _, p in items]
    return None, items


def is_group_list(params) -> bool:
    """True for torch's group form: a list (or tuple) of dicts, each with its own "params"."""
    return isinstance(params, (list, tuple)) and bool(params) and all(isinstance(g, Mapping) for g in params)


def make_group(cls: str, group: Mapping, defaults: dict, where: str) -> tuple[dict, list[str] | None]:
    """A group dict with every option filled in from `defaults`, its "params" a list; and its names."""
    if "params" not in group:
        raise ValueError(f"{cls}: {where} has no 'params' entry (a parameter group is a dict "
                         "{'params': tensors, option: value, ...})")
    unknown = sorted(str(k) for k in group if k != "params" and k not in defaults)
    if unknown:
        raise TypeError(f"{cls}: {where} has unknown option(s) {', '.join(repr(k) for k in unknown)}; "
                        f"{cls}'s options are {', '.join(defaults)}")
    names, tensors = named(group["params"])
    out = {"params": tensors}
    out.update({k: group.get(k, v) for k, v in defaults.items()})
    return out, names


def normalize(groups: list) -> None:
    """Each group's options as step() reads them: an lr set as a NumPy scalar (a LambdaLR of np.exp,
    g["lr"] = np.float64(...)) as the float the constructor keeps (np.float64 is no weak scalar: the NumPy update
    ran float32 in float64 and the numba loop did not), any other NumPy-scalar option (weight_decay, eps) so too."""
    generic = np.generic
    for group in groups:
        if type(group["lr"]) is not float:
            group["lr"] = float(group["lr"])
        if any(map(isinstance, group.values(), repeat(generic))):
            group.update({k: v.item() for k, v in group.items() if isinstance(v, generic)})


def snapshot(groups: list) -> list | None:
    """[(group, keys, values)] of `groups` after normalize(): what `unchanged` compares by identity; None where an
    option holds a mutable value (a list of betas changed in place would look the same)."""
    snap = []
    for group in groups:
        for k, v in group.items():
            if k != "params" and type(v) not in _PLAIN and not (type(v) is tuple and all(type(x) in _PLAIN for x in v)):
                return None
        snap.append((group, list(group), list(group.values())))
    return snap


def unchanged(groups: list, snap: list) -> bool:
    """Whether every group is the dict `snapshot` saw, with the same keys holding the same objects (so
    normalize() would change nothing and each option reads as then). A value set since is another object, even an
    equal one (np.float64(lr) == lr); the "params" entry is compared too, though step() reads opt.params."""
    if len(groups) != len(snap):
        return False
    for group, (old, keys, values) in zip(groups, snap, strict=True):
        if group is not old or len(group) != len(keys) or not all(map(is_, group.values(), values)) \
                or not all(map(is_, group, keys)):
            return False
    return True


def sync_groups(opt) -> None:
    """opt's parameters, their groups, state and step counts as param_groups holds them now: torch reads each
    group's "params" at every step, so a group appended to param_groups by hand (not add_param_group), the groups
    reordered or a group's "params" edited take effect at the next step here too, each parameter keeping its state
    and step count (by identity), a new one starting afresh. Options a hand-made group lacks come from the
    constructor's, as add_param_group's; a bad group raises add_param_group's error and changes nothing."""
    groups, params, group_of = opt.param_groups, opt.params, opt._group_of
    if all(type(g) is dict and type(g.get("params")) is list for g in groups):
        members = [p for g in groups for p in g["params"]]
        if len(members) == len(params) and all(map(is_, members, params)) and \
                [i for i, g in enumerate(groups) for _ in g["params"]] == group_of:
            return
    before = (params, opt.state, group_of, opt.skipped, opt.names)
    old = {id(p): (state, skipped) for p, state, skipped in zip(params, opt.state, opt.skipped, strict=True)}
    names = dict(zip(map(id, params), opt.names, strict=True)) if opt.names is not None else {}
    opt.param_groups, opt.params, opt.state, opt._group_of, opt.skipped = [], [], [], [], []
    try:
        for i, group in enumerate(groups):
            opt._add_group(group, f"parameter group {i}")
            if type(group) is dict:  # the user's dict stays the group (filled in), as torch keeps it
                group.update(opt.param_groups[-1])
                opt.param_groups[-1] = group
    except Exception:  # the user's list was not touched: everything as before
        opt.param_groups, (opt.params, opt.state, opt._group_of, opt.skipped, opt.names) = groups, before
        raise
    groups[:], opt.param_groups = opt.param_groups, groups  # the same list object, holding the groups as made
    for i, p in enumerate(opt.params):
        if id(p) in old:
            opt.state[i], opt.skipped[i] = old[id(p)]
    found = [names.get(id(p)) for p in opt.params]
    opt.names = None if None in found else found
    opt._plan = None


class Plan(NotCopied):
    """What a full check of step()'s gradients found, for the steps after it to check cheaply: the parameters'
    arrays and autograd records (by identity: p.data rebound, moved to another array module, frozen or unfrozen
    since all differ), the groups' options (snapshot: by identity, after normalize()), the gradients' kind
    (all concrete Tensors, or all NumPy arrays) and dtypes; the shapes are compared with the arrays' each step.
    Made only where every parameter has a gradient and the arrays are NumPy's; anything else, or a mismatch, takes
    the full checks, which raise their errors or make the plan again. Not copied with the optimizer."""

    __slots__ = ("ags", "datas", "dtypes", "n", "options", "sizes", "tensors")


def make_plan(opt, grads, arrays) -> Plan | None:
    options = snapshot(opt.param_groups)
    datas = [p._data for p in opt.params]
    ndarray = np.ndarray
    if options is None or type(grads) is not list or len(arrays) != len(datas) or not all(
            type(a) is ndarray and type(d) is ndarray for a, d in zip(arrays, datas, strict=True)):
        return None  # (None gradients, frozen parameters: no ndarray in arrays)
    if all(type(g) is Tensor for g in grads):
        tensors = True
    elif all(g is a for g, a in zip(grads, arrays, strict=True)):
        tensors = False
    else:
        return None
    plan = Plan()
    plan.n, plan.datas, plan.ags, plan.options, plan.tensors = len(datas), datas, [p._ag for p in opt.params], \
        options, tensors
    plan.dtypes = [d.dtype for d in datas]
    plan.sizes = [len(g["params"]) for g in opt.param_groups]
    return plan


def planned(opt, grads: list) -> list | None:
    """The arrays opt._checked would return, where the plan made at its last full check still holds (see Plan);
    else None. (Optimizer._planned.)"""
    plan, params, groups = opt._plan, opt.params, opt.param_groups
    if plan is None or len(grads) != plan.n or len(params) != plan.n:
        return None
    if len(groups) == 1:  # unchanged(), inline
        (group, keys, values), = plan.options
        if groups[0] is not group or len(group) != len(keys) or not all(map(is_, group.values(), values)) \
                or not all(map(is_, group, keys)):
            return None
    elif not unchanged(groups, plan.options) or [len(g["params"]) for g in groups] != plan.sizes:
        return None
    # a group's "params" edited in place (the same list object): sync_groups at the full check
    members = groups[0]["params"] if len(groups) == 1 else [p for g in groups for p in g["params"]]
    if len(members) != plan.n or not all(map(is_, members, params)):
        return None
    ndarray = np.ndarray
    if not plan.tensors:
        for p, g, d, ag, dtype in zip(params, grads, plan.datas, plan.ags, plan.dtypes, strict=True):
            if p._data is not d or p._ag is not ag or type(g) is not ndarray or g.dtype != dtype \
                    or g.shape != d.shape or not d.flags.writeable:
                return None
        return list(grads)
    arrays = []
    append = arrays.append
    for p, g, d, ag, dtype in zip(params, grads, plan.datas, plan.ags, plan.dtypes, strict=True):
        if p._data is not d or p._ag is not ag or type(g) is not Tensor or g._var is not None:
            return None
        a = g._data  # value_and_grad's concrete Tensors
        if type(a) is not ndarray or a.dtype != dtype or a.shape != d.shape or not d.flags.writeable:
            return None  # (numba makes dtype objects anew; a parameter made read-only since: the full check raises)
        append(a)
    return arrays


def refuse_differentiable(opt, differentiable: bool) -> None:
    """torch's differentiable=True lets autograd see through the update; steps here are never differentiated."""
    if differentiable:
        raise NotImplementedError(f"{type(opt).__name__}: differentiable=True is not supported (optimizer steps "
                                  "run outside autodiff)")


__all__ = ["Plan", "is_group_list", "make_group", "make_plan", "named", "normalize", "planned", "refuse_differentiable",
           "snapshot", "sync_groups", "unchanged"]
