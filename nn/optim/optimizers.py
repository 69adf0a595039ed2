"""SGD, Adam and AdamW with PyTorch's update rules, updating parameters in place from given gradients."""
from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping

import numpy as np

from autodiff.anomaly import check_optimizer
from ir.runtime import anomaly as _anomaly
from ir.runtime import numba_optim
from nn.module import zero_grads
from tracer import Tensor, enable_grad
from tracer.autograd import bump
from tracer.tensor import array_module_of

from . import flat
from .groups import Plan, is_group_list, make_group, make_plan, normalize, planned, refuse_differentiable, sync_groups
from .state import load_state_dict, state_dict


def as_array(g, like=None):
    """A gradient (array, Tensor or CuPy array) as an array of `like`'s array module and dtype."""
    if isinstance(g, Tensor):
        g = g._concrete("an optimizer's use")
    if like is None:
        return g if hasattr(g, "shape") and hasattr(g, "dtype") else np.asarray(g)
    xp = array_module_of(like)
    if xp is np and not isinstance(g, np.ndarray) and hasattr(g, "get"):
        g = g.get()  # a CuPy gradient for a NumPy parameter
    return xp.asarray(g, dtype=like.dtype)


class Optimizer(ABC):
    """Base class: the parameters (in order) in torch's `param_groups`, the step count and per-parameter state.

    `params` is a list of tensors, a dict {name: tensor}, `model.named_parameters()`, or torch's list of
    group dicts ({"params": tensors, option: value}; options missing from a group take the constructor's).
    `step` takes the gradients as a list in the parameters' order or as the dict that `autodiff.grad(wrt=dict)`
    returns. A None gradient (a parameter that took no part in the loss) leaves that parameter and its state
    alone, as torch skips a parameter whose .grad is None. Options are read from `param_groups` at every step;
    `opt.lr` (and each option by its name) reads the groups' common value and sets it in every group.

    >>> import numpy as np, tracer
    >>> w = tracer.tensor(np.ones(2))
    >>> opt = SGD({"w": w}, lr=0.5)
    >>> opt.step({"w": np.array([1.0, 2.0])})
    >>> w.numpy().tolist()
    [0.5, 0.0]
    """

    counts_steps = True  # torch's state keeps each parameter's "step" (SGD's does not)
    # the one-call numba update over flat state (nn/optim/flat.py) of a subclass that has one: its kind in
    # ir.runtime.numba_adam, its three state buffers' names, the names a partial state may not lack
    _flat_kind: str | None = None
    _flat_order: tuple = ()
    _flat_joint: tuple = ()
    _flat_state = None  # the flat state (flat.Flat) for the current parameter arrays
    _plan: Plan | None = None  # what step()'s last full check found (None: the next step checks in full)
    _planned = planned  # the arrays the full check would give, where the plan holds (else None)

    def __init__(self, params, defaults: dict):
        cls = type(self).__name__
        object.__setattr__(self, "defaults", dict(defaults))
        self.param_groups: list[dict] = []
        self.params: list = []
        self.state: list[dict] = []
        self._group_of: list[int] = []  # the group of each parameter
        self.skipped: list[int] = []  # steps without a gradient or before it was added (its own step: the rest)
        self.step_count = 0
        self._scratch: dict = {}  # (array module, dtype, k) -> a flat buffer as large as the largest parameter
        self._views: dict = {}  # (array type, dtype, k, shape) -> that buffer's view in the shape
        groups = params if is_group_list(params) else [{"params": params}]
        all_names: list[str] | None = []
        for i, group in enumerate(groups):
            names = self._add_group(group, f"parameter group {i}" if len(groups) > 1 or groups[0] is params else "")
            all_names = all_names + names if all_names is not None and names is not None else None
        self.names = all_names
        if self.names is not None and len(set(self.names)) != len(self.names):
            raise ValueError(f"{cls}: a parameter name appears more than once")
        if not self.params:
            raise ValueError(f"{cls}: got an empty parameter list")

    def add_param_group(self, param_group: dict) -> None:
        """Add a group of parameters with its own options (the constructor's where it gives none), as torch's."""
        if not isinstance(param_group, Mapping):
            raise TypeError(f"{type(self).__name__}.add_param_group: expected a dict with 'params', got "
                            f"{type(param_group).__name__}")
        names = self._add_group(param_group, f"parameter group {len(self.param_groups)}")
        self._plan = None  # (its parameters and groups differ too: the next step checks in full either way)
        self.names = None if self.names is None or names is None else self.names + names
        flat.adopt(self)  # state the new group's parameters start with (Adagrad's "sum") in the flat views

    def _add_group(self, group, where: str):
        cls = type(self).__name__
        group, names = make_group(cls, group, self.defaults, where)
        seen = {id(p) for p in self.params}
        for p in group["params"]:
            if id(p) in seen:
                raise ValueError(f"{cls}: a parameter appears more than once" +
                                 (" (in more than one group)" if self.param_groups else ""))
            seen.add(id(p))
            if not isinstance(p, Tensor) or p._data is None or p.dtype not in ("float16", "float32", "float64"):
                raise TypeError(f"{cls}: parameter {len(self.params)} must be a concrete floating-point Tensor")
            self.params.append(p)
        self._check_options(group, where)
        group["lr"] = float(group["lr"])
        n = len(group["params"])
        self._group_of += [len(self.param_groups)] * n
        self.state += [{} for _ in range(n)]
        self.skipped += [self.step_count] * n  # added after some steps (add_param_group): its own count from 0
        self.param_groups.append(group)
        return names

    def _check_options(self, group: dict, where: str) -> None:
        """Refuse a group's options with a message naming them; subclasses check their own."""
        _check_nonnegative(self, where, lr=group["lr"])

    # each option by its name (opt.lr, opt.momentum): the groups' common value; setting it sets every group
    def __getattr__(self, name):
        defaults = self.__dict__.get("defaults", {})
        if name not in defaults or "param_groups" not in self.__dict__:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        values = [g[name] for g in self.param_groups]
        if any(v != values[0] for v in values[1:]):
            raise ValueError(f"{type(self).__name__}.{name}: the {len(values)} parameter groups have different "
                             f"values {values}; read or set param_groups[i][{name!r}]")
        return values[0]

    def __setattr__(self, name, value):
        if name in self.__dict__.get("defaults", {}) and "param_groups" in self.__dict__:
            for i, g in enumerate(self.param_groups):
                self._check_options({**g, name: value}, f"parameter group {i}" if len(self.param_groups) > 1 else "")
            for g in self.param_groups:
                g[name] = float(value) if name == "lr" else value
            return
        object.__setattr__(self, name, value)

    def step(self, grads=None, closure=None):
        """Update every parameter in place from `grads`: a list in the order of the parameters, or a
        dict keyed by the parameters' names; with no argument, from each parameter's `.grad` (torch's form:
        a parameter whose .grad is None is skipped, its state untouched). `step(closure)`, as torch's: the
        closure (zero_grad, forward, backward, return the loss) runs first, with grad enabled, and its loss
        is returned."""
        if callable(grads) and not isinstance(grads, (Tensor, np.ndarray)):
            grads, closure = None, grads
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        if grads is None:
            sync_groups(self)  # (param_groups edited by hand: .grad in the order of the groups' parameters now)
            grads = self._dot_grads()
        arrays = self._planned(grads) if type(grads) is list and not _anomaly.enabled else None
        if arrays is None:  # the full checks (each raising its error), then a plan for the next steps
            arrays = self._checked(grads)
            if _anomaly.enabled:  # autodiff.detect_anomaly: a NaN gradient names its parameter
                check_optimizer(self, arrays, "gradient")
            normalize(self.param_groups)
            self._plan = make_plan(self, grads, arrays)
        self.__dict__["step_count"] += 1  # (not through __setattr__, which looks for an option of that name)
        if not self._update_all(arrays):  # one call for every parameter (SGD's numba form), or each in turn
            self._update_each(arrays)
        if _anomaly.enabled:
            check_optimizer(self, [None if g is None else p._data for p, g in zip(self.params, arrays, strict=True)],
                            "parameter")
        return loss

    def _checked(self, grads) -> list:
        """The gradients as arrays of their parameters' dtype and module (None: skipped), each checked."""
        sync_groups(self)
        if type(grads) is not list and isinstance(grads, Mapping):
            grads = self._by_name(grads)
        if isinstance(grads, (Tensor, np.ndarray)) or not hasattr(grads, "__iter__"):
            raise TypeError(f"{type(self).__name__}.step: pass a list of gradients (one per parameter), got "
                            f"{type(grads).__name__}")
        grads = list(grads)
        if len(grads) != len(self.params):
            raise ValueError(f"{type(self).__name__}.step: got {len(grads)} gradients for {len(self.params)} "
                             "parameters")
        arrays = []
        ndarray = np.ndarray
        for i, (p, g) in enumerate(zip(self.params, grads, strict=True)):
            if g is None or p._is_parameter and p._ag is None:  # no gradient, or frozen (not requires_grad): as torch
                arrays.append(None)
                continue
            data = p._data
            if type(g) is Tensor and g._var is None:  # value_and_grad's gradients: concrete Tensors
                g = g._data
            if not (type(g) is ndarray and type(data) is ndarray and g.dtype == data.dtype):
                g = as_array(g, data)  # a Tensor, a list, another dtype or array module
            if g.shape != data.shape:
                raise ValueError(f"{type(self).__name__}.step: gradient {i} has shape {tuple(g.shape)} but "
                                 f"parameter {i} ({p._name or 'unnamed'}) has shape {p.shape}")
            if not getattr(getattr(data, "flags", None), "writeable", True):  # before any parameter is updated
                raise ValueError(f"{type(self).__name__}.step: parameter {i} ({p._name or 'unnamed'}) is read-only "
                                 "(its array's writeable flag is False), so it cannot be updated in place")
            arrays.append(g)
        return arrays

    def _update_each(self, arrays: list) -> None:
        groups, group_of, skipped, update = self.param_groups, self._group_of, self.skipped, self._update
        for i, (p, g, state) in enumerate(zip(self.params, arrays, self.state, strict=True)):
            if g is None:
                skipped[i] += 1
                continue
            data = p._data
            if state:
                for k, v in state.items():  # state made before model.to(device) follows its parameter there
                    if hasattr(v, "shape") and type(v) is not type(data):
                        state[k] = as_array(v, data)
            update(data, g, state, self.step_count - skipped[i], groups[group_of[i]])

    def _update_all(self, arrays: list) -> bool:
        """Update every parameter at once (numba's loop over flat state, or a subclass's batched form, when one
        applies), or False for the per-parameter `_update`s."""
        return self._flat_kind is not None and flat.update(self, arrays)

    def _flat_names(self, group: dict) -> tuple:
        """The state entries a parameter of this group has (those of `_flat_order` its options use)."""
        return tuple(n for n in self._flat_order if n)

    def _flat_coefs(self, group: dict, t: int) -> tuple:
        """The numba loop's coefficient row (ir.runtime.numba_adam.ROWS) for this group at step t."""
        raise NotImplementedError

    def _flat_init(self, group: dict, name: str) -> float:
        """The value a state entry starts from (zeros unless a subclass says otherwise)."""
        return 0.0

    def _by_name(self, grads: Mapping) -> list:
        """The gradients of a dict in the parameters' order. Names come from the constructor's dict or
        named pairs; for a plain list, from the names the parameters' modules gave them (when unique)."""
        cls = type(self).__name__
        names = self.names
        if names is None:
            names = [p._name for p in self.params]
            if "" in names or len(set(names)) != len(names):
                raise TypeError(f"{cls}.step: got a dict of gradients, but the parameters have no unique names "
                                f"to match its keys to; build the optimizer from the same dict (or "
                                f"model.named_parameters()) that was passed as wrt")
        missing = [n for n in names if n not in grads]
        unexpected = [str(k) for k in grads if k not in set(names)]
        if missing or unexpected:
            raise ValueError(f"{cls}.step: the gradients' keys do not match the parameters' names: missing "
                             f"{missing}, unexpected {unexpected}")
        return [grads[n] for n in names]

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clear the parameters' `.grad` (what backward() accumulates): None by default, as torch's, or zeros
        in place with set_to_none=False. Gradients passed to step(grads) are not touched."""
        zero_grads(self.params, set_to_none)

    def _dot_grads(self) -> list:
        """[p.grad for p in params] for step(); each parameter's buffer counts a write (a backward recorded
        before this step and run after it raises, as torch's version counter makes it)."""
        grads = []
        for p in self.params:
            grads.append(p.grad)
            if p.grad is not None:
                bump(p._data)
        return grads

    def _temp(self, p, k: int = 0):
        """A scratch array shaped like p (the k-th of its kind), shared by all parameters: updates write
        their intermediate products into it instead of allocating a temporary per parameter and step."""
        view = self._views.get((type(p), p.dtype, k, p.shape))
        if view is not None:
            return view
        key = (type(p), p.dtype, k)
        buf = self._scratch.get(key)
        if buf is None or buf.size < p.size:
            size = max(q._data.size for q in self.params if q._data is not None and q._data.dtype == p.dtype)
            buf = self._scratch[key] = array_module_of(p).empty(max(size, p.size), p.dtype)
            self._views.clear()  # views of the old buffer
        view = self._views[type(p), p.dtype, k, p.shape] = buf[:p.size].reshape(p.shape)
        return view

    @abstractmethod
    def _update(self, p, g, state: dict, t: int, group: dict) -> None:
        """Update parameter array p in place from gradient g, with this parameter's state, its own step number
        t (the steps at which it had a gradient, this one included) and its group's options."""

    def state_dict(self) -> dict:
        """torch's layout: {"state": {param index: {"step", "exp_avg", ...}}, "param_groups": [{options,
        "params": [indices]}]}, NumPy copies (also for GPU parameters); nn.save stores it. See nn/optim/state.py."""
        return state_dict(self)

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore the options, per-parameter step counts and state from `state_dict()`'s output, its nn.load
        round trip, or a real torch optimizer's state dict with tensors turned into NumPy arrays."""
        self._plan = None
        load_state_dict(self, state_dict)


