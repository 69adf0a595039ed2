"""Eager tensors with a PyTorch-like API, and tracing into tracegrad's IR."""
__tracegrad__ = True  # the marker ir/siblings.py looks for in each of tracegrad's four packages
import numpy as np

try:
    from ir import siblings as _siblings  # noqa: F401  (first: a foreign `ir` raises there)
except ImportError as _e:  # an `ir` without tracegrad's files: another project's, earlier on sys.path
    import ir as _ir
    raise ImportError(f"the top-level package `ir` found at {getattr(_ir, '__file__', _ir)} is not tracegrad's; "
                      "remove it (pip uninstall it, or take its folder off sys.path), then pip install "
                      "--force-reinstall tracegrad", name="ir") from _e
from ir.types import check_dtype

from . import (
    autograd,
    cuda,  # noqa: F401  (tracer.cuda.is_available(), device_count(), CudaUnavailableError)
    decomp,  # noqa: F401  (tracer.decomp: cholesky, solve_triangular)
    gamma_fns,  # noqa: F401  (tracer.gamma_fns.standard_gamma)
    linalg,  # noqa: F401  (tracer.linalg: torch.linalg's spellings)
    tensor_grad,
)
from . import bitwise as _bitwise
from . import create as _create
from . import data_dependent as _data_dependent
from . import index_ops as _index_ops
from . import inplace as _inplace
from . import inplace_scatter as _inplace_scatter
from . import inplace_unary as _inplace_unary
from . import math as _math
from . import nan_quantiles as _nan_quantiles
from . import nn_functions as _nn_functions
from . import placement as _placement
from . import products as _products
from . import shape as _shape
from . import sort_ops as _sort_ops
from . import special_math as _special_math
from . import torch_extra as _torch_extra
from . import torch_methods as _torch_methods
from . import view_ops as _view_ops
from .attention import scaled_dot_product_attention
from .bitwise import *  # noqa: F401,F403
from .create import *  # noqa: F401,F403
from .data_dependent import *  # noqa: F401,F403
from .device import device
from .gamma_fns import *  # noqa: F401,F403  (lgamma, digamma, polygamma)
from .grad_mode import enable_grad, inference_mode, is_grad_enabled, no_grad, set_grad_enabled
from .index_ops import *  # noqa: F401,F403
from .inplace_scatter import *  # noqa: F401,F403
from .math import (
    abs,
    add,
    astype,
    cos,
    divide,
    equal,
    exp,
    floor_divide,
    gelu,
    greater,
    greater_equal,
    less,
    less_equal,
    log,
    log_sigmoid,
    maximum,
    minimum,
    multiply,
    negative,
    not_equal,
    power,
    promote_types,
    relu,
    remainder,
    result_type,
    rsqrt,
    sigmoid,
    silu,
    sin,
    sqrt,
    stop_gradient,
    subtract,
    tanh,
    where,
)
from .nan_quantiles import *  # noqa: F401,F403
from .nn_functions import *  # noqa: F401,F403  (each module lists its public names in __all__)
from .products import *  # noqa: F401,F403
from .rng import manual_seed
from .shape import *  # noqa: F401,F403
from .sort_ops import *  # noqa: F401,F403
from .special_math import *  # noqa: F401,F403
from .tensor import Tensor, TraceError, dtype_name
from .torch_extra import *  # noqa: F401,F403  (isnan, logical_*, clamp_min, multinomial, ...)
from .torch_methods import *  # noqa: F401,F403
from .trace import Spec, Traced, checkpoint, guard, spec, trace, trace_function, unflatten_output
from .view_ops import *  # noqa: F401,F403


def tensor(data, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A concrete tensor: Python floats become float32, NumPy arrays keep their dtype; `device="cuda"` puts it
    on the GPU (CuPy), and a CuPy array stays on its GPU unless `device="cpu"`; `requires_grad=True` makes it a
    leaf whose ops are recorded for backward().

    >>> import numpy as np
    >>> tensor([1.0, 2.0]).dtype, tensor(np.zeros(2)).dtype, str(tensor([1.0], device="cpu").device)
    ('float32', 'float64', 'cpu')
    """
    return tensor_grad.made(_placement.place(Tensor(data, dtype), device, "tensor"), requires_grad)


def from_numpy(array) -> Tensor:
    """A tensor sharing `array`'s memory, as torch.from_numpy: writes to either show in the other.

    >>> import numpy as np
    >>> a = np.zeros(2, "float32")
    >>> t = from_numpy(a)
    >>> a[0] = 5.0
    >>> float(t.numpy()[0])
    5.0
    """
    if not isinstance(array, np.ndarray):
        raise TypeError(f"from_numpy: expected a numpy.ndarray, got {type(array).__name__}")
    check_dtype(dtype_name(array.dtype), "from_numpy")
    return Tensor.wrap(array)


def _install_methods():
    tables = (_math.OPERATORS, _math.METHODS, _inplace.METHODS, _shape.OPERATORS, _shape.METHODS,
              _nn_functions.METHODS, _torch_methods.OPERATORS, _torch_methods.METHODS, _bitwise.OPERATORS,
              _bitwise.METHODS, _special_math.METHODS, tensor_grad.PROPERTIES, tensor_grad.METHODS)
    for table in tables:
        for name, fn in table.items():
            setattr(Tensor, name, fn)


_install_methods()
for _table in (_index_ops.METHODS, _sort_ops.METHODS, _view_ops.METHODS, _products.METHODS,
               _data_dependent.METHODS, _inplace_unary.METHODS, _nan_quantiles.METHODS,
               _inplace_scatter.METHODS):  # issue 22's families
    for _name, _fn in _table.items():
        setattr(Tensor, _name, _fn)

__all__ = _shape.__all__ + _nn_functions.__all__ + _create.__all__ + _torch_methods.__all__ + _bitwise.__all__ + [
    "Spec", "Tensor", "TraceError", "Traced", "abs", "autograd", "device", "enable_grad", "inference_mode",
    "is_grad_enabled", "no_grad", "set_grad_enabled", "add", "astype", "checkpoint", "cos", "divide", "equal",
    "from_numpy", "guard", "manual_seed",
    "exp", "gelu", "greater", "greater_equal", "less", "less_equal", "log", "maximum", "minimum", "multiply",
    "negative", "not_equal", "power", "relu", "rsqrt", "sigmoid", "silu", "sin", "spec", "sqrt", "stop_gradient",
    "floor_divide", "log_sigmoid", "promote_types", "remainder", "result_type",
    "subtract", "tanh", "tensor", "trace", "trace_function", "unflatten_output", "where",
] + [n for n in _special_math.__all__ if n not in _torch_methods.__all__]
__all__ += _index_ops.__all__ + _sort_ops.__all__ + _view_ops.__all__ + _products.__all__ + _data_dependent.__all__
__all__ += ["scaled_dot_product_attention"] + _torch_extra.__all__
__all__ += _nan_quantiles.__all__ + _inplace_scatter.__all__ + gamma_fns.__all__

_torch_methods.adopt_torch_names(Tensor, globals(), __all__)  # dim=/keepdim= beside axis=/keepdims=
