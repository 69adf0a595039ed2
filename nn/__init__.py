"""Models as Python classes: Module, Parameter, layers, functional, init, optim, saving, data."""
from . import data, distributed, functional, init, optim
from .attention import MultiheadAttention
from .checkpoint import checkpoint_sequential
from .layers import (
    GELU,
    AvgPool2d,
    Conv2d,
    Dropout,
    Embedding,
    Flatten,
    Identity,
    LayerNorm,
    Linear,
    MaxPool2d,
    ModuleList,
    ReLU,
    Sequential,
    Sigmoid,
    SiLU,
    Tanh,
)
from .module import Module, Parameter, StateDictError
from .serialization import load, save

__all__ = [
    "GELU", "AvgPool2d", "Conv2d", "Dropout", "Embedding", "Flatten", "LayerNorm", "Linear", "MaxPool2d",
    "Identity", "Module", "ModuleList", "MultiheadAttention", "Parameter", "ReLU", "Sequential", "SiLU", "Sigmoid",
    "StateDictError", "Tanh",
    "checkpoint_sequential", "data", "distributed", "functional", "init", "load", "optim", "save",
]
