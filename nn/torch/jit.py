"""torch.jit on tracegrad: `script` and `trace` return the function or module as it is (tracegrad records
and compiles a step itself: loss.backward() caches the compiled adjoint, autodiff.value_and_grad the whole
step); `ignore`, `unused`, `export` are the identity decorators they are in torch. Saving a scripted program
needs TorchScript: jit.save and jit.load raise."""
from __future__ import annotations


def script(obj=None, optimize=None, _frames_up=0, _rcb=None, example_inputs=None):
    """The function or module itself."""
    return obj


def trace(func, example_inputs=None, *args, **kwargs):
    """The function or module itself (its example inputs are not needed)."""
    return func


def ignore(drop=False, **kwargs):
    return drop if callable(drop) else (lambda fn: fn)


def unused(fn):
    return fn


def export(fn):
    return fn


def is_scripting() -> bool:
    return False


def is_tracing() -> bool:
    return False


def save(m, f, _extra_files=None):
    raise NotImplementedError("torch.jit.save: TorchScript archives are not supported; save the weights with "
                              "torch.save(model.state_dict(), path) (nn.save)")


def load(f, map_location=None, _extra_files=None):
    raise NotImplementedError("torch.jit.load: TorchScript archives are not supported; rebuild the model class and "
                              "load_state_dict(torch.load(path))")


class ScriptModule:  # isinstance checks only: nothing is ever scripted
    pass


Final = object

__all__ = ["Final", "ScriptModule", "export", "ignore", "is_scripting", "is_tracing", "load", "save", "script",
           "trace", "unused"]
