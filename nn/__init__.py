"""Models as Python classes: Module, Parameter, layers, losses, functional, init, optim, saving, data."""
import autodiff as _autodiff  # noqa: F401  (installs loss.backward(): `import nn` is enough for the torch loop)

from . import data, distributed, functional, init, optim, param_vector, safetensors, utils
from .activations import (
    CELU,
    ELU,
    GELU,
    GLU,
    SELU,
    Hardshrink,
    Hardsigmoid,
    Hardswish,
    Hardtanh,
    LeakyReLU,
    LogSigmoid,
    LogSoftmax,
    Mish,
    PReLU,
    ReLU,
    ReLU6,
    Sigmoid,
    SiLU,
    Softmax,
    Softmax2d,
    Softmin,
    Softplus,
    Softshrink,
    Softsign,
    Tanh,
    Tanhshrink,
    Threshold,
)
from .attention import MultiheadAttention
from .checkpoint import checkpoint_sequential
from .checkpoint_errors import CheckpointError, UnsafeCheckpointError
from .containers import ModuleDict, ParameterDict, ParameterList
from .layers import (
    AvgPool2d,
    Conv1d,
    Conv2d,
    Dropout,
    Dropout2d,
    Embedding,
    Flatten,
    Identity,
    LayerNorm,
    Linear,
    MaxPool2d,
    ModuleList,
    Sequential,
    Unflatten,
)
from .losses import (
    BCELoss,
    BCEWithLogitsLoss,
    CrossEntropyLoss,
    HuberLoss,
    KLDivLoss,
    L1Loss,
    MSELoss,
    NLLLoss,
    SmoothL1Loss,
)
from .module import Module, Parameter, StateDictError
from .rnn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNCell
from .norm import (
    BatchNorm1d,
    BatchNorm2d,
    BatchNorm3d,
    GroupNorm,
    InstanceNorm1d,
    InstanceNorm2d,
    InstanceNorm3d,
    LocalResponseNorm,
    RMSNorm,
)
from .serialization import load, save
from .transformer import (
    Transformer,
    TransformerDecoder,
    TransformerDecoderLayer,
    TransformerEncoder,
    TransformerEncoderLayer,
)

__all__ = [
    "CELU", "ELU", "GELU", "GLU", "Hardshrink", "Hardsigmoid", "Hardswish", "Hardtanh", "LeakyReLU", "LogSigmoid",
    "LogSoftmax", "Mish", "PReLU", "ReLU", "ReLU6", "SELU", "SiLU", "Sigmoid", "Softmax", "Softmax2d", "Softmin",
    "Softplus", "Softshrink", "Softsign", "Tanh", "Tanhshrink", "Threshold",
    "MultiheadAttention",
    "GRU", "GRUCell", "LSTM", "LSTMCell", "RNN", "RNNCell",
    "Transformer", "TransformerDecoder", "TransformerDecoderLayer", "TransformerEncoder", "TransformerEncoderLayer",
    "AvgPool2d", "Conv1d", "Conv2d", "Dropout", "Dropout2d", "Embedding", "Flatten", "Identity", "LayerNorm", "Linear",
    "MaxPool2d", "ModuleList", "Sequential", "Unflatten",
    "ModuleDict", "ParameterDict", "ParameterList",
    "BCELoss", "BCEWithLogitsLoss", "CrossEntropyLoss", "HuberLoss", "KLDivLoss", "L1Loss", "MSELoss", "NLLLoss",
    "SmoothL1Loss",
    "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "GroupNorm", "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d",
    "LocalResponseNorm", "RMSNorm",
    "Module", "Parameter", "StateDictError",
    "CheckpointError", "UnsafeCheckpointError",
    "checkpoint_sequential", "data", "distributed", "functional", "init", "load", "optim", "param_vector",
    "safetensors", "save", "utils",
]
