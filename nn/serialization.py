"""nn.save / nn.load: nested dicts of arrays in one .npz file, never pickled, written atomically; nn.load also
reads PyTorch's torch.save checkpoints (nn/torch_zip.py) and .safetensors files (nn/safetensors.py).

>>> import os, tempfile, numpy as np
>>> path = os.path.join(tempfile.mkdtemp(), "ckpt.npz")
>>> save({"model": {"fc.weight": np.ones((2, 2))}, "step": 3}, path)
>>> state = load(path)
>>> state["model"]["fc.weight"].shape, int(state["step"])
((2, 2), 3)
"""
from __future__ import annotations

import os
import uuid

import numpy as np

from tracer import Tensor

from .checkpoint_errors import CheckpointError, UnsafeCheckpointError

SEP = "/"  # joins nested keys; state-dict names use ".", so "/" never clashes with them
MARKER = "__tracegrad_format__"
FORMAT_VERSION = 1


def _flatten(state, prefix: str, out: dict) -> None:
    if not isinstance(state, dict):
        raise TypeError(f"nn.save: expected a dict of arrays, got a {type(state).__name__}")
    for key, value in state.items():
        if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
            key = str(key)  # torch's optimizer state is keyed by parameter index; nn.load gives "0", "1", ...
        if isinstance(value, (list, tuple)) and value and all(isinstance(v, dict) for v in value):
            value = {str(i): v for i, v in enumerate(value)}  # a list of dicts (param_groups): keys "0", "1", ...
        elif isinstance(value, (list, tuple)):
            value = np.asarray(value)  # numbers (betas, a group's parameter ids); anything else is refused below
        if not isinstance(key, str) or not key or SEP in key or key == MARKER:
            raise ValueError(f"nn.save: key {prefix + str(key)!r} must be a non-empty string without {SEP!r}")
        name = prefix + key
        if isinstance(value, dict):
            _flatten(value, name + SEP, out)
            continue
        given = value
        if isinstance(value, Tensor):
            value = value.numpy()
        elif isinstance(value, (bool, int, float, np.number, np.bool_)):
            value = np.asarray(value)
        elif hasattr(value, "get") and not isinstance(value, np.ndarray):  # a CuPy array
            value = value.get()
        if not isinstance(value, np.ndarray) or value.dtype.hasobject:  # object arrays would need pickle
            raise TypeError(f"nn.save: {name!r} is a {type(given).__name__} that cannot be stored without pickle; "
                            "only arrays, Tensors, numbers (that fit in 64 bits) and dicts of them can be saved")
        out[name] = value


def save(state: dict, path) -> None:
    """Write a (nested) dict of arrays, Tensors and numbers to `path` as .npz, atomically: the data goes to a
    temporary file in the same directory, is fsynced, then renamed over `path`, so a crash never leaves a
    partial file. Nested keys are joined with "/" (which keys may not contain); empty dicts are not kept.
    A path ending in ".safetensors" is written in that format instead (a flat dict of arrays or Tensors;
    `nn.safetensors.save_file` also takes metadata). Nothing is ever pickled."""
    path = os.fspath(path)
    if path.endswith(".safetensors"):
        from .safetensors import save_file

        save_file(state, path)
        return
    flat: dict[str, np.ndarray] = {}
    _flatten(state, "", flat)
    flat[MARKER] = np.asarray(FORMAT_VERSION)
    write_atomically(path, lambda f: np.savez(f, **flat))


def write_atomically(path: str, write) -> None:
    """Call write(file) on a temporary file beside `path`, fsync it, rename it over `path`; on any error the
    temporary file is removed and `path` is left as it was."""
    directory, base = os.path.split(os.path.abspath(path))
    tmp = os.path.join(directory, f".{base}.{uuid.uuid4().hex}.tmp")
    # os.open with mode 0o666 lets the umask decide the permissions, as for any newly written file
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    _fsync_directory(directory)


