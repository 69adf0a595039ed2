"""The metadata section of TVMScript: constants too large to print inline.

`mod.script(show_meta=True)` writes `metadata = tvm.ir.load_json(<JSON in a triple-quoted string>)` above the module and
refers to each large constant as `metadata["relax.expr.Constant"][i]`. The JSON is TVM's object graph:
node `root` maps type keys to arrays of node indices, and a constant node's `data` attribute indexes
`b64ndarrays`, each a base64 NDArray in TVM's save format (a 64-bit magic number, a reserved word, the
device, ndim, the dtype as code/bits/lanes, the shape, the byte count, then the bytes, little-endian).
"""
from __future__ import annotations

import base64
import json
import struct

import numpy as np

_MAGIC = 0xDD5E40F096B4A13F
_HEADER = struct.Struct("<QQiiiBBH")
_DTYPE_CODES = {0: "int", 1: "uint", 2: "float"}
CONSTANT_KEYS = ("relax.expr.Constant", "ir.GenericConst")  # TVM before 0.27, and 0.27


def load_ndarray(b64: str) -> np.ndarray:
    """One entry of `b64ndarrays` as a NumPy array (a copy, little-endian)."""
    raw = base64.b64decode(b64, validate=True)
    magic, _, _, _, ndim, code, bits, lanes = _HEADER.unpack_from(raw, 0)
    if magic != _MAGIC:
        raise ValueError("not a TVM NDArray (wrong magic number)")
    if lanes != 1 or code not in _DTYPE_CODES:
        raise ValueError(f"unsupported NDArray dtype (code {code}, {bits} bits, {lanes} lanes)")
    dtype = "bool" if (code, bits) == (1, 1) else f"{_DTYPE_CODES[code]}{bits}"
    offset = _HEADER.size
    shape = struct.unpack_from(f"<{ndim}q", raw, offset)
    offset += 8 * ndim
    (nbytes,) = struct.unpack_from("<q", raw, offset)
    offset += 8
    data = np.frombuffer(raw, dtype=np.dtype(dtype).newbyteorder("<"), count=int(np.prod(shape)), offset=offset)
    if data.nbytes != nbytes:
        raise ValueError(f"NDArray of shape {shape} and dtype {dtype} says it holds {nbytes} bytes")
    return data.reshape(shape).astype(dtype)


def load_constants(text: str) -> dict[str, list]:
    """`{type key: [node, ...]}` of a metadata JSON, with every relax.expr.Constant decoded to an array
    (other nodes are kept as their JSON dicts, for error messages)."""
    graph = json.loads(text)
    nodes, arrays = graph["nodes"], graph.get("b64ndarrays", [])
    root = nodes[graph["root"]]
    out: dict[str, list] = {}
    for key, index in zip(root.get("keys", []), root.get("data", []), strict=True):
        entries = []
        for i in nodes[index].get("data", []):
            node = nodes[i]
            if node.get("type_key") in CONSTANT_KEYS:
                entries.append(load_ndarray(arrays[int(node["attrs"]["data"])]))
            else:
                entries.append(node)
        out[key] = entries
    return out


def dump_ndarray(a: np.ndarray) -> str:
    """The inverse of load_ndarray (tests write metadata sections with it)."""
    a = np.array(a, order="C")  # (np.ascontiguousarray would make a 0-d array 1-d)
    if a.dtype == np.bool_:
        code, bits = 1, 1
    else:
        code = {"i": 0, "u": 1, "f": 2}[a.dtype.kind]
        bits = a.dtype.itemsize * 8
    head = _HEADER.pack(_MAGIC, 0, 1, 0, a.ndim, code, bits, 1) + struct.pack(f"<{a.ndim}q", *a.shape)
    data = a.astype(a.dtype.newbyteorder("<")).tobytes()
    return base64.b64encode(head + struct.pack("<q", len(data)) + data).decode()
