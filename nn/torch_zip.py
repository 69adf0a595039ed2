"""Reading torch.save's zip checkpoints without torch and without running their pickle's code.

A torch.save file is a zip archive `<name>/data.pkl` (the pickled object), `<name>/data/<key>` (each storage's
raw bytes), `<name>/byteorder` ("little" or "big"). The pickle is read by a restricted unpickler, the rule of
torch.load(weights_only=True): the only globals it resolves are torch's tensor and parameter rebuild functions,
its storage types and dtypes, `collections.OrderedDict` and `torch.Size`, each mapped to a local NumPy builder;
any other global (os.system, builtins.eval, a class) is refused with UnsafeCheckpointError naming it, before
anything is called. The BUILD opcode (which calls `__setstate__`) is allowed only on dicts.

Tensors come back as NumPy arrays: float16/32/64, int8/16/32/64, uint8, bool, complex64/128 as themselves,
bfloat16 widened to float32 (NumPy has no bfloat16; a warning says so). Strides and storage offsets are kept,
and tensors that shared a storage share memory again (as after torch.load).
"""
from __future__ import annotations

import collections
import io
import pickle
import warnings
import zipfile

import numpy as np

from .checkpoint_errors import CheckpointError, UnsafeCheckpointError

_STORAGES = {  # torch's typed storage names -> NumPy dtypes ("bfloat16": bits read as uint16, then widened)
    "DoubleStorage": "float64", "FloatStorage": "float32", "HalfStorage": "float16", "BFloat16Storage": "bfloat16",
    "LongStorage": "int64", "IntStorage": "int32", "ShortStorage": "int16", "CharStorage": "int8",
    "ByteStorage": "uint8", "BoolStorage": "bool", "ComplexFloatStorage": "complex64",
    "ComplexDoubleStorage": "complex128",
}
_DTYPES = {"float64": "float64", "double": "float64", "float32": "float32", "float": "float32",
           "float16": "float16", "half": "float16", "bfloat16": "bfloat16", "int64": "int64", "long": "int64",
           "int32": "int32", "int": "int32", "int16": "int16", "short": "int16", "int8": "int8", "uint8": "uint8",
           "bool": "bool", "complex64": "complex64", "complex128": "complex128"}


class _StorageType:
    """What the pickle's `torch.FloatStorage` (etc.) resolves to: a dtype tag, not callable."""

    def __init__(self, dtype: str):
        self.dtype = dtype


class _Storage:
    """One storage's elements as a flat NumPy array (shared by every tensor that views it)."""

    def __init__(self, array: np.ndarray):
        self.array = array


def _rebuild_tensor(storage, storage_offset, size, stride, *_rest):
    """torch._utils._rebuild_tensor_v2 (and _rebuild_tensor): a view of the storage, bounds checked first."""
    if not isinstance(storage, _Storage):
        raise CheckpointError(f"a tensor's storage is a {type(storage).__name__}, not a storage")
    size, stride = tuple(size), tuple(stride)
    ints = all(isinstance(v, int) and not isinstance(v, bool) for v in (storage_offset, *size, *stride))
    if not ints or len(size) != len(stride) or storage_offset < 0 or min(size + stride, default=0) < 0:
        raise CheckpointError(f"a tensor has a bad layout: offset {storage_offset!r}, size {size!r}, "
                              f"stride {stride!r}")
    flat = storage.array
    if 0 not in size:
        last = storage_offset + sum((n - 1) * s for n, s in zip(size, stride, strict=True))
        if last >= flat.size:
            raise CheckpointError(f"a tensor of size {size}, stride {stride} at offset {storage_offset} reaches "
                                  f"element {last} of a storage of {flat.size}")
    else:
        return np.zeros(size, flat.dtype)
    item = flat.itemsize
    return np.lib.stride_tricks.as_strided(flat[storage_offset:], size, tuple(s * item for s in stride))


def _rebuild_parameter(data, requires_grad=None, backward_hooks=None, *_state):
    """torch._utils._rebuild_parameter(_with_state): the parameter's data."""
    if not isinstance(data, np.ndarray):
        raise CheckpointError(f"a parameter's data is a {type(data).__name__}, not a tensor")
    return data


def _size(*args):
    return tuple(*args)


_ALLOWED = {
    ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor,
    ("torch._utils", "_rebuild_tensor"): _rebuild_tensor,
    ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
    ("torch._utils", "_rebuild_parameter_with_state"): _rebuild_parameter,
    ("collections", "OrderedDict"): collections.OrderedDict,
    ("torch", "Size"): _size,
}
_ALLOWED.update({("torch", name): _StorageType(dtype) for name, dtype in _STORAGES.items()})
_ALLOWED.update({("torch", name): dtype for name, dtype in _DTYPES.items()})


