"""SGD, Adam and AdamW with PyTorch's update rules, updating parameters in place from given gradients."""
from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping

import numpy as np

from nn.module import zero_grads
from tracer import Tensor
from tracer.autograd import bump
from tracer.tensor import array_module_of


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


def _named(params) -> tuple[list[str] | None, list]:
    """(names, tensors) from a dict {name: tensor}, (name, tensor) pairs (`named_parameters()`) or
    plain tensors (names None)."""
    if isinstance(params, Mapping):
        return [str(k) for k in params], list(params.values())
    items = list(params)
    if items and all(isinstance(i, tuple) and len(i) == 2 and isinstance(i[0], str) for i in items):
        return [n for n, _ in items], [p for _, p in items]
    return None, items


class Optimizer(ABC):
    """Base class: holds the parameters (in order), `lr`, the step count and per-parameter state arrays.

    `params` is a list of tensors, a dict {name: tensor} or `model.named_parameters()`; `step` takes the
    gradients as a list in the parameters' order or as the dict that `autodiff.grad(wrt=dict)` returns.

    >>> import numpy as np, tracer
    >>> w = tracer.tensor(np.ones(2))
    >>> opt = SGD({"w": w}, lr=0.5)
    >>> opt.step({"w": np.array([1.0, 2.0])})
    >>> w.numpy().tolist()
    [0.5, 0.0]
    """

    def __init__(self, params, lr: float):
        self.names, self.params = _named(params)
        if self.names is not None and len(set(self.names)) != len(self.names):
            raise ValueError(f"{type(self).__name__}: a parameter name appears more than once")
        if not self.params:
            raise ValueError(f"{type(self).__name__}: got an empty parameter list")
        if len({id(p) for p in self.params}) != len(self.params):
            raise ValueError(f"{type(self).__name__}: a parameter appears more than once")
        for i, p in enumerate(self.params):
            if not isinstance(p, Tensor) or p._data is None or p.dtype not in ("float16", "float32", "float64"):
                raise TypeError(f"{type(self).__name__}: parameter {i} must be a concrete floating-point Tensor")
        _check_nonnegative(self, lr=lr)
        self.lr = float(lr)
        self.step_count = 0
        self.state: list[dict] = [{} for _ in self.params]
        self._scratch: dict = {}  # (array module, dtype, k) -> a flat buffer as large as the largest parameter
        self._views: dict = {}  # (array type, dtype, k, shape) -> that buffer's view in the shape

    def step(self, grads=None) -> None:
        """Update every parameter in place from `grads`: a list in the order of the parameters, or a
        dict keyed by the parameters' names; with no argument, from each parameter's `.grad` (torch's form:
        a parameter whose .grad is None is skipped, its state untouched)."""
        if grads is None:
            grads = self._dot_grads()
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
        for i, (p, g) in enumerate(zip(self.params, grads, strict=True)):
            if g is None or p._is_parameter and not p.requires_grad:  # frozen or no gradient: left alone, as torch
                arrays.append(None)
                continue
            data = p._data
            if type(g) is Tensor and g._var is None:  # value_and_grad's gradients: concrete Tensors
                g = g._data
            if not (type(g) is np.ndarray and type(data) is np.ndarray and g.dtype == data.dtype):
                g = as_array(g, data)  # a Tensor, a list, another dtype or array module
            if g.shape != data.shape:
                raise ValueError(f"{type(self).__name__}.step: gradient {i} has shape {tuple(g.shape)} but "
                                 f"parameter {i} ({p._name or 'unnamed'}) has shape {p.shape}")
            arrays.append(g)
        self.step_count += 1
        for p, g, state in zip(self.params, arrays, self.state, strict=True):
            if g is not None:
                for k, v in state.items():  # state made before model.to(device) follows its parameter there
                    if hasattr(v, "shape") and type(v) is not type(p._data):
                        state[k] = as_array(v, p._data)
                self._update(p._data, g, state)

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
    def _update(self, p, g, state: dict) -> None:
        """Update parameter array p in place from gradient g, with this parameter's state."""

    def state_dict(self) -> dict:
        """{"lr", "step", "state": {"<param index>": {name: array}}}: copies, savable with nn.save (NumPy arrays,
        also for parameters on a GPU; load_state_dict puts them back on the parameters' device)."""
        state = {str(i): {k: v.copy() if isinstance(v, np.ndarray) else v.get() for k, v in s.items()}
                 for i, s in enumerate(self.state)}
        return {"lr": self.lr, "step": self.step_count, "state": state}

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore lr, the step count and the state arrays (hyperparameters come from the constructor)."""
        saved = state_dict.get("state", {})
        problems = []
        new_state: list[dict] = [{} for _ in self.params]
        for key, entry in saved.items():
            if not (str(key).isdigit() and int(key) < len(self.params)):
                problems.append(f"state for parameter {key!r}, but there are {len(self.params)} parameters")
                continue
            p = self.params[int(key)]
            for name, value in entry.items():
                value = as_array(value, p._data)
                if value.shape != p.shape:
                    problems.append(f"{name} of parameter {key}: shape {tuple(value.shape)}, expected {p.shape}")
                new_state[int(key)][name] = value.copy()
        if problems:
            raise ValueError(f"{type(self).__name__}.load_state_dict: " + "; ".join(problems))
        self.lr = float(state_dict["lr"])
        self.step_count = int(state_dict["step"])
        self.state = new_state


def _check_nonnegative(opt, **values) -> None:
    for name, v in values.items():
        if not v >= 0.0:
            raise ValueError(f"{type(opt).__name__}: {name} must be >= 0, got {v}")


class SGD(Optimizer):
    """Stochastic gradient descent with optional momentum (torch.optim.SGD's rule):

    g += weight_decay * p;  buf = momentum * buf + (1 - dampening) * g  (buf = g at the first step);
    g = g + momentum * buf if nesterov else buf;  p -= lr * g
    """

    # DESIGN.md's positional order (momentum, weight_decay, nesterov); torch's dampening comes by keyword
    def __init__(self, params, lr: float, momentum: float = 0.0, weight_decay: float = 0.0, nesterov: bool = False,
                 *, dampening: float = 0.0):
        super().__init__(params, lr)
        _check_nonnegative(self, momentum=momentum, weight_decay=weight_decay)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("SGD: nesterov momentum needs momentum > 0 and dampening = 0")
        self.momentum, self.dampening, self.weight_decay, self.nesterov = momentum, dampening, weight_decay, nesterov

    def _update(self, p, g, state):
        if self.weight_decay:
            g = g + self.weight_decay * p
        if self.momentum:
            buf = state.get("momentum_buffer")
            if buf is None:
                buf = state["momentum_buffer"] = g.copy()
            else:
                buf *= self.momentum
                buf += (1 - self.dampening) * g
            g = g + self.momentum * buf if self.nesterov else buf
        p -= array_module_of(p).multiply(g, self.lr, out=self._temp(p))  # p -= lr * g, without a temporary


class Adam(Optimizer):
    """Adam (torch.optim.Adam's rule): g += weight_decay * p; m, v moving averages of g and g*g;
    p -= lr / (1 - beta1**t) * m / (sqrt(v) / sqrt(1 - beta2**t) + eps)."""

    decoupled = False

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8, weight_decay: float = 0.0):
        super().__init__(params, lr)
        _check_nonnegative(self, eps=eps, weight_decay=weight_decay)
        if not all(0.0 <= b < 1.0 for b in betas) or len(betas) != 2:
            raise ValueError(f"{type(self).__name__}: betas must be two numbers in [0, 1), got {betas}")
        self.betas, self.eps, self.weight_decay = tuple(float(b) for b in betas), eps, weight_decay

    def _update(self, p, g, state):
        beta1, beta2 = self.betas
        if self.weight_decay and self.decoupled:
            p *= 1 - self.lr * self.weight_decay
        elif self.weight_decay:
            g = g + self.weight_decay * p
        if not state:
            xp = array_module_of(p)
            state["exp_avg"], state["exp_avg_sq"] = xp.zeros_like(p), xp.zeros_like(p)
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
        t = self.step_count
        step_size = self.lr / (1 - beta1 ** t)
        denom = xp.sqrt(v, out=denom)
        denom /= math.sqrt(1 - beta2 ** t)
        denom += self.eps  # v ** 0.5 / sqrt(1 - beta2 ** t) + eps
        s = xp.multiply(m, step_size, out=s)
        s /= denom
        p -= s  # p -= step_size * m / denom


class AdamW(Adam):
    """Adam with decoupled weight decay (torch.optim.AdamW's rule): p *= 1 - lr * weight_decay, then Adam."""

    decoupled = True

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8, weight_decay: float = 0.01):
        super().__init__(params, lr, betas, eps, weight_decay)


def clip_grad_norm(grads, max_norm: float):
    """Scale gradients so their global L2 norm is at most max_norm; returns (clipped_grads, total_norm).

    Functional, unlike torch.nn.utils.clip_grad_norm_: here gradients are values returned by
    autodiff.grad, not `.grad` attributes, so the clipped list is returned and the inputs are untouched.
    A dict of gradients (from `grad(wrt=dict)`) gives a dict with the same keys.

    >>> import numpy as np
    >>> clipped, norm = clip_grad_norm([np.array([3.0, 4.0])], max_norm=1.0)
    >>> norm, clipped[0].round(3).tolist()
    (5.0, [0.6, 0.8])
    """
    if isinstance(grads, Mapping):
        clipped, total = clip_grad_norm(list(grads.values()), max_norm)
        return dict(zip(grads, clipped, strict=True)), total
    arrays = [as_array(g) for g in grads]
    total = math.sqrt(sum(float((a.astype("float64") ** 2).sum()) for a in arrays))
    coef = max_norm / (total + 1e-6)
    if coef >= 1.0:
        return arrays, total
    return [a * coef for a in arrays], total


__all__ = ["SGD", "Adam", "AdamW", "Optimizer", "clip_grad_norm"]
