"""Reverse-mode automatic differentiation: the Gradient pass, its VJP rules, and grad/value_and_grad."""
__tracegrad__ = True  # the marker ir/siblings.py looks for in each of tracegrad's four packages
try:
    from ir import siblings as _siblings  # noqa: F401, I001  (first: a foreign `ir` raises there)
except ImportError as _e:  # an `ir` without tracegrad's files: another project's, earlier on sys.path
    import ir as _ir
    raise ImportError(f"the top-level package `ir` found at {getattr(_ir, '__file__', _ir)} is not tracegrad's; "
                      "remove it (pip uninstall it, or take its folder off sys.path), then pip install "
                      "--force-reinstall tracegrad", name="ir") from _e
from . import backward as _backward  # noqa: F401  (installs loss.backward() into tracer)
from .anomaly import detect_anomaly, is_anomaly_enabled, set_detect_anomaly
from .api import TraceMismatchError, grad, gradcheck, value_and_grad
from .gradient import Gradient
from .planner import plan_checkpoints
from .rules import VJPS, register_vjp
from .step_cache import StepRemadeWarning

__all__ = ["Gradient", "StepRemadeWarning", "TraceMismatchError", "VJPS", "detect_anomaly", "grad", "gradcheck",
           "is_anomaly_enabled", "plan_checkpoints", "register_vjp", "set_detect_anomaly", "value_and_grad"]
