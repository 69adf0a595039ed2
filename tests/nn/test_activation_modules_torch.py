"""Activation modules against torch: outputs and gradients (input and PReLU's weight) in float32 and float64,
eagerly, in value_and_grad and with backward(); inplace= semantics; reprs and state dicts."""
import numpy as np
import pytest

import autodiff
import nn
import tracer
from nn import functional as F

from .torch_compare import TOL, assert_module_matches

rng = np.random.default_rng(0)
# values on and around every kink of these functions (0, +-0.5, +-1, +-3, 6, the thresholds), and wide ones
KINKS = np.array([-7.0, -3.0, -1.0, -0.5, 0.0, 0.5, 1.0, 3.0, 6.0, 25.0])


def _x(*shape):
    return np.concatenate([KINKS, rng.standard_normal(int(np.prod(shape)) - KINKS.size) * 3]).reshape(shape)


X = _x(2, 4, 3)
SAME = {  # name: (args, kwargs) given to both nn.<name> and torch.nn.<name>
    "ReLU": ((), {}), "ReLU6": ((), {}), "LeakyReLU": ((0.2,), {}), "ELU": ((0.7,), {}), "SELU": ((), {}),
    "CELU": ((1.5,), {}), "Mish": ((), {}), "Softplus": ((), dict(beta=2.0, threshold=4.0)), "Softsign": ((), {}),
    "Hardtanh": ((-2.0, 1.5), {}), "Hardsigmoid": ((), {}), "Hardswish": ((), {}), "Tanhshrink": ((), {}),
    "Softshrink": ((0.5,), {}), "Hardshrink": ((1.0,), {}), "Threshold": ((0.5, -2.0), {}), "GLU": ((1,), {}),
    "LogSigmoid": ((), {}), "Softmin": ((1,), {}), "Softmax2d": ((), {}), "SiLU": ((), {}), "Sigmoid": ((), {}),
    "Tanh": ((), {}), "GELU": ((), dict(approximate="tanh")), "GELU_exact": ((), {}), "Softmax": ((-1,), {}),
    "LogSoftmax": ((0,), {}), "PReLU": ((), {}), "PReLU_channels": ((4, 0.1), {}),
}


def _cls(ns, name):
    return getattr(ns, name.split("_")[0])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", SAME)
def test_activation_module_matches_torch(name, dtype):
    torch = pytest.importorskip("torch")
    args, kw = SAME[name]
    factory = dict(dtype=dtype) if name.startswith("PReLU") else {}
    # torch's float64 hardsigmoid backward multiplies by 1/6 rounded to float32 (a 3e-8 relative error); tracegrad's
    # slope is the float64 1/6
    tol = dict(rtol=1e-7, atol=1e-12) if name == "Hardsigmoid" and dtype == "float64" else None
    assert_module_matches(torch, lambda: _cls(nn, name)(*args, **kw, **factory),
                          lambda: _cls(torch.nn, name)(*args, **kw, **{k: getattr(torch, v) for k, v in factory.items()}),
                          [X], dtype, tol=tol)


def test_reprs_and_state_dicts_are_torchs():
    torch = pytest.importorskip("torch")
    made = [("ReLU", (True,), {}), ("ReLU6", (), dict(inplace=True)), ("LeakyReLU", (0.2,), dict(inplace=True)),
            ("ELU", (), {}), ("ELU", (0.5, True), {}), ("SELU", (True,), {}), ("CELU", (), {}), ("Mish", (True,), {}),
            ("Softplus", (), {}), ("Hardtanh", (-2, 2, True), {}), ("Hardsigmoid", (True,), {}),
            ("Hardswish", (True,), {}), ("Softshrink", (), {}), ("Hardshrink", (0.3,), {}),
            ("Threshold", (0.1, 20, True), {}), ("PReLU", (3, 0.1), {}), ("GLU", (), {}), ("Softmin", (), {}),
            ("Softmax2d", (), {}), ("SiLU", (True,), {}), ("GELU", (), {}), ("LogSigmoid", (), {}),
            ("Tanhshrink", (), {}), ("Softsign", (), {})]
    for name, args, kw in made:
        ours, theirs = getattr(nn, name)(*args, **kw), getattr(torch.nn, name)(*args, **kw)
        assert repr(ours) == repr(theirs)
        assert {k: v.shape for k, v in ours.state_dict().items()} == \
            {k: tuple(v.shape) for k, v in theirs.state_dict().items()}
    np.testing.assert_array_equal(nn.PReLU(3, 0.1).weight.numpy(), torch.nn.PReLU(3, 0.1).weight.detach().numpy())


