"""nn.load reads torch.save's zip checkpoints (made by torch here) with a restricted unpickler: dtypes, strides,
offsets, shared storages, parameters, nested optimizer state; damaged and malicious files are refused by a
documented ValueError subclass and nothing in them runs."""
import io
import os
import pickle
import zipfile

import numpy as np
import pytest

import nn
from nn.checkpoint_errors import CheckpointError, UnsafeCheckpointError

torch = pytest.importorskip("torch")

DTYPES = ["float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool"]


def _save(obj, path):
    torch.save(obj, path)
    return path


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_dtype_round_trips_exactly(tmp_path, dtype):
    t = (torch.arange(-6, 6).reshape(3, 4) % (2 if dtype == "bool" else 100)).to(getattr(torch, dtype))
    got = nn.load(_save({"t": t, "s": t[1, 2].clone()}, tmp_path / "x.pt"))
    assert got["t"].dtype == np.dtype(dtype) and got["t"].shape == (3, 4)
    np.testing.assert_array_equal(got["t"], t.numpy())
    assert got["s"].shape == () and got["s"] == t[1, 2].item()


def test_bfloat16_is_widened_to_float32_with_a_warning(tmp_path):
    t = torch.tensor([1.5, -2.25, 3e38, 1e-3]).to(torch.bfloat16)
    with pytest.warns(UserWarning, match="bfloat16.*float32"):
        got = nn.load(_save({"w": t}, tmp_path / "b.pt"))["w"]
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, t.float().numpy())


def test_strides_offsets_and_shared_storages(tmp_path):
    base = torch.arange(24.0).reshape(4, 6)
    views = {"base": base, "t": base.t(), "cols": base[:, 1::2], "row": base[2], "tail": base.view(-1)[5:17],
             "expanded": torch.arange(3.0).expand(4, 3), "scalar_view": base[3, 4]}
    got = nn.load(_save(views, tmp_path / "v.pt"))
    for k, v in views.items():
        assert got[k].shape == tuple(v.shape), k
        np.testing.assert_array_equal(got[k], v.numpy(), err_msg=k)
    assert np.shares_memory(got["base"], got["row"]) and np.shares_memory(got["t"], got["cols"])
    got["base"][2, 0] = -1  # shared as after torch.load
    assert got["row"][0] == -1


def test_a_models_state_dict_loads_into_the_same_tracegrad_model(tmp_path):
    ref = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    path = _save(ref.state_dict(), tmp_path / "model.pth")
    state = nn.load(path)
    assert list(state) == list(ref.state_dict())
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    model.load_state_dict(state)
    x = np.random.default_rng(0).normal(size=(5, 3)).astype("float32")
    np.testing.assert_allclose(np.asarray(model(x)), ref(torch.tensor(x)).detach().numpy(), rtol=1e-6, atol=1e-6)


def test_parameters_nested_containers_and_optimizer_state(tmp_path):
    lin = torch.nn.Linear(2, 3)
    opt = torch.optim.Adam(lin.parameters(), lr=0.01, betas=(0.8, 0.9))
    lin(torch.ones(1, 2)).sum().backward()
    opt.step()
    obj = {"params": lin.state_dict(keep_vars=True), "opt": opt.state_dict(), "epoch": 3, "names": ["a", "b"],
           "pair": (1.5, None), "flag": True, "size": torch.Size([2, 3]), "dtype": torch.float16}
    got = nn.load(_save(obj, tmp_path / "ckpt.pt"))
    np.testing.assert_array_equal(got["params"]["weight"], lin.weight.detach().numpy())
    assert isinstance(got["params"]["weight"], np.ndarray)
    want = opt.state_dict()
    assert got["opt"]["param_groups"][0]["betas"] == (0.8, 0.9) and got["opt"]["param_groups"][0]["params"] == [0, 1]
    for i in (0, 1):
        np.testing.assert_array_equal(got["opt"]["state"][i]["exp_avg"], want["state"][i]["exp_avg"].numpy())
        assert float(got["opt"]["state"][i]["step"]) == 1.0
    assert got["epoch"] == 3 and got["names"] == ["a", "b"] and got["pair"] == (1.5, None) and got["flag"] is True
    assert got["size"] == (2, 3) and got["dtype"] == "float16"


def _evil(payload: bytes, path, extra=()):
    """A torch-shaped zip whose data.pkl is `payload`."""
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("archive/data.pkl", payload)
        z.writestr("archive/byteorder", "little")
        for name, data in extra:
            z.writestr(name, data)
    return path


class _System:
    def __reduce__(self):
        return (os.system, ("touch PWNED",))


class _Eval:
    def __reduce__(self):
        return (eval, ("__import__('os').system('touch PWNED')",))


