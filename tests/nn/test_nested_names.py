"""Dotted names of modules nested three levels deep: state_dict, named_parameters, named_modules,
load_state_dict and save/load all keep every prefix, not only the first."""
import numpy as np
import pytest

import nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 3, bias=False))
        self.norm = nn.LayerNorm(3)

    def forward(self, x):
        return self.norm(self.mlp(x))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(2, 3)
        self.blocks = nn.Sequential(Block(), Block())
        self.head = nn.Linear(3, 1)

    def forward(self, x):
        return self.head(self.blocks(self.embed(x)))


def _block_names(prefix):
    return [f"{prefix}.mlp.0.weight", f"{prefix}.mlp.0.bias", f"{prefix}.mlp.2.weight", f"{prefix}.norm.weight",
            f"{prefix}.norm.bias"]


NAMES = ["embed.weight", "embed.bias", *_block_names("blocks.0"), *_block_names("blocks.1"), "head.weight",
         "head.bias"]


def test_state_dict_and_named_parameters_keep_every_prefix():
    m = Net()
    assert list(m.state_dict()) == NAMES
    assert [n for n, _ in m.named_parameters()] == NAMES
    assert m.state_dict()["blocks.1.mlp.2.weight"].shape == (3, 4)


def test_named_modules_keep_every_prefix():
    names = [n for n, _ in Net().named_modules()]
    assert names == ["", "embed", "blocks", "blocks.0", "blocks.0.mlp", "blocks.0.mlp.0", "blocks.0.mlp.1",
                     "blocks.0.mlp.2", "blocks.0.norm", "blocks.1", "blocks.1.mlp", "blocks.1.mlp.0",
                     "blocks.1.mlp.1", "blocks.1.mlp.2", "blocks.1.norm", "head"]


def test_deep_state_dict_loads_into_the_right_parameters(tmp_path):
    src, dst = Net(), Net()
    rng = np.random.default_rng(0)
    state = {k: rng.standard_normal(v.shape).astype(v.dtype) for k, v in src.state_dict().items()}
    src.load_state_dict(state)
    np.testing.assert_array_equal(src.blocks[1].mlp[2].weight.numpy(), state["blocks.1.mlp.2.weight"])
    np.testing.assert_array_equal(src.blocks[0].norm.bias.numpy(), state["blocks.0.norm.bias"])
    nn.save(src.state_dict(), tmp_path / "net.npz")
    dst.load_state_dict(nn.load(tmp_path / "net.npz"))
    x = rng.standard_normal((5, 2)).astype("float32")
    np.testing.assert_array_equal(dst(x).numpy(), src(x).numpy())
    with pytest.raises(KeyError, match="blocks.1.mlp.0.bias"):
        dst.load_state_dict({k: v for k, v in state.items() if k != "blocks.1.mlp.0.bias"})


def test_deep_names_match_torch():
    torch = pytest.importorskip("torch")
    tnn = torch.nn

    class TBlock(tnn.Module):
        def __init__(self):
            super().__init__()
            self.mlp = tnn.Sequential(tnn.Linear(3, 4), tnn.Tanh(), tnn.Linear(4, 3, bias=False))
            self.norm = tnn.LayerNorm(3)

    class TNet(tnn.Module):
        def __init__(self):
            super().__init__()
            self.embed = tnn.Linear(2, 3)
            self.blocks = tnn.Sequential(TBlock(), TBlock())
            self.head = tnn.Linear(3, 1)

    assert list(TNet().state_dict()) == NAMES