def _check_nonnegative(opt, where: str, **values) -> None:
    for name, v in values.items():
        if not v >= 0.0:
            raise ValueError(f"{type(opt).__name__}: {name} must be >= 0, got {v}" + (f" ({where})" if where else ""))


class SGD(Optimizer):
    """Stochastic gradient descent with optional momentum (torch.optim.SGD's rule):

    g += weight_decay * p;  buf = momentum * buf + (1 - dampening) * g  (buf = g at the first step);
    g = g + momentum * buf if nesterov else buf;  p -= lr * g   (g = -g first with maximize=True)
    """

    counts_steps = False

    # DESIGN.md's positional order (momentum, weight_decay, nesterov); torch's dampening comes by keyword
    def __init__(self, params, lr: float = 1e-3, momentum: float = 0.0, weight_decay: float = 0.0,
                 nesterov: bool = False, *, dampening: float = 0.0, maximize: bool = False, foreach=None,
                 differentiable: bool = False, fused=None):
        refuse_differentiable(self, differentiable)  # foreach/fused pick torch kernels: one implementation here
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                                      nesterov=nesterov, maximize=maximize))
        # the parameters' arrays as sgd_all's 1-D views (numba_optim) and their scratch views, per set of arrays
        self._flat_key, self._flat, self._temps = None, None, None
        self._datas, self._plain_for, self._plain_lr = None, None, None  # _update_all's choice for a plan

    def __getstate__(self):
        # a copy (copy.deepcopy, pickle) makes its own 1-D views at its next step: copied, they are arrays of their
        # own, and a fresh process may give its parameters the ids in _flat_key
        state = self.__dict__.copy()
        state["_flat_key"] = state["_flat"] = state["_temps"] = state["_datas"] = state["_plain_for"] = None
        return state

    def _check_options(self, group, where):
        _check_nonnegative(self, where, lr=group["lr"], momentum=group["momentum"], weight_decay=group["weight_decay"])
        if group["nesterov"] and (group["momentum"] <= 0 or group["dampening"] != 0):
            raise ValueError("SGD: nesterov momentum needs momentum > 0 and dampening = 0"
                             + (f" ({where})" if where else ""))

    def _update_all(self, arrays):
        # plain SGD in one group with every gradient there: numba's loop over all parameters in one call, or
        # NumPy's two ufuncs per parameter with the scratch views looked up once. The choice holds while the
        # step's plan (the same parameter arrays and option values) does.
        plan = self._plan
        if plan is None or self._plain_for is not plan:
            self._plain_for = plan
            self._plain_lr = lr = self._plain(arrays)
            if lr is None:
                return False
            datas = self._datas = [p._data for p in self.params]
            key = tuple(map(id, datas))
            if self._flat_key != key:  # the parameters' arrays changed (or the first step): their views again
                self._flat_key, self._flat = key, numba_optim.flat_params(datas)
                self._temps = [self._temp(p) for p in datas] if all(type(p) is np.ndarray for p in datas) else None
        else:
            lr = self._plain_lr
            if lr is None:
                return False
        if self._flat is not None and numba_optim.sgd_all(self._flat, arrays, lr, plan is not None):
            return True
        if self._temps is None:
            return False
        multiply, subtract = np.multiply, np.subtract
        for p, g, tmp in zip(self._datas, arrays, self._temps, strict=True):  # p -= lr * g, without the lookups
            subtract(p, multiply(g, lr, tmp), p)
        return True

    def _plain(self, arrays) -> float | None:
        """The lr where this step is plain SGD (one group, no momentum, decay or maximize, every gradient
        there), else None."""
        if len(self.param_groups) != 1:
            return None
        group = self.param_groups[0]
        if group["momentum"] or group["weight_decay"] or group["maximize"] or any(a is None for a in arrays):
            return None
        return group["lr"]

    def _update(self, p, g, state, t, group):
        momentum, weight_decay = group["momentum"], group["weight_decay"]
        buf = state.get("momentum_buffer")
        first = momentum and buf is None and type(p) is np.ndarray
        if first:
            buf = np.empty_like(p)
        if numba_optim.sgd(p, g, buf if momentum else None, group["lr"], momentum, group["dampening"], weight_decay,
                           group["nesterov"], group["maximize"], first):  # one numba loop: the same values
            if first:
                state["momentum_buffer"] = buf
            return
        if group["maximize"]:
            g = -g
        if weight_decay:
            g = g + weight_decay * p
        if momentum:
            buf = state.get("momentum_buffer")
            if buf is None:
                buf = state["momentum_buffer"] = g.copy()
            else:
                buf *= momentum
                buf += (1 - group["dampening"]) * g
            g = g + momentum * buf if group["nesterov"] else buf
        p -= array_module_of(p).multiply(g, group["lr"], out=self._temp(p))  # p -= lr * g, without a temporary