class _Unpickler(pickle._Unpickler):
    """The pure-Python unpickler (so BUILD can be restricted) with an allow-list find_class."""

    dispatch = dict(pickle._Unpickler.dispatch)

    def __init__(self, data: bytes, storages):
        super().__init__(io.BytesIO(data))
        self._storages = storages

    def find_class(self, module, name):
        try:
            return _ALLOWED[(module, name)]
        except (KeyError, TypeError):
            raise UnsafeCheckpointError(f"refused the global {module}.{name}: only torch's tensor, parameter and "
                                        "storage rebuilders, dtypes, torch.Size and collections.OrderedDict are "
                                        "allowed (torch.load's weights_only rule)") from None

    def persistent_load(self, pid):
        return self._storages(pid)

    def load_build(self):
        state, inst = self.stack[-1], self.stack[-2]
        if not isinstance(inst, dict) or not isinstance(state, dict):
            raise UnsafeCheckpointError(f"refused BUILD (__setstate__) on a {type(inst).__name__}: only dicts' "
                                        "attributes (a state dict's _metadata) may be set")
        super().load_build()

    dispatch[pickle.BUILD[0]] = load_build


def is_torch_zip(path) -> bool:
    """True for a zip archive holding a `*/data.pkl`: what torch.save writes."""
    try:
        with zipfile.ZipFile(path) as z:
            return any(n.endswith("/data.pkl") or n == "data.pkl" for n in z.namelist())
    except (zipfile.BadZipFile, OSError, ValueError):
        return False


def load_torch_zip(path):
    """The object torch.save wrote to `path`, with tensors as NumPy arrays (see the module docstring).
    Raises UnsafeCheckpointError for a refused global and CheckpointError for any other damage or surprise."""
    try:
        return _load(path)
    except CheckpointError as e:
        raise type(e)(f"nn.load: {path}: {e}") from None
    except (FileNotFoundError, IsADirectoryError, PermissionError):
        raise
    except Exception as e:  # truncated archives, bad CRCs, malformed pickles: damaged, never run
        raise CheckpointError(f"nn.load: {path} is a damaged PyTorch checkpoint ({type(e).__name__}: {e})") from e


def _load(path):
    with zipfile.ZipFile(path) as z:
        names = z.namelist()
        pkl = [n for n in names if n.endswith("/data.pkl") or n == "data.pkl"]
        if len(pkl) != 1:
            raise CheckpointError(f"expected one data.pkl in the archive, found {len(pkl)}")
        prefix = pkl[0][: -len("data.pkl")]
        order = z.read(prefix + "byteorder").decode().strip() if prefix + "byteorder" in names else "little"
        if order not in ("little", "big"):
            raise CheckpointError(f"unknown byteorder {order!r}")
        cache: dict[str, _Storage] = {}
        bf16 = []

        def storage(pid):
            if not isinstance(pid, tuple) or len(pid) != 5 or pid[0] != "storage":
                raise CheckpointError(f"unknown persistent id {pid!r}")
            _, kind, key, _location, numel = pid
            dtype = kind.dtype if isinstance(kind, _StorageType) else kind if kind in _DTYPES.values() else None
            if dtype is None or not isinstance(key, str):
                raise CheckpointError(f"unknown storage type in persistent id {pid!r}")
            if key not in cache:
                raw = z.read(f"{prefix}data/{key}")  # KeyError: a storage the archive lacks
                cache[key] = _Storage(_decode(raw, dtype, order, numel, key, bf16))
            return cache[key]

        obj = _Unpickler(z.read(pkl[0]), storage).load()
    if bf16:
        warnings.warn(f"nn.load: {path}: bfloat16 tensors were widened to float32 (NumPy has no bfloat16)",
                      stacklevel=3)
    return obj


def _decode(raw: bytes, dtype: str, order: str, numel, key: str, bf16: list) -> np.ndarray:
    width = np.dtype("uint16" if dtype == "bfloat16" else dtype).itemsize
    if len(raw) % width or (isinstance(numel, int) and numel * width > len(raw)):
        raise CheckpointError(f"storage {key!r} holds {len(raw)} bytes, not {numel} elements of {dtype}")
    endian = "<" if order == "little" else ">"
    if dtype == "bfloat16":
        bits = np.frombuffer(raw, endian + "u2").astype("uint32") << 16
        bf16.append(key)
        return bits.view("float32")
    if dtype == "bool":
        return np.frombuffer(raw, "uint8").astype(bool)
    return np.frombuffer(raw, np.dtype(dtype).newbyteorder(endian)).astype(dtype)  # a native, writable copy


__all__ = ["is_torch_zip", "load_torch_zip"]
