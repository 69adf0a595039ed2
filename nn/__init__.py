"""Models as Python classes: Module, Parameter, layers, functional, init, optim, saving, data."""
from . import data, functional, init, optim
from .attention import MultiheadAttention
from .checkpoint import checkpoint_sequential
from .layers import (
    GELU,
    AvgPool2d,
    Conv2d,
    Dropout,
    Embedding,
    Flatten,
    LayerNorm,
    Linear,
    MaxPool2d,
    ReLU,
    Sequential,
    Tanh,
)
from .module import Module, Parameter, StateDictError
from .serialization import load, save

__all__ = [
    "GELU", "AvgPool2d", "Conv2d", "Dropout", "Embedding", "Flatten", "LayerNorm", "Linear", "MaxPool2d",
    "Module", "MultiheadAttention", "Parameter", "ReLU", "Sequential", "StateDictError", "Tanh",
    "checkpoint_sequential", "data", "functional", "init", "load", "optim", "save",
]