class Adam(Optimizer):
    """Adam (torch.optim.Adam's rule): g += weight_decay * p; m, v moving averages of g and g*g;
    p -= lr / (1 - beta1**t) * m / (sqrt(v) / sqrt(1 - beta2**t) + eps), t the parameter's own step count.
    amsgrad uses the running maximum of v (state "max_exp_avg_sq"); maximize negates g first;
    decoupled_weight_decay=True is AdamW's decay."""

    _flat_kind, _flat_order = "adam", ("exp_avg", "exp_avg_sq", "max_exp_avg_sq")
    _flat_joint = ("exp_avg", "exp_avg_sq")

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8, weight_decay: float = 0.0,
                 amsgrad: bool = False, *, foreach=None, maximize: bool = False, capturable: bool = False,
                 differentiable: bool = False, fused=None, decoupled_weight_decay: bool = False):
        refuse_differentiable(self, differentiable)  # foreach/fused/capturable pick torch kernels, no numbers
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                                      maximize=maximize, decoupled_weight_decay=decoupled_weight_decay))

    def _check_options(self, group, where):
        _check_nonnegative(self, where, lr=group["lr"], eps=group["eps"], weight_decay=group["weight_decay"])
        betas = group["betas"]
        if len(betas) != 2 or not all(0.0 <= b < 1.0 for b in betas):
            raise ValueError(f"{type(self).__name__}: betas must be two numbers in [0, 1), got {betas}"
                             + (f" ({where})" if where else ""))
        group["betas"] = tuple(float(b) for b in betas)

    def _flat_names(self, group):
        return self._flat_order if group["amsgrad"] else self._flat_order[:2]

    def _flat_coefs(self, group, t):  # _update's factors, computed as it computes them
        beta1, beta2 = group["betas"]
        lr, wd = group["lr"], group["weight_decay"]
        mode = 0 if not wd else 2 if group["decoupled_weight_decay"] else 1
        return (group["maximize"], mode, wd, 1 - lr * wd, 1 - beta1, beta2, 1 - beta2, math.sqrt(1 - beta2 ** t),
                group["eps"], lr / (1 - beta1 ** t), group["amsgrad"])

    def _update(self, p, g, state, t, group):
        beta1, beta2 = group["betas"]
        lr, weight_decay = group["lr"], group["weight_decay"]
        if group["maximize"]:
            g = -g
        if weight_decay and group["decoupled_weight_decay"]:
            p *= 1 - lr * weight_decay
        elif weight_decay:
            g = g + weight_decay * p
        if not state:
            xp = array_module_of(p)
            state["exp_avg"], state["exp_avg_sq"] = xp.zeros_like(p), xp.zeros_like(p)
        if group["amsgrad"] and "max_exp_avg_sq" not in state:
            state["max_exp_avg_sq"] = array_module_of(p).zeros_like(p)
        m, v = state["exp_avg"], state["exp_avg_sq"]
        xp = array_module_of(p)
        s, denom = self._temp(p), self._temp(p, 1)  # the same operations in the same order, into scratch
        s = xp.subtract(g, m, out=s)
        s *= 1 - beta1
        m += s  # m += (1 - beta1) * (g - m)
        v *= beta2
        s = xp.multiply(g, 1 - beta2, out=s)
        s *= g
        v += s  # v += (1 - beta2) * g * g
        step_size = lr / (1 - beta1 ** t)
        if group["amsgrad"]:
            v = xp.maximum(state["max_exp_avg_sq"], v, out=state["max_exp_avg_sq"])
        denom = xp.sqrt(v, out=denom)
        denom /= math.sqrt(1 - beta2 ** t)
        denom += group["eps"]  # v ** 0.5 / sqrt(1 - beta2 ** t) + eps
        s = xp.multiply(m, step_size, out=s)
        s /= denom
        p -= s  # p -= step_size * m / denom


