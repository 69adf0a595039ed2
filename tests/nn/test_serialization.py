"""nn.save / nn.load: round trips, damaged and foreign files, atomic writes."""
import io
import os
import zipfile

import numpy as np
import pytest

import nn
import tracer
from nn import serialization


def _state():
    return {
        "model": {"fc.weight": np.arange(6, dtype="float32").reshape(2, 3), "fc.bias": tracer.tensor([1.0, 2.0])},
        "opt": {"lr": 0.01, "step": 7, "state": {"0": {"exp_avg": np.ones((2, 3))}}},
        "flag": True,
        "labels": np.array([1, 2], "int64"),
    }


def test_round_trip_nested(tmp_path):
    path = tmp_path / "ckpt.npz"
    nn.save(_state(), path)
    got = nn.load(path)
    assert set(got) == {"model", "opt", "flag", "labels"}
    np.testing.assert_array_equal(got["model"]["fc.weight"], np.arange(6).reshape(2, 3))
    assert got["model"]["fc.weight"].dtype == np.float32
    np.testing.assert_array_equal(got["model"]["fc.bias"], [1.0, 2.0])
    assert got["opt"]["lr"].shape == () and float(got["opt"]["lr"]) == 0.01 and int(got["opt"]["step"]) == 7
    np.testing.assert_array_equal(got["opt"]["state"]["0"]["exp_avg"], np.ones((2, 3)))
    assert bool(got["flag"]) and got["labels"].dtype == np.int64
    assert sorted(os.listdir(tmp_path)) == ["ckpt.npz"]


def test_model_state_round_trip(tmp_path):
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    nn.save(model.state_dict(), str(tmp_path / "m.npz"))
    other = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    other.load_state_dict(nn.load(str(tmp_path / "m.npz")))
    x = np.ones((2, 3), "float32")
    np.testing.assert_array_equal(np.asarray(model(x)), np.asarray(other(x)))


def test_overwrite_replaces_whole_file(tmp_path):
    path = tmp_path / "m.npz"
    nn.save({"a": np.zeros(1000)}, path)
    nn.save({"b": np.ones(2)}, path)
    assert list(nn.load(path)) == ["b"]


def test_bad_keys_and_values_are_rejected(tmp_path):
    with pytest.raises(ValueError, match="a/b"):
        nn.save({"a/b": np.zeros(1)}, tmp_path / "x.npz")
    with pytest.raises(TypeError, match="'x'.*str"):
        nn.save({"x": "text"}, tmp_path / "x.npz")
    with pytest.raises(TypeError, match="only arrays"):
        nn.save({"x": np.array([object()])}, tmp_path / "x.npz")
    assert os.listdir(tmp_path) == []


def _expect_damaged(path):
    with pytest.raises(ValueError, match="damaged or not a tracegrad file"):
        nn.load(path)


def test_truncated_file(tmp_path):
    path = tmp_path / "m.npz"
    nn.save({"w": np.arange(1000.0)}, path)
    data = path.read_bytes()
    for cut in (len(data) // 2, len(data) - 10, 10):
        path.write_bytes(data[:cut])
        _expect_damaged(path)


def test_corrupted_bytes(tmp_path):
    path = tmp_path / "m.npz"
    nn.save({"w": np.arange(1000.0)}, path)
    data = bytearray(path.read_bytes())
    data[len(data) // 3] ^= 0xFF  # inside the array's bytes: the zip CRC catches it
    path.write_bytes(bytes(data))
    _expect_damaged(path)


def test_random_bytes_and_empty_file(tmp_path):
    path = tmp_path / "junk.npz"
    path.write_bytes(np.random.default_rng(0).bytes(4096))
    _expect_damaged(path)
    path.write_bytes(b"")
    _expect_damaged(path)


def test_pickle_containing_npz(tmp_path):
    path = tmp_path / "evil.npz"
    np.savez(path, **{serialization.MARKER: np.asarray(1), "x": np.array([{"a": 1}], dtype=object)})
    _expect_damaged(path)
    import pickle

    path.write_bytes(pickle.dumps({"w": np.zeros(2)}))
    _expect_damaged(path)


def test_foreign_npz_and_npy(tmp_path):
    np.savez(tmp_path / "plain.npz", w=np.zeros(2))
    _expect_damaged(tmp_path / "plain.npz")
    np.save(tmp_path / "single.npy", np.zeros(2))
    _expect_damaged(tmp_path / "single.npy")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("readme.txt", "hello")
    (tmp_path / "other.zip").write_bytes(buf.getvalue())
    _expect_damaged(tmp_path / "other.zip")


def test_missing_file_is_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        nn.load(tmp_path / "nope.npz")


def test_failed_write_leaves_no_partial_file(tmp_path, monkeypatch):
    path = tmp_path / "m.npz"
    nn.save({"old": np.zeros(3)}, path)

    def explode(f, **arrays):
        f.write(b"partial bytes")
        raise OSError("disk full")

    monkeypatch.setattr(serialization.np, "savez", explode)
    with pytest.raises(OSError, match="disk full"):
        nn.save({"new": np.ones(3)}, path)
    assert sorted(os.listdir(tmp_path)) == ["m.npz"]  # no temp file left behind
    assert list(nn.load(path)) == ["old"]  # the previous file is intact
    with pytest.raises(OSError):
        nn.save({"new": np.ones(3)}, tmp_path / "fresh.npz")
    assert sorted(os.listdir(tmp_path)) == ["m.npz"]


def test_newer_format_version_is_refused(tmp_path):
    np.savez(tmp_path / "v9.npz", **{serialization.MARKER: np.asarray(9), "w": np.zeros(1)})
    with pytest.raises(ValueError, match="format version 9"):
        nn.load(tmp_path / "v9.npz")
