"""torch.nn.utils.parameters_to_vector / vector_to_parameters (to be re-exported from nn.utils).

>>> import numpy as np
>>> from nn import Parameter
>>> ps = [Parameter(np.ones((2, 2), "float32")), Parameter(np.zeros(3, "float32"))]
>>> v = parameters_to_vector(ps)
>>> v.shape, v.tolist()[-4:]
((7,), [1.0, 0.0, 0.0, 0.0])
>>> vector_to_parameters(v * 2, ps); ps[0].tolist(), ps[1].tolist()
([[2.0, 2.0], [2.0, 2.0]], [0.0, 0.0, 0.0])
"""
from __future__ import annotations

import numpy as np

import tracer
from tracer import Tensor


def _device(p) -> str:
    return str(getattr(p, "device", "cpu"))


def parameters_to_vector(parameters) -> Tensor:
    """The parameters flattened and concatenated into one 1-d Tensor, in order, as torch's. It is built from
    tracer ops, so inside a trace or a recorded eager computation it differentiates back to each parameter."""
    parameters = list(parameters)
    if not parameters:
        raise ValueError("parameters_to_vector: got no parameters")
    devices = {_device(p) for p in parameters}
    if len(devices) > 1:
        raise TypeError(f"parameters_to_vector: found parameters on different devices: {sorted(devices)}")
    return tracer.concat([tracer.reshape(p, (-1,)) for p in parameters], axis=0)


def vector_to_parameters(vec, parameters) -> None:
    """Write consecutive slices of the 1-d `vec` into the parameters, in order (each reshaped to its
    parameter's shape and cast to its dtype). The parameters are updated in place, so optimizers and models
    holding them see the new values; torch rebinds `param.data` instead, to the same effect. A vector whose
    length is not the parameters' total size is a ValueError (torch ignores a longer vector's tail)."""
    if not isinstance(vec, Tensor):
        raise TypeError(f"vector_to_parameters: expected a Tensor, but got: {type(vec).__name__}")
    parameters = list(parameters)
    data = vec._concrete("vector_to_parameters")
    total = sum(int(np.prod(p.shape, dtype=np.int64)) for p in parameters)
    if data.ndim != 1 or data.shape[0] != total:
        raise ValueError(f"vector_to_parameters: vec has shape {tuple(data.shape)}, the parameters {total} values "
                         "in all")
    start = 0
    for p in parameters:
        target = p._concrete("vector_to_parameters")
        n = int(np.prod(p.shape, dtype=np.int64))
        chunk = data[start:start + n].reshape(p.shape)
        if type(chunk) is not type(target):
            raise TypeError(f"vector_to_parameters: vec is on {_device(vec)}, a parameter on {_device(p)}")
        target[...] = chunk.astype(target.dtype, copy=False)
        start += n


__all__ = ["parameters_to_vector", "vector_to_parameters"]
