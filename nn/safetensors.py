"""The .safetensors format, read and written directly (no dependency), as the safetensors package does.

A file is: 8 bytes, the header's length N as a little-endian uint64; N bytes of UTF-8 JSON mapping each tensor's
name to {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]} (offsets into the byte buffer that follows
the header), plus an optional "__metadata__" of string to string; then the buffer, the tensors' little-endian,
C-ordered bytes, which the offsets tile exactly with no gaps or overlaps.

>>> import os, tempfile, numpy as np
>>> path = os.path.join(tempfile.mkdtemp(), "w.safetensors")
>>> save_file({"w": np.arange(6, dtype="float32").reshape(2, 3)}, path, metadata={"format": "np"})
>>> load_file(path)["w"].tolist(), metadata(path)
([[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]], {'format': 'np'})
"""
from __future__ import annotations

import json
import os
import struct
import warnings

import numpy as np

from tracer import Tensor

from .checkpoint_errors import CheckpointError

_CODES = {"F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16", "I64": "int64", "I32": "int32",
          "I16": "int16", "I8": "int8", "U64": "uint64", "U32": "uint32", "U16": "uint16", "U8": "uint8",
          "BOOL": "bool", "C64": "complex64", "C128": "complex128"}
_NAMES = {v: k for k, v in _CODES.items()}
MAX_HEADER = 100_000_000  # the safetensors package's limit


def save_file(tensors: dict, filename, metadata: dict | None = None) -> None:
    """Write a flat dict of name -> array (or Tensor) as .safetensors, atomically (as nn.save). `metadata`,
    strings to strings, goes into the header's "__metadata__"."""
    from .serialization import write_atomically

    arrays = {}
    for name, value in tensors.items():
        if not isinstance(name, str) or name == "__metadata__":
            raise ValueError(f"save_file: tensor name {name!r} must be a string other than '__metadata__'")
        array = value
        if isinstance(value, Tensor):
            array = value.numpy()
        elif isinstance(value, np.generic):
            array = np.asarray(value)
        elif type(value).__module__.startswith("cupy"):
            array = value.get()
        if not isinstance(array, np.ndarray) or array.dtype.name not in _NAMES:
            raise TypeError(f"save_file: {name!r} is a {type(value).__name__} "
                            f"{getattr(array, 'dtype', '')}; .safetensors holds arrays of "
                            f"{', '.join(sorted(_NAMES))}")
        arrays[name] = np.asarray(array, order="C").astype(array.dtype.newbyteorder("<"), copy=False)
    if metadata is not None and not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
        raise ValueError("save_file: metadata must map strings to strings")
    # the package's order: larger alignment first, then by name
    order = sorted(arrays, key=lambda n: (-arrays[n].dtype.itemsize, n))
    header, offset = {}, 0
    if metadata:
        header["__metadata__"] = dict(metadata)
    for name in order:
        a = arrays[name]
        header[name] = {"dtype": _NAMES[a.dtype.name], "shape": list(a.shape),
                        "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the buffer starts 8-byte aligned

    def write(f):
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for name in order:
            f.write(arrays[name].tobytes())

    write_atomically(os.fspath(filename), write)


def _header(raw: bytes, size: int) -> tuple[dict, int]:
    if size < 8:
        raise CheckpointError(f"{size} bytes: too short for the 8-byte header length")
    (n,) = struct.unpack("<Q", raw[:8])
    if n > MAX_HEADER or 8 + n > size:
        raise CheckpointError(f"the header length {n} is beyond the file's {size} bytes")
    try:
        header = json.loads(raw[8:8 + n].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CheckpointError(f"the header is not JSON ({e})") from None
    if not isinstance(header, dict):
        raise CheckpointError("the header is not a JSON object")
    return header, 8 + n


def _read(path) -> tuple[dict, dict]:
    path = os.fspath(path)
    with open(path, "rb") as f:
        raw = f.read()
    header, start = _header(raw, len(raw))
    meta = header.pop("__metadata__", None) or {}
    if not isinstance(meta, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in meta.items()):
        raise CheckpointError("__metadata__ must map strings to strings")
    buffer = memoryview(raw)[start:]
    spans, out, widened = [], {}, []
    for name, info in header.items():
        if not isinstance(info, dict) or set(info) != {"dtype", "shape", "data_offsets"}:
            raise CheckpointError(f"tensor {name!r}: an entry needs exactly dtype, shape and data_offsets")
        code, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
        if code not in _CODES:
            raise CheckpointError(f"tensor {name!r}: unknown dtype {code!r}")
        good = isinstance(shape, list) and all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape)
        good = good and isinstance(offsets, list) and len(offsets) == 2 and all(
            isinstance(o, int) and not isinstance(o, bool) for o in offsets)
        if not good:
            raise CheckpointError(f"tensor {name!r}: bad shape {shape!r} or data_offsets {offsets!r}")
        begin, end = offsets
        dtype = _CODES[code]
        width = 2 if dtype == "bfloat16" else np.dtype(dtype).itemsize
        if not 0 <= begin <= end <= len(buffer):
            raise CheckpointError(f"tensor {name!r}: data_offsets {offsets} out of range of the {len(buffer)}-byte "
                                  "buffer")
        if end - begin != int(np.prod(shape, dtype=np.int64)) * width:
            raise CheckpointError(f"tensor {name!r}: {end - begin} bytes do not hold shape {shape} of {code}")
        spans.append((begin, end, name))
        out[name] = _decode(buffer[begin:end], dtype, shape, widened, name)
    position = 0
    for begin, end, name in sorted(spans):
        if begin != position:
            raise CheckpointError(f"tensor {name!r} starts at byte {begin}, not {position}: the offsets must tile "
                                  "the buffer without gaps or overlaps")
        position = end
    if position != len(buffer):
        raise CheckpointError(f"the tensors cover {position} of the buffer's {len(buffer)} bytes")
    if widened:
        warnings.warn(f"nn.load: {path}: bfloat16 tensors {widened} were widened to float32 (NumPy has no bfloat16)",
                      stacklevel=3)
    return out, meta


def _decode(data, dtype: str, shape, widened: list, name: str) -> np.ndarray:
    if dtype == "bfloat16":
        widened.append(name)
        return (np.frombuffer(data, "<u2").astype("uint32") << 16).view("float32").reshape(shape)
    if dtype == "bool":
        raw = np.frombuffer(data, "uint8")
        if (raw > 1).any():
            raise CheckpointError(f"tensor {name!r}: bool bytes other than 0 and 1")
        return raw.astype(bool).reshape(shape)
    return np.frombuffer(data, np.dtype(dtype).newbyteorder("<")).astype(dtype).reshape(shape)


def load_file(filename) -> dict:
    """The tensors of a .safetensors file as NumPy arrays (bfloat16 widened to float32, with a warning).
    A damaged or malformed file raises CheckpointError naming the file and the cause."""
    return _checked(filename)[0]


def metadata(filename) -> dict:
    """The file's "__metadata__" (strings to strings; {} without one)."""
    return _checked(filename)[1]


def _checked(filename):
    try:
        return _read(filename)
    except CheckpointError as e:
        raise CheckpointError(f"nn.load: {os.fspath(filename)} is not a valid .safetensors file: {e}") from None


__all__ = ["load_file", "metadata", "save_file"]