INPLACE = [("ReLU", ()), ("ReLU6", ()), ("LeakyReLU", (0.2,)), ("ELU", (0.7,)), ("SELU", ()), ("CELU", (1.5,)),
           ("Mish", ()), ("Hardtanh", (-2.0, 1.5)), ("Hardsigmoid", ()), ("Hardswish", ()), ("Threshold", (0.5, -2.0)),
           ("SiLU", ())]


@pytest.mark.parametrize("name,args", INPLACE)
def test_inplace_overwrites_like_torch_and_refuses_a_leaf_that_requires_grad(name, args):
    torch = pytest.importorskip("torch")
    ours, theirs = getattr(nn, name)(*args, inplace=True), getattr(torch.nn, name)(*args, inplace=True)
    gtol = dict(rtol=1e-7, atol=1e-12) if name == "Hardsigmoid" else TOL["float64"]  # torch's float32 1/6, above
    x, tx = tracer.tensor(X.copy()), torch.tensor(X.copy())
    assert ours(x) is x and theirs(tx) is tx  # the input itself, overwritten
    np.testing.assert_allclose(x.numpy(), tx.numpy(), **TOL["float64"])
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        theirs(torch.tensor(X, requires_grad=True))
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        ours(tracer.tensor(X, requires_grad=True))
    # on a recorded non-leaf torch overwrites and differentiates; tracegrad returns the same values out of place
    w = rng.uniform(0.5, 1.5, X.shape)
    tleaf = torch.tensor(X, requires_grad=True)
    want = theirs(tleaf * 1.5)
    (want * torch.tensor(w)).sum().backward()
    leaf = tracer.tensor(X, requires_grad=True)
    got = ours(leaf * 1.5)
    (got * tracer.tensor(w)).sum().backward()
    np.testing.assert_allclose(got.numpy(), want.detach().numpy(), **TOL["float64"])
    np.testing.assert_allclose(leaf.grad.numpy(), tleaf.grad.numpy(), **gtol)
    # inside a compiled step the intermediate is overwritten (rebound) and differentiated
    xt = tracer.tensor(X)
    value, grad = autodiff.value_and_grad(lambda a: (ours(a * 1.5) * w).sum(), wrt=xt)(xt)
    np.testing.assert_allclose(float(value), (want * torch.tensor(w)).sum().item(), **TOL["float64"])
    np.testing.assert_allclose(np.asarray(grad), tleaf.grad.numpy(), **gtol)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_functional_activations_match_torch(dtype):
    torch = pytest.importorskip("torch")
    tf = torch.nn.functional
    slopes = rng.uniform(0.1, 0.5, 4).astype(dtype)
    calls = {
        "relu": lambda m, a: m.relu(a), "leaky_relu": lambda m, a: m.leaky_relu(a, 0.3), "elu": lambda m, a: m.elu(a, 2.0),
        "silu": lambda m, a: m.silu(a), "mish": lambda m, a: m.mish(a), "softplus": lambda m, a: m.softplus(a, 0.5, 3.0),
        "prelu": lambda m, a: m.prelu(a, slopes if m is F else torch.tensor(slopes)),
        "logsigmoid": lambda m, a: m.logsigmoid(a), "gelu": lambda m, a: m.gelu(a, approximate="tanh"),
        "threshold": lambda m, a: m.threshold(a, 1.0, 0.5), "softmin": lambda m, a: m.softmin(a, dim=2),
    }
    x = X.astype(dtype)
    for name, call in calls.items():
        tx = torch.tensor(x, requires_grad=True)
        want = call(tf, tx)
        want.sum().backward()
        xt = tracer.tensor(x)
        value, grad = autodiff.value_and_grad(lambda a, call=call: call(F, a).sum(), wrt=xt)(xt)
        got = call(F, x)
        assert got.dtype == dtype, name
        np.testing.assert_allclose(got.numpy(), want.detach().numpy(), **TOL[dtype], err_msg=name)
        np.testing.assert_allclose(np.asarray(grad), tx.grad.numpy(), **TOL[dtype], err_msg=name)


def test_activation_errors():
    with pytest.raises(ValueError, match="Softmax2d: expected input to be 3D or 4D"):
        nn.Softmax2d()(np.zeros((2, 3), "float32"))
    with pytest.raises(RuntimeError, match="prelu: mismatch"):
        nn.PReLU(3)(np.zeros((2, 4), "float32"))
    with pytest.raises(ValueError, match="max_val"):
        nn.Hardtanh(1.0, -1.0)
    with pytest.raises(ValueError, match="glu: halving dimension must be even"):
        nn.GLU(0)(np.zeros((3, 2), "float32"))