def _fsync_directory(directory: str) -> None:
    """Make the rename itself durable (POSIX); platforms that cannot open a directory skip it."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


class _NewerFormat(ValueError):
    """A tracegrad file from a newer version: intact, so not reported as damaged."""


def load(path):
    """Read a checkpoint, choosing the reader by the file's first bytes (a ".safetensors" name always reads
    as safetensors):

    - a file written by `save`: nested dicts of NumPy arrays (numbers come back as 0-d arrays);
    - a PyTorch checkpoint written by torch.save (its zip format): the saved object (a state dict, an
      optimizer's state dict, nested dicts and lists), tensors as NumPy arrays, read by a restricted
      unpickler that builds only tensors, dicts, lists, tuples, strings and numbers (torch.load's
      weights_only rule; see nn/torch_zip.py); bfloat16 is widened to float32 with a warning;
    - a .safetensors file: a flat dict of NumPy arrays.

    Raises CheckpointError (nn.checkpoint_errors, a ValueError) naming the file and the cause when the file
    is damaged (truncated, corrupted, bad header or offsets, unknown dtypes) or of no kind above, including
    any file that would need pickle to read; UnsafeCheckpointError (a CheckpointError) when a PyTorch
    checkpoint's pickle names a global outside the allow-list. Nothing in a file is ever run.
    """
    path = os.fspath(path)
    kind = _sniff(path)
    if kind == "safetensors":
        from .safetensors import load_file

        return load_file(path)
    if kind == "torch":
        from .torch_zip import load_torch_zip

        return load_torch_zip(path)
    if kind == "torch-legacy":
        raise CheckpointError(f"nn.load: {path} is a PyTorch checkpoint in the legacy (pre-1.6, non-zip) format, "
                              "which needs pickle to read; re-save it with a current torch.save")
    try:
        npz = np.load(path, allow_pickle=False)
        if not isinstance(npz, np.lib.npyio.NpzFile):
            raise ValueError("a single array, not an .npz archive")
        with npz:
            # read by member name: npz.files drops ".npy", so keys "a" and "a.npy" would read one member
            flat = {member.removesuffix(".npy"): npz[member] for member in npz.zip.namelist()}
        if MARKER not in flat:
            raise ValueError(f"no {MARKER} entry")
        version = int(flat.pop(MARKER).item())
        if version > FORMAT_VERSION:
            raise _NewerFormat(f"nn.load: {path} has format version {version}; this tracegrad reads up to "
                               f"{FORMAT_VERSION}")
        return _unflatten(flat)
    except (FileNotFoundError, IsADirectoryError, PermissionError, _NewerFormat):
        raise
    except Exception as e:  # anything else that goes wrong while parsing the bytes means they are not ours
        raise CheckpointError(f"nn.load: {path} is damaged or not a tracegrad file ({type(e).__name__}: {e})") from e


_LEGACY_MAGIC = b"\x80\x02\x8a\x0al\xfc\x9cF\xf9 j\xa8P\x19."  # pickle of torch's old magic number


def _sniff(path: str) -> str:
    """"safetensors", "torch" (a zip whose first member is */data.pkl: torch.save writes it first, so a
    truncated file is still recognised), "torch-legacy" or "npz" (anything else: the .npz reader judges it)."""
    if path.endswith(".safetensors"):
        return "safetensors"
    with open(path, "rb") as f:
        head = f.read(256)
    if head[:4] == b"PK\x03\x04" and len(head) >= 30:
        name_len = int.from_bytes(head[26:28], "little")
        name = head[30:30 + name_len]
        return "torch" if name == b"data.pkl" or name.endswith(b"/data.pkl") else "npz"
    if head.startswith(_LEGACY_MAGIC):
        return "torch-legacy"
    if len(head) > 9 and head[8:9] == b"{" and int.from_bytes(head[:8], "little") < 100_000_000:
        return "safetensors"
    return "npz"


def _unflatten(flat: dict) -> dict:
    """{"a/b": x} -> {"a": {"b": x}}; refuses names that `save` cannot have written."""
    out: dict = {}
    for name, value in flat.items():
        *parents, leaf = name.split(SEP)
        node = out
        for part in parents:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ValueError(f"{name!r} lies under an array")
        if not all(parents + [leaf]) or leaf in node:
            raise ValueError(f"{name!r} is an empty or a repeated name")
        node[leaf] = value
    return out


__all__ = ["CheckpointError", "UnsafeCheckpointError", "load", "save"]
