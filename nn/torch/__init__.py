"""PyTorch's namespace on tracegrad: `import nn.torch as torch`, and a torch program's other imports map one to
one (docs/from-pytorch.md opens with the table): `torch.nn` is the nn package, `torch.optim` nn.optim,
`torch.utils.data` nn.data, and torch's tensor functions, dtypes, grad modes, devices, seeds, save/load,
cuda, backends, autograd, amp, distributed, jit, linalg, special and testing are here, with torch's meaning.
A torch name tracegrad lacks raises an AttributeError naming it and the nearest tracegrad spelling.

>>> import nn.torch as torch
>>> x = torch.tensor([[1.0, 5.0], [7.0, 2.0]])
>>> x.max(dim=1).indices.tolist(), torch.max(x, 1).values.tolist(), x.to(torch.float64).dtype == torch.double
([1, 0], [5.0, 7.0], True)
"""
import math

import nn  # noqa: F401  (torch.nn is the nn package)
import tracer
from autodiff import is_anomaly_enabled  # noqa: F401  (torch's)
from autodiff import set_detect_anomaly as set_anomaly_enabled  # noqa: F401  (torch's)
from tracer import device, enable_grad, inference_mode, is_grad_enabled, no_grad, set_grad_enabled  # noqa: F401

from .. import data as _data  # noqa: F401  (torch.utils.data)
from .. import optim, parallel  # noqa: F401  (torch.optim; torch.nn.parallel)
from . import (  # noqa: F401
    amp,
    autograd,
    backends,
    cuda,
    distributed,
    distributions,
    hints,
    jit,
    linalg,
    multiprocessing,
    onnx,
    random,
    special,
    testing,
    utils,
)
from .dtypes import *  # noqa: F401,F403
from .serialization import load, save  # noqa: F401
from .settings import *  # noqa: F401,F403
from .tensors import FUNCTIONS as _FUNCTIONS

globals().update(_FUNCTIONS)  # torch's tensor functions, with torch's meaning (nn/torch/tensors.py)
autocast = amp.autocast

Size = tuple  # x.shape and x.size() are tuples; torch.Size((2, 3)) == (2, 3)
e, pi, inf, nan, newaxis = math.e, math.pi, math.inf, math.nan, None
TraceError = tracer.TraceError
__version__ = "2.13.0+tracegrad"  # the torch release whose API this follows (feature checks compare it)

__getattr__ = hints.module_getattr("nn.torch", "torch", globals())
