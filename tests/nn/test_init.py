"""nn.init: PyTorch's fans and bounds, in-place filling, and a seedable generator."""
import math

import numpy as np
import pytest

import nn
from nn import init


def test_fans_match_pytorch_rules():
    assert init.fan_in_and_fan_out((8, 4)) == (4, 8)
    assert init.fan_in_and_fan_out((6, 2, 3, 5)) == (30, 90)
    assert init.fan_in_and_fan_out((3, 1, 1)) == (1, 3)
    with pytest.raises(ValueError, match="2 dimensions"):
        init.fan_in_and_fan_out((3,))


def test_gains_are_pytorchs_values():
    assert init.calculate_gain("relu") == pytest.approx(math.sqrt(2))
    assert init.calculate_gain("tanh") == pytest.approx(5 / 3)
    assert init.calculate_gain("leaky_relu", math.sqrt(5)) == pytest.approx(math.sqrt(1 / 3))
    assert init.calculate_gain("leaky_relu") == pytest.approx(math.sqrt(2 / (1 + 0.01**2)))
    assert init.calculate_gain("linear") == init.calculate_gain("sigmoid") == 1
    assert init.calculate_gain("selu") == pytest.approx(3 / 4)


def test_fans_match_torch():
    torch = pytest.importorskip("torch")
    for shape in [(8, 4), (6, 2, 3, 5), (3, 1, 1)]:
        assert init.fan_in_and_fan_out(shape) == torch.nn.init._calculate_fan_in_and_fan_out(torch.empty(shape))
    for name, param in [("relu", None), ("tanh", None), ("leaky_relu", math.sqrt(5)), ("linear", None)]:
        assert init.calculate_gain(name, param) == pytest.approx(torch.nn.init.calculate_gain(name, param))


def test_default_layer_inits_have_torch_bounds():
    lin = nn.Linear(50, 40)
    bound = 1 / math.sqrt(50)  # kaiming_uniform_(a=sqrt(5)) reduces to this, as for the bias
    for p in (lin.weight, lin.bias):
        a = p.numpy()
        assert np.abs(a).max() <= bound and np.abs(a).max() > 0.9 * bound
    conv = nn.Conv2d(4, 8, 3)
    bound = 1 / math.sqrt(4 * 9)
    assert np.abs(conv.weight.numpy()).max() <= bound and np.abs(conv.bias.numpy()).max() <= bound
    emb = nn.Embedding(200, 50).weight.numpy()
    assert abs(emb.mean()) < 0.05 and abs(emb.std() - 1) < 0.05
    ln = nn.LayerNorm(5)
    assert (ln.weight.numpy() == 1).all() and (ln.bias.numpy() == 0).all()
    mha = nn.MultiheadAttention(8, 2)
    assert (mha.in_proj_bias.numpy() == 0).all() and (mha.out_proj.bias.numpy() == 0).all()
    assert np.abs(mha.in_proj_weight.numpy()).max() <= math.sqrt(6 / (8 + 24))


def test_manual_seed_makes_models_reproducible():
    init.manual_seed(123)
    a = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2)).state_dict()
    init.manual_seed(123)
    b = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2)).state_dict()
    c = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2)).state_dict()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])
    assert not np.array_equal(a["0.weight"], c["0.weight"])


def test_initialisers_fill_in_place_and_keep_dtype():
    p = nn.Parameter(np.empty((30, 20), "float32"))
    data = p._data
    assert init.xavier_uniform_(p, gain=2.0) is p and p._data is data and p.dtype == "float32"
    assert np.abs(data).max() <= 2.0 * math.sqrt(6 / 50)
    init.kaiming_uniform_(p, mode="fan_out", nonlinearity="relu")
    assert np.abs(data).max() <= math.sqrt(2) * math.sqrt(3 / 30)
    init.normal_(p, mean=3.0, std=0.1)
    assert abs(data.mean() - 3.0) < 0.02
    init.uniform_(p, -2, -1)
    assert data.max() <= -1 and data.min() >= -2
    init.zeros_(p)
    assert not data.any()
    init.ones_(p)
    assert (data == 1).all()
    arr = np.zeros(4)
    init.constant_(arr, 0.5)  # plain arrays work too
    assert (arr == 0.5).all()
    with pytest.raises(ValueError, match="mode"):
        init.kaiming_uniform_(p, mode="fan_avg")
    with pytest.raises(ValueError, match="nonlinearity"):
        init.calculate_gain("swish")
