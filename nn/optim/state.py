"""Optimizer state dicts in torch's layout, so checkpoints carry over both ways:

    {"state": {0: {"step": 0-d float32, "exp_avg": array, ...}, ...},
     "param_groups": [{"lr": ..., <every option>, "params": [0, 1]}, ...]}

The integer ids number the parameters across the groups in order, as torch's do. "state" holds an entry only
for a parameter that has state (torch's "step" is that parameter's own step count: the steps at which it had a
gradient). tracegrad keeps the step count as `opt.step_count - opt.skipped[i]`; these functions convert.
`nn.save` stores the dict (integer keys as strings, the group list as a dict "0", "1", ...), and
`load_state_dict` reads back that form, a torch optimizer's state dict with tensors turned into NumPy arrays,
and the older tracegrad layout {"lr", "step", "skipped", "state"}.
"""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from . import flat

SCALARS = ("step", "mu_product")  # 0-d entries of a parameter's state (torch's float32 scalar tensors)
TORCH_ONLY = ("foreach", "fused", "capturable", "differentiable")  # torch kernel choices, not options here


def _host(v):
    if isinstance(v, np.ndarray):
        return v.copy()
    if isinstance(v, float):
        return np.asarray(v, "float32")
    return v.get()  # CuPy


def state_dict(opt) -> dict:
    state = {}
    for i, s in enumerate(opt.state):
        if not s:
            continue
        entry = {"step": np.asarray(float(opt.step_count - opt.skipped[i]), "float32")} if opt.counts_steps else {}
        entry.update({k: _host(v) for k, v in s.items()})
        state[i] = entry
    groups, first = [], 0
    for g in opt.param_groups:
        n = len(g["params"])
        groups.append({**{k: v for k, v in g.items() if k != "params"}, "params": list(range(first, first + n))})
        first += n
    return {"state": state, "param_groups": groups}


def _plain(v):
    """A value from nn.load or a converted torch dict as the Python value a group holds."""
    if isinstance(v, np.ndarray):
        return v.item() if v.ndim == 0 else tuple(x.item() for x in v.reshape(-1))
    return v.item() if isinstance(v, np.generic) else v


def _as_list(groups) -> list:
    if isinstance(groups, Mapping):  # nn.load's form of a list: {"0": ..., "1": ...}
        return [groups[k] for k in sorted(groups, key=int)]
    return list(groups)


def load_state_dict(opt, sd: Mapping) -> None:
    from .optimizers import as_array

    cls = type(opt).__name__
    if "param_groups" not in sd:
        return _load_legacy(opt, sd)
    saved_groups = _as_list(sd["param_groups"])
    problems: list[str] = []
    if len(saved_groups) != len(opt.param_groups):
        raise ValueError(f"{cls}.load_state_dict: {len(saved_groups)} parameter groups, but the optimizer has "
                         f"{len(opt.param_groups)}")
    ids: dict[int, int] = {}  # saved parameter id -> index into opt.params
    first = 0
    for i, (saved, group) in enumerate(zip(saved_groups, opt.param_groups, strict=True)):
        saved_ids = [int(x) for x in np.asarray(saved["params"]).reshape(-1)]
        if len(saved_ids) != len(group["params"]):
            problems.append(f"group {i} has {len(saved_ids)} parameters, the optimizer's has {len(group['params'])}")
        ids.update({sid: first + j for j, sid in enumerate(saved_ids)})
        first += len(group["params"])
    new_state: list[dict] = [{} for _ in opt.params]
    steps: list[int | None] = [None] * len(opt.params)
    for key, entry in sd.get("state", {}).items():
        if not (str(key).isdigit() and int(key) in ids):
            problems.append(f"state for parameter {key!r}, which no group lists")
            continue
        i = ids[int(key)]
        p = opt.params[i]
        for name, value in entry.items():
            if name == "step":
                steps[i] = int(round(float(np.asarray(value))))
            elif name in SCALARS:
                new_state[i][name] = float(np.float32(np.asarray(value)))
            else:
                value = as_array(value, p._data)
                if value.shape != p.shape:
                    problems.append(f"{name} of parameter {key}: shape {tuple(value.shape)}, expected {p.shape}")
                new_state[i][name] = value.copy()
    options = []
    for i, (saved, group) in enumerate(zip(saved_groups, opt.param_groups, strict=True)):
        new = {k: _plain(v) for k, v in saved.items() if k != "params" and k not in TORCH_ONLY}
        new = {**group, **new, "params": group["params"]}
        try:
            opt._check_options(new, f"parameter group {i}")
        except ValueError as e:
            problems.append(str(e))
        options.append(new)
    if problems:
        raise ValueError(f"{cls}.load_state_dict: " + "; ".join(problems))
    for group, new in zip(opt.param_groups, options, strict=True):
        group.clear()
        group.update(new)
        group["lr"] = float(group["lr"])
    opt.step_count = max([s for s in steps if s is not None], default=0)
    opt.skipped = [opt.step_count - (s if s is not None else 0) for s in steps]
    opt.state = new_state
    flat.adopt(opt)  # the loaded entries into the flat state's views: a reference taken now stays live


def _load_legacy(opt, sd: Mapping) -> None:
    """The layout tracegrad wrote before torch's: {"lr", "step", "skipped", "state": {"<index>": {...}}}."""
    cls = type(opt).__name__
    lr = np.asarray(sd["lr"], "float64").reshape(-1)
    skipped = np.asarray(sd.get("skipped", np.zeros(len(opt.params))), "int64").reshape(-1)
    if lr.size not in (1, len(opt.param_groups)) or skipped.size != len(opt.params):
        raise ValueError(f"{cls}.load_state_dict: {lr.size} learning rates and {skipped.size} skipped-step counts "
                         f"for {len(opt.param_groups)} groups and {len(opt.params)} parameters")
    step = int(sd["step"])
    state = {int(k): v for k, v in sd.get("state", {}).items()}
    if any(k >= len(opt.params) for k in state):
        raise ValueError(f"{cls}.load_state_dict: state for parameters {sorted(state)}, but there are "
                         f"{len(opt.params)} parameters")
    converted = {k: {**({"step": step - int(skipped[k])} if opt.counts_steps else {}), **v}
                 for k, v in state.items()}
    n = len(opt.params)
    groups, first = [], 0
    for i, g in enumerate(opt.param_groups):
        groups.append({**g, "lr": float(lr[i if lr.size > 1 else 0]),
                       "params": list(range(first, first + len(g["params"])))})
        first += len(g["params"])
    load_state_dict(opt, {"state": converted, "param_groups": groups})
    opt.step_count = step
    opt.skipped = [int(s) for s in skipped] if n else []


__all__ = ["load_state_dict", "state_dict"]
