"""Module and Parameter: registration, names, modes, state dicts and their errors."""
import numpy as np
import pytest

import nn
import tracer


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(3, 4)
        self.scale = nn.Parameter(np.ones(4, "float32"))
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(4, 2, bias=False)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)) * self.scale)


def test_parameter_is_a_concrete_float_tensor():
    p = nn.Parameter(np.arange(3))
    assert isinstance(p, tracer.Tensor) and p.dtype == "float32" and p.shape == (3,)
    src = np.zeros(2, "float64")
    q = nn.Parameter(src)
    q._data += 1
    assert q.dtype == "float64" and src[0] == 0  # owns a copy
    assert repr(p).startswith("Parameter(")


def test_parameter_made_inside_a_trace_is_captured_not_constant():
    holder = {}

    def f(x):
        holder["p"] = p = nn.Parameter(np.ones(2, "float32"))
        return x * p

    mod = tracer.trace(f, tracer.spec((2,)))
    assert len(mod["main"].params) == 2 and holder["p"]._data is not None


def test_named_parameters_follow_pytorch_order_and_names():
    m = Block()
    names = [n for n, _ in m.named_parameters()]
    assert names == ["scale", "fc1.weight", "fc1.bias", "fc2.weight"]  # own parameters first, as torch
    assert [p._name for _, p in m.named_parameters()] == names
    assert list(m.parameters())[1] is m.fc1.weight
    assert [n for n, _ in m.named_modules()] == ["", "fc1", "act", "fc2"]
    assert list(m.children()) == [m.fc1, m.act, m.fc2]


def test_nested_sequential_names_and_shared_parameters_listed_once():
    shared = nn.Linear(2, 2)
    m = nn.Sequential(nn.Sequential(shared, nn.Tanh()), shared)
    assert [n for n, _ in m.named_parameters()] == ["0.0.weight", "0.0.bias"]
    assert len(list(m.parameters())) == 2


def test_reassigning_and_deleting_attributes_updates_registration():
    m = Block()
    m.fc2 = nn.Linear(4, 5)
    m.scale = None
    assert [n for n, _ in m.named_parameters()] == ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
    del m.fc2
    assert [n for n, _ in m.named_parameters()] == ["fc1.weight", "fc1.bias"]


def test_missing_super_init_is_explained():
    class Bad(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(np.zeros(1))

    with pytest.raises(AttributeError, match="super\\(\\).__init__"):
        Bad()


def test_sequential_indexing_len_iteration_slicing():
    m = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    assert len(m) == 3 and isinstance(m[1], nn.ReLU) and m[-1] is m[2]
    assert list(m) == [m[0], m[1], m[2]]
    tail = m[1:]
    assert isinstance(tail, nn.Sequential) and len(tail) == 2
    assert [n for n, _ in tail.named_parameters()] == ["2.weight", "2.bias"]
    assert m[2].weight._name == "2.weight"  # slicing does not rename the original's parameters
    x = np.ones((4, 2), "float32")
    np.testing.assert_allclose(np.asarray(m(x)), np.asarray(m[2](m[1](m[0](x)))))


def test_train_eval_propagate():
    m = nn.Sequential(nn.Linear(2, 2), nn.Sequential(nn.Dropout(0.5)))
    assert m.eval() is m and not any(x.training for x in m.modules())
    m.train()
    assert all(x.training for x in m.modules())


def test_state_dict_is_a_copy_and_round_trips():
    m, other = Block(), Block()
    sd = m.state_dict()
    assert list(sd) == [n for n, _ in m.named_parameters()]
    sd["scale"][:] = 7
    assert float(m.scale.numpy()[0]) == 1.0
    weight_array = other.fc1.weight._data
    other.load_state_dict({k: tracer.tensor(v) for k, v in m.state_dict().items()})
    assert other.fc1.weight._data is weight_array  # loaded in place: compiled functions see it
    for k, v in m.state_dict().items():
        np.testing.assert_array_equal(other.state_dict()[k], v)


def test_load_state_dict_names_every_problem_at_once():
    m = Block()
    sd = m.state_dict()
    del sd["fc1.bias"]
    sd["extra.weight"] = np.zeros(1)
    sd["fc2.weight"] = np.zeros((3, 3))
    before = m.state_dict()
    with pytest.raises(nn.StateDictError) as info:
        m.load_state_dict(sd)
    msg = str(info.value)
    for part in ("fc1.bias", "extra.weight", "fc2.weight", "Size([2, 4])", "Size([3, 3])"):
        assert part in msg
    assert isinstance(info.value, KeyError) and isinstance(info.value, ValueError)
    for k, v in before.items():  # nothing written when rejected
        np.testing.assert_array_equal(m.state_dict()[k], v)


def test_load_state_dict_not_strict_ignores_missing_and_unexpected_but_not_shapes():
    m = Block()
    m.load_state_dict({"scale": np.full(4, 2.0), "junk": np.zeros(1)}, strict=False)
    assert float(m.scale.numpy()[0]) == 2.0
    with pytest.raises(ValueError, match="scale"):
        m.load_state_dict({"scale": np.zeros(5)}, strict=False)


def test_repr_lists_children():
    text = repr(nn.Sequential(nn.Linear(2, 3), nn.ReLU()))
    assert "(0): Linear(in_features=2, out_features=3, bias=True)" in text and "(1): ReLU()" in text
