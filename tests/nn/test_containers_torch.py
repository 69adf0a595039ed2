"""Containers against torch.nn (issue 21 item 1): Sequential(OrderedDict), ModuleList, ModuleDict, ParameterList,
ParameterDict, their operations, state-dict keys, reprs and outputs, and a compiled step that sees swaps."""
from collections import OrderedDict

import numpy as np
import pytest

import autodiff
import nn
import tracer

torch = pytest.importorskip("torch")
tnn = torch.nn
RNG = np.random.default_rng(0)
X = RNG.standard_normal((3, 4)).astype("float32")


def keys(m):
    return list(m.state_dict())


def load_from_torch(ours, theirs):
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    return ours


def test_sequential_of_an_ordered_dict_registers_its_names():
    ours = nn.Sequential(OrderedDict([("fc", nn.Linear(4, 3)), ("act", nn.ReLU()), ("out", nn.Linear(3, 2))]))
    theirs = tnn.Sequential(OrderedDict([("fc", tnn.Linear(4, 3)), ("act", tnn.ReLU()), ("out", tnn.Linear(3, 2))]))
    assert len(ours) == 3 and keys(ours) == keys(theirs) == ["fc.weight", "fc.bias", "out.weight", "out.bias"]
    assert ours.fc is ours[0] and repr(ours) == repr(theirs)
    load_from_torch(ours, theirs)
    np.testing.assert_allclose(ours(X).numpy(), theirs(torch.tensor(X)).detach().numpy(), rtol=1e-5, atol=1e-6)


def test_sequential_operations_keep_torchs_names():
    ours, theirs = nn.Sequential(nn.Linear(4, 4), nn.ReLU()), tnn.Sequential(tnn.Linear(4, 4), tnn.ReLU())
    for seq, lib in ((ours, nn), (theirs, tnn)):
        seq.append(lib.Linear(4, 2))
        seq.insert(1, lib.Tanh())
        seq.extend([lib.Identity(), lib.Linear(2, 2)])
        seq[0] = lib.Linear(4, 4, bias=False)
        del seq[2]
    assert keys(ours) == keys(theirs) and repr(ours) == repr(theirs)
    assert len(ours) == len(theirs) == 5 and [type(m).__name__ for m in ours] == [type(m).__name__ for m in theirs]
    tail = ours[1:3]
    assert isinstance(tail, nn.Sequential) and list(tail._modules) == list(theirs[1:3]._modules) == ["1", "2"]
    assert ours[-1] is ours[4]
    with pytest.raises(IndexError):
        ours[5]
    with pytest.raises(IndexError):
        theirs[5]
    both = ours + nn.Sequential(nn.ReLU())
    assert isinstance(both, nn.Sequential) and len(both) == 6


def test_module_list_operations_as_torch():
    ours, theirs = nn.ModuleList([nn.Linear(2, 2)]), tnn.ModuleList([tnn.Linear(2, 2)])
    for ml, lib in ((ours, nn), (theirs, tnn)):
        ml.append(lib.Linear(2, 3))
        ml.extend([lib.ReLU(), lib.Linear(3, 1)])
        ml.insert(1, lib.Linear(2, 2, bias=False))
        ml += [lib.Tanh()]
        ml[0] = lib.Linear(2, 2)
        del ml[3]
    assert keys(ours) == keys(theirs) and repr(ours) == repr(theirs)
    assert len(ours) == 5 and [type(m).__name__ for m in ours] == [type(m).__name__ for m in theirs]
    part = ours[1:3]
    assert isinstance(part, nn.ModuleList) and list(part._modules) == list(theirs[1:3]._modules) == ["0", "1"]
    assert ours[-1] is ours[4] and ours[1] is part[0]
    assert part[0].weight._name == "1.weight"  # slicing did not rename the original's parameters
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    with pytest.raises(NotImplementedError):
        ours(X)


def test_module_list_repr_groups_repeated_modules_as_torch():
    ours = nn.ModuleList([nn.Linear(2, 2) for _ in range(3)] + [nn.ReLU(), nn.Linear(2, 2)])
    theirs = tnn.ModuleList([tnn.Linear(2, 2) for _ in range(3)] + [tnn.ReLU(), tnn.Linear(2, 2)])
    assert repr(ours) == repr(theirs)
    assert repr(nn.ModuleList()) == repr(tnn.ModuleList())


