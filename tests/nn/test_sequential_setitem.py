"""nn.Sequential.__setitem__ / __delitem__ as torch's, seen by a compiled step (issue 19 item 20)."""
import numpy as np
import pytest

import autodiff
import nn
import tracer
from nn import functional as F

torch = pytest.importorskip("torch")

X = np.random.default_rng(0).standard_normal((4, 3)).astype("float32")


def _model():
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    ref = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    with torch.no_grad():
        for p, tp in zip(model.parameters(), ref.parameters(), strict=True):
            tp.copy_(torch.tensor(p.numpy()))
    return model, ref


def test_setitem_replaces_the_module_in_place_and_in_order():
    model, ref = _model()
    model[1], ref[1] = nn.Tanh(), torch.nn.Tanh()
    model[-1], ref[-1] = nn.Linear(4, 2), torch.nn.Linear(4, 2)
    assert [type(m).__name__ for m in model] == [type(m).__name__ for m in ref] == ["Linear", "Tanh", "Linear"]
    assert [n for n, _ in model.named_parameters()] == [n for n, _ in ref.named_parameters()]
    assert model[2] is list(model)[2] and len(model) == 3
    with torch.no_grad():
        ref[2].weight.copy_(torch.tensor(model[2].weight.numpy()))
        ref[2].bias.copy_(torch.tensor(model[2].bias.numpy()))
    np.testing.assert_allclose(model(tracer.tensor(X)).numpy(), ref(torch.tensor(X)).detach().numpy(), rtol=1e-5,
                               atol=1e-6)


def test_a_compiled_step_sees_the_swap():
    model, _ = _model()
    labels = np.array([0, 1, 1, 0])
    step = autodiff.value_and_grad(lambda x: F.cross_entropy(model(x), labels), wrt=model.parameters())
    step(X)
    model[1] = nn.Tanh()  # holds no tensor: only a guard on the module can notice
    value, grads = step(X)
    eager = autodiff.value_and_grad(lambda x: F.cross_entropy(model(x), labels), wrt=model.parameters(),
                                    check=True)(X)
    np.testing.assert_allclose(float(value), float(F.cross_entropy(model(tracer.tensor(X)), labels)), rtol=1e-6)
    for g, e in zip(grads, eager[1], strict=True):
        np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=1e-5, atol=1e-7)


def test_delitem_as_torch():
    model, ref = _model()
    del model[1]
    del ref[1]
    assert len(model) == len(ref) == 2 and [n for n, _ in model.named_parameters()] == \
        [n for n, _ in ref.named_parameters()]


def test_setitem_errors():
    model, _ = _model()
    with pytest.raises(IndexError, match="index 3 is out of range for a Sequential of 3"):
        model[3] = nn.Tanh()
    with pytest.raises(TypeError, match="Sequential\\[1\\] = value: value must be a Module, got function"):
        model[1] = lambda x: x
    with pytest.raises(TypeError, match="an int index"):
        model[0:1] = nn.Tanh()
