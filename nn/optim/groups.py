"""Parameter groups, as torch.optim's: `optim.SGD([{"params": a}, {"params": b, "lr": 0.1}], lr=0.01)`.

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


def refuse_differentiable(opt, differentiable: bool) -> None:
    """torch's differentiable=True lets autograd see through the update; steps here are never differentiated."""
    if differentiable:
        raise NotImplementedError(f"{type(opt).__name__}: differentiable=True is not supported (optimizer steps "
                                  "run outside autodiff)")


__all__ = ["is_group_list", "make_group", "named", "normalize", "refuse_differentiable", "snapshot", "unchanged"]