def test_module_dict_as_torch():
    def build(lib):
        d = lib.ModuleDict({"wte": lib.Embedding(5, 3), "h": lib.ModuleList([lib.Linear(3, 3)])})
        d.update([("ln_f", lib.LayerNorm(3))])
        d["head"] = lib.Linear(3, 5, bias=False)
        return d

    ours, theirs = build(nn), build(tnn)
    assert keys(ours) == keys(theirs) and repr(ours) == repr(theirs)
    assert list(ours) == list(theirs) == ["wte", "h", "ln_f", "head"]
    assert list(ours.keys()) == list(theirs.keys()) and "h" in ours and "x" not in ours
    assert ours.wte is ours["wte"] and [k for k, _ in ours.items()] == list(ours)
    assert ours.pop("ln_f") is not None and theirs.pop("ln_f") is not None
    assert keys(ours) == keys(theirs) and len(ours) == 3
    with pytest.raises(KeyError, match="already exists"):
        ours["keys"] = nn.ReLU()  # a method's name, refused as torch's add_module does
    with pytest.raises(KeyError, match="already exists"):
        theirs["keys"] = tnn.ReLU()


def test_parameter_list_and_dict_as_torch():
    a, b = RNG.standard_normal((2, 3)).astype("float32"), RNG.standard_normal(3).astype("float32")
    ours = nn.ParameterList([a, nn.Parameter(b)])
    theirs = tnn.ParameterList([tnn.Parameter(torch.tensor(a)), tnn.Parameter(torch.tensor(b))])
    ours.append(np.zeros(2, "float32"))
    theirs.append(tnn.Parameter(torch.zeros(2)))
    assert isinstance(ours[0], nn.Parameter) and ours[1].shape == (3,) and len(ours) == 3
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    assert repr(ours) == repr(theirs)
    od = nn.ParameterDict({"scale": np.ones(3, "float32")})
    td = tnn.ParameterDict({"scale": tnn.Parameter(torch.ones(3))})
    od["shift"], td["shift"] = np.zeros((2, 2), "float32"), tnn.Parameter(torch.zeros(2, 2))
    assert keys(od) == keys(td) == ["scale", "shift"] and repr(od) == repr(td)
    assert list(od) == list(td) and "scale" in od and isinstance(od["shift"], nn.Parameter)

    class Holder(nn.Module):
        def __init__(self):
            super().__init__()
            self.ps = nn.ParameterList([nn.Parameter(a)])

        def forward(self, x):
            return (x @ self.ps[0].T).sum()

    h = Holder()
    _, grads = autodiff.value_and_grad(h, wrt=h.parameters())(X[:, :3])
    np.testing.assert_allclose(grads[0].numpy(), X[:, :3].sum(0)[None].repeat(2, 0), rtol=1e-5)


def test_identity_and_unflatten_as_torch():
    assert nn.Identity(54, unused="x")(X) is not None and repr(nn.Identity(3)) == repr(tnn.Identity(3))
    ours, theirs = nn.Unflatten(1, (2, 2)), tnn.Unflatten(1, (2, 2))
    np.testing.assert_array_equal(ours(X).numpy(), theirs(torch.tensor(X)).numpy())
    assert repr(ours) == repr(theirs) and repr(nn.Flatten()) == repr(tnn.Flatten())
    assert nn.Unflatten(-1, (-1, 2))(X).shape == tuple(tnn.Unflatten(-1, (-1, 2))(torch.tensor(X)).shape)
    with pytest.raises(RuntimeError):
        nn.Unflatten(1, (3, 3))(X)
    with pytest.raises(RuntimeError):
        tnn.Unflatten(1, (3, 3))(torch.tensor(X))


class Routed(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 1)])
        self.heads = nn.ModuleDict({"act": nn.Identity()})

    def forward(self, x):
        for m in self.blocks:
            x = m(x)
        return (self.heads["act"](x) ** 2).mean()


def test_compiled_step_sees_module_list_and_module_dict_swaps():
    model = Routed()
    step = autodiff.value_and_grad(model, wrt=model.parameters())

    def check():
        value, grads = step(X)
        ref_value, ref_grads = autodiff.value_and_grad(lambda x: model(x), wrt=list(model.parameters()))(X)
        np.testing.assert_allclose(float(value), float(model(tracer.tensor(X)).item()), rtol=1e-6)
        for g, r in zip(grads, ref_grads, strict=True):
            np.testing.assert_allclose(g.numpy(), r.numpy(), rtol=1e-5, atol=1e-7)

    check()
    model.blocks[1] = nn.Tanh()
    check()
    model.heads["act"] = nn.Sigmoid()
    check()
    model.blocks.insert(2, nn.ReLU())
    check()