@pytest.mark.parametrize("payload,name", [
    (pickle.dumps({"w": _System()}, protocol=2), "posix.system"),
    (pickle.dumps(_Eval(), protocol=4), "builtins.eval"),
    (b"\x80\x02csubprocess\ncall\n(X\x02\x00\x00\x00lsq\x00tR.", "subprocess.call"),
    (b"\x80\x02ctorch._utils\n_rebuild_tensor_v2\nctorch\nload\n\x86.", "torch.load"),
    (b"\x80\x02cbuiltins\ngetattr\n.", "builtins.getattr"),
    (b"\x80\x04\x95\x00\x00\x00\x00\x00\x00\x00\x00\x8c\x02os\x8c\x05popen\x93.", "os.popen"),
])
def test_malicious_globals_are_refused_and_never_run(tmp_path, monkeypatch, payload, name):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UnsafeCheckpointError, match=name.replace(".", r"\.")) as err:
        nn.load(_evil(payload, tmp_path / "evil.pt"))
    assert str(tmp_path / "evil.pt") in str(err.value) and isinstance(err.value, ValueError)
    assert not (tmp_path / "PWNED").exists()


def test_build_on_anything_but_a_dict_is_refused(tmp_path):
    # _rebuild_parameter's result (an array) given a state through BUILD: __setstate__ is never called on it
    real = io.BytesIO()
    torch.save({"w": torch.zeros(2)}, real)
    with zipfile.ZipFile(real) as z:
        storage = z.read("archive/data/0")
    payload = (b"\x80\x02ctorch._utils\n_rebuild_tensor_v2\n((X\x07\x00\x00\x00storagectorch\nFloatStorage\n"
               b"X\x01\x00\x00\x000X\x03\x00\x00\x00cpuK\x02tQK\x00K\x02\x85K\x01\x85\x89)tR}X\x01\x00\x00\x00a"
               b"K\x01sb.")
    with pytest.raises(UnsafeCheckpointError, match="BUILD"):
        nn.load(_evil(payload, tmp_path / "b.pt", [("archive/data/0", storage)]))


def _torch_file(tmp_path, obj=None):
    path = tmp_path / "m.pt"
    torch.save(obj if obj is not None else {"w": torch.arange(1000.0)}, path)
    return path


def test_truncated_and_corrupted_checkpoints_are_checkpoint_errors(tmp_path):
    path = _torch_file(tmp_path)
    data = path.read_bytes()
    for cut in (len(data) - 30, len(data) // 2, 200, 40):
        path.write_bytes(data[:cut])
        with pytest.raises(CheckpointError, match="m.pt"):
            nn.load(path)
    bad = bytearray(data)
    start = data.index(np.arange(1000.0, dtype="float32").tobytes()[:64])
    bad[start + 100] ^= 0xFF  # inside the storage: the zip CRC catches it
    path.write_bytes(bytes(bad))
    with pytest.raises(CheckpointError, match="damaged PyTorch checkpoint"):
        nn.load(path)


def test_storage_layouts_out_of_range_are_refused(tmp_path):
    path = _torch_file(tmp_path, {"w": torch.arange(4.0)})
    with zipfile.ZipFile(path) as z:
        entries = {n: z.read(n) for n in z.namelist()}
    prefix = next(n for n in entries if n.endswith("data.pkl"))[:-len("data.pkl")]  # torch names it after the file
    pkl = entries[prefix + "data.pkl"]
    layout = b"QK\x00K\x04\x85q\x08K\x01\x85"  # offset 0, size (4,), stride (1,)
    for good, bad, match in [(layout, b"QK\x01K\x04\x85q\x08K\x01\x85", "reaches element 4"),
                             (layout, b"QK\x00K\x04\x85q\x08K\x05\x85", "reaches element 15"),
                             (layout, b"QK\x00K\x04\x85q\x08J\xff\xff\xff\xff\x85", "bad layout"),
                             (b"FloatStorage", b"EvilStorage", "refused the global torch.EvilStorage")]:
        assert good in pkl
        entries[prefix + "data.pkl"] = pkl.replace(good, bad)
        with zipfile.ZipFile(path, "w") as z:
            for n, d in entries.items():
                z.writestr(n, d)
        with pytest.raises(CheckpointError, match=match):
            nn.load(path)
    entries[prefix + "data.pkl"] = pkl
    entries[prefix + "data/0"] = entries[prefix + "data/0"][:-4]  # a storage shorter than its numel
    with zipfile.ZipFile(path, "w") as z:
        for n, d in entries.items():
            z.writestr(n, d)
    with pytest.raises(CheckpointError, match="not 4 elements"):
        nn.load(path)


def test_legacy_format_is_named(tmp_path):
    path = tmp_path / "old.pt"
    torch.save({"w": torch.zeros(1)}, path, _use_new_zipfile_serialization=False)
    with pytest.raises(CheckpointError, match="legacy"):
        nn.load(path)


def test_npz_files_still_load_and_save_never_pickles(tmp_path):
    nn.save({"a": np.ones(2)}, tmp_path / "x.pt")  # .npz bytes whatever the name
    assert zipfile.ZipFile(tmp_path / "x.pt").namelist()[0].endswith(".npy")
    np.testing.assert_array_equal(nn.load(tmp_path / "x.pt")["a"], np.ones(2))
