"""Review findings on Module: state dicts of shared parameters, load_state_dict's return value, attribute
assignment over registered names, and the `training` flag, each checked against torch.nn.Module."""
import numpy as np
import pytest

import nn
import tracer


class Tied(nn.Module):
    """Two Linears sharing one weight (weight tying, as a GPT's embedding and head)."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(3, 3)
        self.b = nn.Linear(3, 3)
        self.b.weight = self.a.weight


def test_state_dict_lists_every_name_of_a_shared_parameter_as_torch():
    m = Tied()
    assert list(m.state_dict()) == ["a.weight", "a.bias", "b.weight", "b.bias"]
    assert [n for n, _ in m.named_parameters()] == ["a.weight", "a.bias", "b.bias"]  # parameters stay unique
    shared = nn.Linear(2, 2)
    seq = nn.Sequential(shared, nn.Tanh(), shared)
    assert list(seq.state_dict()) == ["0.weight", "0.bias", "2.weight", "2.bias"]


def test_state_dict_of_a_tied_model_loads_and_round_trips():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((3, 3)).astype("float32")
    state = {"a.weight": w, "a.bias": np.ones(3, "float32"), "b.weight": w, "b.bias": np.zeros(3, "float32")}
    m = Tied()
    m.load_state_dict(state)
    np.testing.assert_array_equal(m.b.weight.numpy(), w)
    np.testing.assert_array_equal(m.a.bias.numpy(), 1)
    assert m.a.weight is m.b.weight  # still tied
    other = Tied()
    other.load_state_dict(m.state_dict())  # our own state dict round-trips under strict=True
    np.testing.assert_array_equal(other.a.weight.numpy(), w)
    np.testing.assert_array_equal(other.b.bias.numpy(), 0)


def test_torch_state_dict_of_a_tied_model_loads_and_round_trips():
    torch = pytest.importorskip("torch")

    class TorchTied(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Linear(3, 3)
            self.b = torch.nn.Linear(3, 3)
            self.b.weight = self.a.weight

    t, m = TorchTied(), Tied()
    assert list(m.state_dict()) == list(t.state_dict())
    m.load_state_dict({k: v.detach().numpy() for k, v in t.state_dict().items()})
    np.testing.assert_array_equal(m.b.weight.numpy(), t.b.weight.detach().numpy())
    assert m.a.weight is m.b.weight  # still tied
    other = Tied()
    other.load_state_dict(m.state_dict())  # our own state dict round-trips under strict=True
    np.testing.assert_array_equal(other.a.weight.numpy(), m.a.weight.numpy())


PARTIAL_STATE = {"a.weight": np.zeros((3, 3), "float32"), "zz": np.zeros(1, "float32")}


def test_load_state_dict_returns_missing_and_unexpected_keys():
    m = Tied()
    result = m.load_state_dict(PARTIAL_STATE, strict=False)
    assert result.missing_keys == ["a.bias", "b.weight", "b.bias"]
    assert result.unexpected_keys == ["zz"]
    missing, unexpected = result  # a named tuple, as torch's
    assert (missing, unexpected) == (result.missing_keys, result.unexpected_keys)
    assert not m.a.weight.numpy().any()  # what was there still loads
    assert tuple(m.load_state_dict(m.state_dict())) == ([], [])


def test_load_state_dict_returns_missing_and_unexpected_keys_as_torch():
    torch = pytest.importorskip("torch")
    m, t = Tied(), torch.nn.Module()
    t.a, t.b = torch.nn.Linear(3, 3), torch.nn.Linear(3, 3)
    result = m.load_state_dict(PARTIAL_STATE, strict=False)
    expected = t.load_state_dict({k: torch.tensor(v) for k, v in PARTIAL_STATE.items()}, strict=False)
    assert result.missing_keys == expected.missing_keys
    assert result.unexpected_keys == expected.unexpected_keys


def test_assigning_a_non_parameter_over_a_parameter_is_refused_as_torch():
    m = nn.Linear(2, 2)
    with pytest.raises(TypeError, match="weight"):
        m.weight = tracer.tensor(np.zeros((2, 2), "float32"))
    assert [n for n, _ in m.named_parameters()] == ["weight", "bias"]  # still registered
    with pytest.raises(TypeError, match="0"):
        nn.Sequential(nn.Linear(2, 2)).__setattr__("0", 3)
    m.bias = None  # None is allowed, as in torch: the layer then has no bias
    assert [n for n, _ in m.named_parameters()] == ["weight"]


def test_training_flag_can_be_assigned_like_torch():
    m = nn.Sequential(nn.Dropout(0.5))
    m.training = False  # torch sets only this module's flag
    assert not m.training and m[0].training
