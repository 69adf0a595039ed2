""".safetensors read and written directly: the documented byte layout, round trips of every dtype, nn.save /
nn.load by extension, interchange with the safetensors package when installed, damaged files refused."""
import json
import struct

import numpy as np
import pytest

import nn
import tracer
from nn import safetensors as st
from nn.checkpoint_errors import CheckpointError

DTYPES = ["float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "bool", "complex64"]


def _file(header: dict, buffer: bytes, pad=True) -> bytes:
    text = json.dumps(header).encode()
    if pad:
        text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + buffer


def test_the_documented_layout_is_what_is_written(tmp_path):
    path = tmp_path / "m.safetensors"
    a, b = np.arange(6, dtype="float32").reshape(2, 3), np.array([7, -1], "int64")
    st.save_file({"a": a, "b": tracer.tensor(b)}, path, metadata={"format": "pt"})
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    assert n % 8 == 0
    header = json.loads(raw[8:8 + n])
    assert header == {"__metadata__": {"format": "pt"},
                      "b": {"dtype": "I64", "shape": [2], "data_offsets": [0, 16]},
                      "a": {"dtype": "F32", "shape": [2, 3], "data_offsets": [16, 40]}}
    assert raw[8 + n:] == b.astype("<i8").tobytes() + a.astype("<f4").tobytes()
    got = nn.load(path)
    np.testing.assert_array_equal(got["a"], a)
    np.testing.assert_array_equal(got["b"], b)
    assert st.metadata(path) == {"format": "pt"}


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_dtype_round_trips_through_nn_save(tmp_path, dtype):
    x = (np.arange(-6, 6).reshape(3, 4) % (2 if dtype == "bool" else 50)).astype(dtype)
    path = tmp_path / "x.safetensors"
    nn.save({"x": x, "scalar": x[1, 2], "empty": np.zeros((0, 3), dtype)}, path)
    got = nn.load(path)
    for k, v in {"x": x, "scalar": x[1, 2], "empty": np.zeros((0, 3), dtype)}.items():
        assert got[k].dtype == np.dtype(dtype) and got[k].shape == np.shape(v)
        np.testing.assert_array_equal(got[k], v)


def test_a_model_round_trips(tmp_path):
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    nn.save(model.state_dict(), tmp_path / "m.safetensors")
    other = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    other.load_state_dict(nn.load(tmp_path / "m.safetensors"))
    x = np.ones((2, 3), "float32")
    np.testing.assert_array_equal(np.asarray(model(x)), np.asarray(other(x)))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.safetensors"]  # written atomically: no temporary file left


def test_bf16_and_unpadded_headers_are_read(tmp_path):
    bits = (np.array([1.5, -2.0, 0.1], "float32").view("uint32") >> 16).astype("<u2")
    path = tmp_path / "b.safetensors"
    path.write_bytes(_file({"w": {"dtype": "BF16", "shape": [3], "data_offsets": [0, 6]}}, bits.tobytes(), pad=False))
    with pytest.warns(UserWarning, match="bfloat16"):
        got = nn.load(path)["w"]
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, [1.5, -2.0, 0.099609375])  # 0.1's top 16 bits, as torch's bfloat16


def test_interchange_with_the_safetensors_package(tmp_path):
    pkg = pytest.importorskip("safetensors.numpy")
    tensors = {"w": np.random.default_rng(0).normal(size=(3, 5)).astype("float32"), "i": np.arange(4, dtype="int16"),
               "z": np.zeros((0,), "float64"), "flag": np.array([True, False])}
    pkg.save_file(tensors, tmp_path / "theirs.safetensors", metadata={"k": "v"})
    got = nn.load(tmp_path / "theirs.safetensors")
    assert st.metadata(tmp_path / "theirs.safetensors") == {"k": "v"}
    st.save_file(tensors, tmp_path / "ours.safetensors", metadata={"k": "v"})
    back = pkg.load_file(tmp_path / "ours.safetensors")
    for k, v in tensors.items():
        np.testing.assert_array_equal(got[k], v)
        np.testing.assert_array_equal(back[k], v)
        assert got[k].dtype == back[k].dtype == v.dtype
    assert (tmp_path / "ours.safetensors").read_bytes() == (tmp_path / "theirs.safetensors").read_bytes()


def test_torch_tensors_saved_by_name_load_as_torchs(tmp_path):
    torch = pytest.importorskip("torch")
    ref = torch.nn.Linear(3, 2)
    nn.save({k: v.numpy() for k, v in ref.state_dict().items()}, tmp_path / "lin.safetensors")
    model = nn.Linear(3, 2)
    model.load_state_dict(nn.load(tmp_path / "lin.safetensors"))
    x = np.ones((1, 3), "float32")
    np.testing.assert_allclose(np.asarray(model(x)), ref(torch.tensor(x)).detach().numpy(), rtol=1e-6)


GOOD = {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}


@pytest.mark.parametrize("raw,match", [
    (b"", "too short"),
    (b"\x10\x00\x00", "too short"),
    (struct.pack("<Q", 10 ** 6) + b"{}", "header length"),
    (struct.pack("<Q", 2 ** 63) + b"{}", "header length"),
    (struct.pack("<Q", 4) + b"{ab}", "not JSON"),
    (struct.pack("<Q", 2) + b"[]", "not a JSON object"),
    (_file({"a": {"dtype": "F33", "shape": [2], "data_offsets": [0, 8]}}, bytes(8)), "unknown dtype 'F33'"),
    (_file({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 16]}}, bytes(8)), "out of range"),
    (_file({"a": {"dtype": "F32", "shape": [2], "data_offsets": [4, 2]}}, bytes(8)), "out of range"),
    (_file({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, bytes(8)), "do not hold shape"),
    (_file({"a": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}}, bytes(8)), "bad shape"),
    (_file({"a": {"dtype": "F32", "shape": [2]}}, bytes(8)), "exactly dtype"),
    (_file(GOOD, bytes(12)), "cover 8 of the buffer's 12"),
    (_file({**GOOD, "b": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}, bytes(8)), "gaps or overlaps"),
    (_file({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}, bytes(8)), "starts at byte 4"),
    (_file({"a": {"dtype": "BOOL", "shape": [1], "data_offsets": [0, 1]}}, b"\x07"), "bool bytes"),
    (_file({"__metadata__": {"k": 1}, **GOOD}, bytes(8)), "__metadata__"),
    (_file(GOOD, bytes(8))[:-3], "out of range"),  # truncated data
])
def test_damaged_files_are_checkpoint_errors_naming_the_cause(tmp_path, raw, match):
    path = tmp_path / "bad.safetensors"
    path.write_bytes(raw)
    with pytest.raises(CheckpointError, match=match) as err:
        nn.load(path)
    assert "bad.safetensors" in str(err.value) and isinstance(err.value, ValueError)


def test_save_refuses_what_the_format_cannot_hold(tmp_path):
    with pytest.raises(TypeError, match="'x'"):
        nn.save({"x": {"nested": np.ones(1)}}, tmp_path / "n.safetensors")
    with pytest.raises(TypeError, match="'o'"):
        nn.save({"o": np.array([object()])}, tmp_path / "n.safetensors")
    with pytest.raises(ValueError, match="metadata"):
        st.save_file({"a": np.ones(1)}, tmp_path / "n.safetensors", metadata={"k": 3})
    assert not list(tmp_path.iterdir())
