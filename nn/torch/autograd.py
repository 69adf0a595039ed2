"""torch.autograd on tracegrad: `grad`, `backward`, the grad modes, `Variable` (torch's old wrapper: the
tensor itself), `gradcheck`. A custom `Function` (forward and backward written in Python) cannot be
recorded: backward() compiles the recorded IR's adjoint, which has no place for Python code; subclassing
works, calling `.apply` raises a NotImplementedError that says what to do instead."""
from __future__ import annotations

import numpy as np

import tracer
from tracer.autograd import backward, grad
from tracer.grad_mode import enable_grad, inference_mode, is_grad_enabled, no_grad, set_grad_enabled

from . import hints as _hints

__getattr__ = _hints.module_getattr("nn.torch.autograd", "torch.autograd", globals())


def Variable(data, requires_grad: bool = False, volatile: bool = False):  # noqa: N802 - torch's spelling
    """torch's deprecated Variable: the tensor itself (a new leaf requiring grad when asked)."""
    t = data if isinstance(data, tracer.Tensor) else tracer.tensor(data)
    return t.requires_grad_() if requires_grad and not t.requires_grad else t


class FunctionCtx:
    """The `ctx` a custom Function's forward would receive."""

    def save_for_backward(self, *tensors) -> None:
        self.saved_tensors = tensors

    def mark_non_differentiable(self, *tensors) -> None:
        pass

    def set_materialize_grads(self, value: bool) -> None:
        pass


class Function:
    """torch.autograd.Function: defining a subclass works; `MyFn.apply(...)` raises NotImplementedError (see
    the module docstring)."""

    @classmethod
    def apply(cls, *args, **kwargs):
        raise NotImplementedError(
            f"torch.autograd.Function ({cls.__name__}.apply): a backward written in Python cannot be recorded by "
            "tracegrad, which compiles the adjoint of the recorded IR. Write the forward with tracer ops (each has "
            "a VJP rule, so the gradient comes by itself; tracer.stop_gradient cuts it, tracer.where(mask, a, b) "
            "routes it), or add an IR op with its rule (autodiff.register_vjp)")

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("Function.forward must be overridden")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("Function.backward must be overridden")


def gradcheck(func, inputs, *, eps: float = 1e-6, atol: float = 1e-5, rtol: float = 1e-3, **kwargs) -> bool:
    """Finite differences against the gradients of func's output (summed), in float64 (autodiff.gradcheck)."""
    import autodiff

    inputs = (inputs,) if isinstance(inputs, (tracer.Tensor, np.ndarray)) else tuple(inputs)

    def scalar(*args):
        out = func(*args)
        out = out[0] if isinstance(out, (tuple, list)) else out
        return tracer.sum(out)
    return autodiff.gradcheck(scalar, *[np.asarray(a, dtype="float64") if not isinstance(a, tracer.Tensor) else a
                                        for a in inputs], eps=eps, rtol=rtol, atol=atol)


def detect_anomaly(check_nan: bool = True):
    """torch.autograd.detect_anomaly(check_nan=True): autodiff.detect_anomaly (check_nan=False: off, as
    tracegrad records no extra tracebacks)."""
    import autodiff

    return autodiff.detect_anomaly(bool(check_nan))


def is_anomaly_enabled() -> bool:
    """torch.autograd.is_anomaly_enabled(): whether autodiff.detect_anomaly's checks are on."""
    import autodiff
    return autodiff.is_anomaly_enabled()


def set_detect_anomaly(mode: bool, check_nan: bool = True):
    """torch.autograd.set_detect_anomaly(mode): autodiff.set_detect_anomaly (also a context manager)."""
    import autodiff

    return autodiff.set_detect_anomaly(bool(mode) and bool(check_nan))


__all__ = ["Function", "FunctionCtx", "Variable", "backward", "detect_anomaly", "enable_grad", "grad", "gradcheck",
           "inference_mode", "is_anomaly_enabled", "is_grad_enabled", "no_grad", "set_detect_anomaly",
           "set_grad_enabled"]
