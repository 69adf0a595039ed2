"""L-BFGS with torch.optim.LBFGS's algorithm, arguments, defaults and state-dict layout.

`step(closure)` as torch's: the closure zeroes the gradients, computes the loss, calls `loss.backward()` and
returns the loss; L-BFGS calls it up to `max_eval` times per step and reads every parameter's `.grad`. A closure
built on a compiled step works too: it sets each parameter's `.grad` from `autodiff.value_and_grad`'s gradients
and returns the loss. All parameters form one flat vector (one parameter group, as torch requires).
"""
from __future__ import annotations

import numpy as np

from tracer import Tensor, enable_grad, no_grad
from tracer.autograd import bump
from tracer.tensor import array_module_of

from .lbfgs_search import strong_wolfe
from .optimizers import Optimizer, _check_nonnegative, as_array

_STATE_ARRAYS = ("d", "prev_flat_grad")
_STATE_LISTS = ("old_dirs", "old_stps", "ro", "al")


class LBFGS(Optimizer):
    """L-BFGS (torch.optim.LBFGS): up to `max_iter` quasi-Newton iterations per `step(closure)` with a
    two-loop recursion over the last `history_size` curvature pairs; a fixed step `lr` (the first iteration's
    scaled by min(1, 1 / |g|_1)) or line_search_fn="strong_wolfe". Stops early on |g|_inf <= tolerance_grad or
    changes below tolerance_change. State (under parameter 0, as torch's): func_evals, n_iter, d, t, old_dirs,
    old_stps, ro, H_diag, prev_flat_grad, prev_loss, al."""

    def __init__(self, params, lr: float = 1, max_iter: int = 20, max_eval: int | None = None,
                 tolerance_grad: float = 1e-7, tolerance_change: float = 1e-9, history_size: int = 100,
                 line_search_fn: str | None = None):
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        super().__init__(params, dict(lr=lr, max_iter=max_iter, max_eval=max_eval, tolerance_grad=tolerance_grad,
                                      tolerance_change=tolerance_change, history_size=history_size,
                                      line_search_fn=line_search_fn))
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        dtypes = {p.dtype for p in self.params}
        if len(dtypes) != 1:
            raise TypeError(f"LBFGS: all parameters must share one dtype (they form one flat vector), got "
                            f"{sorted(dtypes)}")
        self._dtype = self.params[0].dtype

    def _check_options(self, group, where):
        _check_nonnegative(self, where, lr=group["lr"])
        if group["line_search_fn"] not in (None, "strong_wolfe"):
            raise ValueError(f"LBFGS: line_search_fn must be None or 'strong_wolfe', got {group['line_search_fn']!r}")
        for name in ("max_iter", "max_eval", "history_size"):
            if not (isinstance(group[name], int | np.integer) and group[name] >= 1):
                raise ValueError(f"LBFGS: {name} must be a positive integer, got {group[name]!r}")

    def _update(self, p, g, state, t, group):
        raise TypeError("LBFGS updates all parameters together: call step(closure), not step(grads)")

    # -- the flat vector of parameters and gradients (torch's _gather_flat_grad, _add_grad, ...)
    def _xp(self):
        return array_module_of(self.params[0]._data)

    def _flat_grad(self):
        xp, views = self._xp(), []
        for p in self.params:
            g = p.grad
            if g is None:
                views.append(xp.zeros(p._data.size, p._data.dtype))
            else:
                views.append(as_array(g, p._data).reshape(-1))
        return xp.concatenate(views)

    def _add_grad(self, step_size, update) -> None:
        offset = 0
        xp = self._xp()
        alpha = xp.asarray(step_size, dtype=self._dtype)  # torch casts add_'s alpha to the tensor's dtype
        for p in self.params:
            n = p._data.size
            p._data += alpha * update[offset:offset + n].reshape(p._data.shape)
            bump(p._data)
            offset += n

    def _clone_param(self):
        return [p._data.copy() for p in self.params]

    def _set_param(self, datas) -> None:
        for p, data in zip(self.params, datas, strict=True):
            p._data[...] = data
            bump(p._data)

    def _evaluate(self, closure):
        with enable_grad():
            loss = closure()
        if loss is None:
            raise TypeError("LBFGS.step: the closure must return the loss (it is called several times per step)")
        return float(loss.item() if isinstance(loss, Tensor) else loss), loss

    def _directional_evaluate(self, closure, x, t, d):
        self._add_grad(t, d)
        loss, _ = self._evaluate(closure)
        flat_grad = self._flat_grad()
        self._set_param(x)
        return loss, flat_grad

    def step(self, closure=None):
        """One L-BFGS step: up to max_iter iterations, each evaluating `closure` (zero_grad, forward,
        loss.backward(), return loss) once, or several times under the strong-Wolfe line search. Returns the
        closure's first loss, as torch's."""
        if not callable(closure):
            raise TypeError("LBFGS.step: pass a closure that zeroes the gradients, computes the loss, calls "
                            "loss.backward() and returns the loss (L-BFGS re-evaluates it)")
        with no_grad():
            return self._step(closure)

    def _step(self, closure):
        group = self.param_groups[0]
        lr, max_iter, max_eval = group["lr"], group["max_iter"], group["max_eval"]
        tolerance_grad, tolerance_change = group["tolerance_grad"], group["tolerance_change"]
        line_search_fn, history_size = group["line_search_fn"], group["history_size"]
        state = self.state[0]
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)
        loss, orig_loss = self._evaluate(closure)
        current_evals = 1
        state["func_evals"] += 1
        flat_grad = self._flat_grad()
        if abs(flat_grad).max() <= tolerance_grad:  # already optimal
            return orig_loss
        d, t = state.get("d"), state.get("t")
        old_dirs, old_stps, ro = state.get("old_dirs"), state.get("old_stps"), state.get("ro")
        h_diag, prev_flat_grad, prev_loss = state.get("H_diag"), state.get("prev_flat_grad"), state.get("prev_loss")
        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1
            if state["n_iter"] == 1:
                d = -flat_grad
                old_dirs, old_stps, ro, h_diag = [], [], [], 1
            else:
                y = flat_grad - prev_flat_grad
                s = d * t
                ys = y.dot(s)
                if ys > 1e-10:  # update the memory
                    if len(old_dirs) == history_size:
                        old_dirs.pop(0)
                        old_stps.pop(0)
                        ro.pop(0)
                    old_dirs.append(y)
                    old_stps.append(s)
                    ro.append(1.0 / ys)
                    h_diag = ys / y.dot(y)
                num_old = len(old_dirs)
                if "al" not in state:
                    state["al"] = [None] * history_size
                al = state["al"]
                q = -flat_grad  # two-loop recursion: d = -H g
                for i in range(num_old - 1, -1, -1):
                    al[i] = old_stps[i].dot(q) * ro[i]
                    q -= old_dirs[i] * al[i]
                d = r = q * h_diag
                for i in range(num_old):
                    be_i = old_dirs[i].dot(r) * ro[i]
                    r += old_stps[i] * (al[i] - be_i)
            prev_flat_grad = flat_grad.copy()
            prev_loss = loss
            if state["n_iter"] == 1:
                t = min(1.0, 1.0 / abs(flat_grad).sum()) * lr
            else:
                t = lr
            gtd = flat_grad.dot(d)
            if gtd > -tolerance_change:  # not a descent direction
                break
            ls_func_evals = 0
            if line_search_fn is not None:
                x_init = self._clone_param()
                loss, flat_grad, t, ls_func_evals = strong_wolfe(
                    lambda x, t, d: self._directional_evaluate(closure, x, t, d), x_init, t, d, loss, flat_grad,
                    gtd, max_ls=max_eval - current_evals)
                self._add_grad(t, d)
                opt_cond = abs(flat_grad).max() <= tolerance_grad
            else:
                self._add_grad(t, d)
                opt_cond = False
                if n_iter != max_iter:
                    loss, _ = self._evaluate(closure)
                    flat_grad = self._flat_grad()
                    opt_cond = abs(flat_grad).max() <= tolerance_grad
                    ls_func_evals = 1
            current_evals += ls_func_evals
            state["func_evals"] += ls_func_evals
            if n_iter == max_iter or current_evals >= max_eval or opt_cond:
                break
            if abs(d * t).max() <= tolerance_change or abs(loss - prev_loss) < tolerance_change:
                break
        state.update(d=d, t=t, old_dirs=old_dirs, old_stps=old_stps, ro=ro, H_diag=h_diag,
                     prev_flat_grad=prev_flat_grad, prev_loss=prev_loss)
        return orig_loss

    def state_dict(self) -> dict:
        """torch's layout: {"state": {0: {"func_evals", "n_iter", "d", "t", "old_dirs", ...}} (the flat
        vectors as NumPy arrays, lists of them for the history), "param_groups": [{options, "params"}]}."""
        def host(v):
            if isinstance(v, list):
                return [host(a) for a in v]
            if hasattr(v, "get") and not isinstance(v, np.ndarray | dict):
                return v.get()  # CuPy
            return np.array(v) if isinstance(v, np.ndarray | np.generic) else v
        state = {0: {k: host(v) for k, v in self.state[0].items()}} if self.state[0] else {}
        if "al" in state.get(0, {}):  # entries not yet written (None in torch's) as zeros, so nn.save stores it
            state[0]["al"] = [np.zeros((), self._dtype) if a is None else a for a in state[0]["al"]]
        group = {k: v for k, v in self.param_groups[0].items() if k != "params"}
        return {"state": state, "param_groups": [{**group, "params": list(range(len(self.params)))}]}

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore `state_dict()`'s output, its nn.save/nn.load round trip, or torch's LBFGS state dict with
        tensors turned into NumPy arrays."""
        groups = state_dict["param_groups"]
        groups = [groups[k] for k in sorted(groups, key=int)] if isinstance(groups, dict) else list(groups)
        if len(groups) != 1 or len(np.asarray(groups[0]["params"]).reshape(-1)) != len(self.params):
            raise ValueError(f"LBFGS.load_state_dict: expected one parameter group of {len(self.params)} "
                             "parameters")
        saved = dict(state_dict.get("state", {}))
        entry = next(iter(saved.values()), {}) if saved else {}
        xp = self._xp()

        def device(v, list_of=False):
            if isinstance(v, dict):  # nn.load's form of a list
                v = [v[k] for k in sorted(v, key=int)]
            if isinstance(v, list | tuple):
                return [None if a is None else device(a) for a in v]
            a = np.asarray(v)
            if list_of:  # nn.save stacked the list: its rows (old_dirs) or 0-d entries (ro, al)
                return [device_one(r) for r in a] if a.size else []
            return device_one(a)

        def device_one(a):
            return xp.asarray(a, dtype=self._dtype) if a.ndim else a.astype(self._dtype)[()]
        new = {}
        for k, v in entry.items():
            if k in ("func_evals", "n_iter"):
                new[k] = int(np.asarray(v))
            elif k == "prev_loss":
                new[k] = float(np.asarray(v))
            elif k in _STATE_ARRAYS + _STATE_LISTS or k in ("t", "H_diag"):
                new[k] = device(v, list_of=k in _STATE_LISTS)
            else:
                raise ValueError(f"LBFGS.load_state_dict: unknown state entry {k!r}")
        options = {k: (v.item() if isinstance(v, np.ndarray | np.generic) else v)
                   for k, v in groups[0].items() if k != "params"}
        group = {**self.param_groups[0], **options, "params": self.params}
        self._check_options(group, "")
        self.param_groups[0].update(group)
        self.state[0] = new


__all__ = ["LBFGS"]
