"""Models as Python classes: Module, Parameter, layers, losses, functional, init, optim, saving, data."""
__tracegrad__ = True  # the marker ir/siblings.py looks for in each of tracegrad's four packages
try:
    from ir import siblings as _siblings  # noqa: F401, I001  (first: a foreign `ir` raises there)
except ImportError as _e:  # an `ir` without tracegrad's files: another project's, earlier on sys.path
    import ir as _ir
    raise ImportError(f"the top-level package `ir` found at {getattr(_ir, '__file__', _ir)} is not tracegrad's; "
                      "remove it (pip uninstall it, or take its folder off sys.path), then pip install "
                      "--force-reinstall tracegrad", name="ir") from _e
import autodiff as _autodiff  # noqa: F401  (installs loss.backward(): `import nn` is enough for the torch loop)

from . import data, distributed, distributions, functional, init, optim, param_vector, safetensors, utils
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
from .embedding import Embedding, EmbeddingBag
from .layers import (
    AvgPool2d,
    Dropout,
    Dropout2d,
    Flatten,
    Identity,
    LayerNorm,
    Linear,
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
from .losses_extra import (
    CosineEmbeddingLoss,
    CTCLoss,
    GaussianNLLLoss,
    HingeEmbeddingLoss,
    MarginRankingLoss,
    MultiLabelSoftMarginLoss,
    MultiMarginLoss,
    PoissonNLLLoss,
    SoftMarginLoss,
    TripletMarginLoss,
)
from .module import Module, Parameter, StateDictError
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
from .parallel import DataParallel  # torch.nn.DataParallel (nn.parallel's pass-through)
from .rnn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNCell
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
    "CTCLoss", "CosineEmbeddingLoss", "GaussianNLLLoss", "HingeEmbeddingLoss", "MarginRankingLoss",
    "MultiLabelSoftMarginLoss", "MultiMarginLoss", "PoissonNLLLoss", "SoftMarginLoss", "TripletMarginLoss",
    "EmbeddingBag",
    "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "GroupNorm", "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d",
    "LocalResponseNorm", "RMSNorm",
    "Module", "Parameter", "StateDictError",
    "CheckpointError", "UnsafeCheckpointError",
    "checkpoint_sequential", "data", "distributed", "functional", "init", "load", "optim", "param_vector",
    "safetensors", "save", "utils", "distributions",
]

# convolution and resampling (issue 21 item 4): nn.conv's Conv1d/Conv2d (padding_mode, device=, dtype=) and
# nn.pool_modules' MaxPool2d (return_indices) supersede nn.layers' versions
from .conv import Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d  # noqa: E402
from .padding import (  # noqa: E402
    CircularPad1d,
    CircularPad2d,
    CircularPad3d,
    ConstantPad1d,
    ConstantPad2d,
    ConstantPad3d,
    ReflectionPad1d,
    ReflectionPad2d,
    ReflectionPad3d,
    ReplicationPad1d,
    ReplicationPad2d,
    ReplicationPad3d,
    ZeroPad1d,
    ZeroPad2d,
    ZeroPad3d,
)
from .pool_modules import (  # noqa: E402
    AdaptiveAvgPool1d,
    AdaptiveAvgPool2d,
    AdaptiveAvgPool3d,
    AdaptiveMaxPool1d,
    AdaptiveMaxPool2d,
    AvgPool1d,
    MaxPool1d,
    MaxPool2d,
)
from .resample import Fold, PixelShuffle, PixelUnshuffle, Unfold, Upsample, UpsamplingBilinear2d, UpsamplingNearest2d  # noqa: E402,E501

__all__ += [
    "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d",
    "CircularPad1d", "CircularPad2d", "CircularPad3d", "ConstantPad1d", "ConstantPad2d", "ConstantPad3d",
    "ReflectionPad1d", "ReflectionPad2d", "ReflectionPad3d", "ReplicationPad1d", "ReplicationPad2d", "ReplicationPad3d",
    "ZeroPad1d", "ZeroPad2d", "ZeroPad3d",
    "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveAvgPool3d", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d",
    "AvgPool1d", "MaxPool1d",
    "Fold", "PixelShuffle", "PixelUnshuffle", "Unfold", "Upsample", "UpsamplingBilinear2d", "UpsamplingNearest2d",
]
__all__ += ["DataParallel"]
from .unpool import MaxUnpool1d, MaxUnpool2d  # noqa: E402

__all__ += ["MaxUnpool1d", "MaxUnpool2d"]


def __getattr__(name: str):
    """A torch.nn name tracegrad lacks: an AttributeError naming it and the nearest tracegrad spelling
    (nn/torch/hints.py; imported at the first miss, when this package is complete)."""
    if name.startswith("__"):
        raise AttributeError(f"module 'nn' has no attribute {name!r}")
    import importlib.util

    if importlib.util.find_spec(f"{__name__}.{name}") is not None:  # a submodule not imported yet (nn.torch)
        return importlib.import_module(f"{__name__}.{name}")
    from .torch import hints

    return hints.module_getattr("nn", "torch.nn", globals())(name)