class AdamW(Adam):
    """Adam with decoupled weight decay (torch.optim.AdamW's rule): p *= 1 - lr * weight_decay, then Adam."""

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8, weight_decay: float = 0.01,
                 amsgrad: bool = False, *, maximize: bool = False, foreach=None, capturable: bool = False,
                 differentiable: bool = False, fused=None):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize,
                         differentiable=differentiable, decoupled_weight_decay=True)


def clip_grad_norm(grads, max_norm: float):
    """Scale gradients so their global L2 norm is at most max_norm; returns (clipped_grads, total_norm).

    Functional, unlike torch.nn.utils.clip_grad_norm_: here gradients are values returned by
    autodiff.grad, not `.grad` attributes, so the clipped list is returned and the inputs are untouched.
    A dict of gradients (from `grad(wrt=dict)`) gives a dict with the same keys; a None gradient stays None.

    >>> import numpy as np
    >>> clipped, norm = clip_grad_norm([np.array([3.0, 4.0])], max_norm=1.0)
    >>> norm, clipped[0].round(3).tolist()
    (5.0, [0.6, 0.8])
    """
    if isinstance(grads, Mapping):
        clipped, total = clip_grad_norm(list(grads.values()), max_norm)
        return dict(zip(grads, clipped, strict=True)), total
    arrays = [None if g is None else as_array(g) for g in grads]  # None: no gradient, skipped as torch's
    total = math.sqrt(sum(float((a.astype("float64") ** 2).sum()) for a in arrays if a is not None))
    coef = max_norm / (total + 1e-6)
    if coef >= 1.0:
        return arrays, total
    return [None if a is None else a * coef for a in arrays], total


__all__ = ["SGD", "Adam", "AdamW", "Optimizer", "clip_grad_norm"]
